#!/usr/bin/env bash
# The scripts take a relative DENORMD_STATE_DIR from the directory they run
# in, whatever directory their commands change to, and `scripts/demo.sh
# status` / `stop` find and stop what a demo left running, from any
# directory. (A stop that printed "not running" while the server ran, because
# postgres.sh changed directory before pg_ctl, was a newcomer's first trap.)
#
# Usage: demo_stop_test.sh REPO_DIR (ctest passes it). Starts a private
# PostgreSQL on DENORMD_TEST_SCRIPTS_PG_PORT (default 15437) in a temporary
# state directory and stops it again.
set -euo pipefail
REPO_DIR="$1"
PORT="${DENORMD_TEST_SCRIPTS_PG_PORT:-15437}"
WORK="$(mktemp -d)"
trap 'DENORMD_STATE_DIR="$WORK/state" DENORMD_PG_PORT=$PORT bash "$REPO_DIR/scripts/postgres.sh" stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cd "$WORK"
DENORMD_STATE_DIR=state DENORMD_PG_PORT=$PORT bash "$REPO_DIR/scripts/postgres.sh" start >/dev/null 2>&1 ||
  fail "postgres.sh start with a relative state dir"
[[ -d "$WORK/state/postgres" ]] || fail "the relative state dir was not taken from the caller's directory"

# The same relative path from the same directory finds the running server.
DENORMD_STATE_DIR=state DENORMD_PG_PORT=$PORT bash "$REPO_DIR/scripts/postgres.sh" status >/dev/null 2>&1 ||
  fail "postgres.sh status with a relative state dir says not running"

# demo.sh status names it, from another directory, with the same state dir.
mkdir -p "$WORK/elsewhere/deeper"
cd "$WORK/elsewhere/deeper"
out="$(DENORMD_STATE_DIR=../../state DENORMD_PG_PORT=$PORT bash "$REPO_DIR/scripts/demo.sh" status 2>&1)"
grep -q "PostgreSQL on 127.0.0.1:$PORT" <<<"$out" || fail "demo.sh status did not name the server: $out"
grep -q "Stop all of it with: $REPO_DIR/scripts/demo.sh stop" <<<"$out" ||
  fail "demo.sh status did not give the stop command: $out"

# demo.sh stop stops it (and says nothing of servers it did not find running).
DENORMD_STATE_DIR=../../state DENORMD_PG_PORT=$PORT bash "$REPO_DIR/scripts/demo.sh" stop >/dev/null 2>&1 ||
  fail "demo.sh stop failed"
cd "$WORK"
if DENORMD_STATE_DIR=state DENORMD_PG_PORT=$PORT bash "$REPO_DIR/scripts/postgres.sh" status >/dev/null 2>&1; then
  fail "PostgreSQL still runs after demo.sh stop"
fi
out="$(DENORMD_STATE_DIR=state DENORMD_PG_PORT=$PORT bash "$REPO_DIR/scripts/demo.sh" status 2>&1)"
[[ -z "$out" ]] || fail "demo.sh status after stop still lists: $out"
echo "1 passed, 0 failed"
