#!/usr/bin/env bash
# Usage: tests/data/debezium/make-fixtures.sh [schemas|noschemas]...
#
# Regenerates records-schemas.jsonl and records-noschemas.jsonl in this directory from a
# real Debezium: for each JsonConverter setting (default: both), on a fresh private stack
# (Kafka broker, application PostgreSQL with wal_level=logical, Kafka Connect with the
# Debezium PostgreSQL connector, all under one throwaway state dir):
#   1. app_schema.sql, then app_seed.sql (rows that exist before the connector starts)
#   2. scripts/connect.sh start, wait-streaming (the snapshot gives op "r" records)
#   3. app_changes.sql, scripts/connect.sh wait-caught-up
#   4. scripts/connect.sh capture records-<setting>.jsonl
# and stops everything it started. Two runs take about 3 minutes (capture waits 10 s
# per topic for more records).
#
# Environment (ports of the fixture stack; none may be in use):
#   FIXTURE_STATE_DIR     [<repo>/.local/debezium-fixtures]  (removed at each run)
#   FIXTURE_KAFKA_PORT    [19290] (controller +1)
#   FIXTURE_PG_PORT       [15450]
#   FIXTURE_CONNECT_PORT  [18083]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$HERE/../../.." && pwd)"
SCRIPTS="$REPO_DIR/scripts"
STATE="${FIXTURE_STATE_DIR:-$REPO_DIR/.local/debezium-fixtures}"

export DENORMD_STATE_DIR="$STATE"
export DENORMD_KAFKA_PORT="${FIXTURE_KAFKA_PORT:-19290}"
export DENORMD_PG_PORT="${FIXTURE_PG_PORT:-15450}" DENORMD_PG_DB=app DENORMD_PG_WAL_LEVEL=logical
export DENORMD_CONNECT_PORT="${FIXTURE_CONNECT_PORT:-18083}"
export DENORMD_CONNECT_DB_PORT="$DENORMD_PG_PORT" DENORMD_CONNECT_DB_NAME=app
export DENORMD_CONNECT_TOPIC_PREFIX=app DENORMD_CONNECT_NAME=denormd-app DENORMD_CONNECT_SLOT=denormd_app

step() { echo "==> $*" >&2; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; }

stop_all() {
  bash "$SCRIPTS/connect.sh" stop >/dev/null 2>&1 || true
  bash "$SCRIPTS/kafka.sh" stop >/dev/null 2>&1 || true
  bash "$SCRIPTS/postgres.sh" stop >/dev/null 2>&1 || true
}

run() { # schemas|noschemas
  local setting="$1" out="$HERE/records-$1.jsonl"
  case "$setting" in
    schemas) export DENORMD_CONNECT_SCHEMAS_ENABLE=true ;;
    noschemas) export DENORMD_CONNECT_SCHEMAS_ENABLE=false ;;
    *) usage; exit 2 ;;
  esac
  step "$setting: fresh stack in $STATE"
  stop_all
  rm -rf "$STATE"
  bash "$SCRIPTS/postgres.sh" start >/dev/null
  bash "$SCRIPTS/kafka.sh" start >/dev/null
  local psql=(bash "$SCRIPTS/postgres.sh" psql -X -q -v ON_ERROR_STOP=1)
  "${psql[@]}" -f "$HERE/app_schema.sql"
  "${psql[@]}" -f "$HERE/app_seed.sql"
  step "$setting: Kafka Connect with the Debezium PostgreSQL connector (schemas.enable=$DENORMD_CONNECT_SCHEMAS_ENABLE)"
  bash "$SCRIPTS/connect.sh" start >/dev/null
  bash "$SCRIPTS/connect.sh" wait-streaming
  step "$setting: app_changes.sql"
  "${psql[@]}" -f "$HERE/app_changes.sql"
  bash "$SCRIPTS/connect.sh" wait-caught-up
  step "$setting: capture into $out"
  bash "$SCRIPTS/connect.sh" capture "$out"
  stop_all
}

case "${1:-}" in -h|--help) usage; exit 0 ;; esac
trap stop_all EXIT
settings=("$@")
[[ ${#settings[@]} -gt 0 ]] || settings=(schemas noschemas)
for s in "${settings[@]}"; do run "$s"; done
step "done: $(for s in "${settings[@]}"; do echo -n "records-$s.jsonl ($(wc -l <"$HERE/records-$s.jsonl") records) "; done)"
