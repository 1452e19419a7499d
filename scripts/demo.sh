#!/usr/bin/env bash
# Usage: scripts/demo.sh
#
# The main job on a fresh machine, in one command: installs the packages,
# builds denormd, starts a private PostgreSQL, replays the article's example
# event log (tests/data/article/events.jsonl) with the example config, and
# shows a few of the resulting documents with plain SQL.
#
# Environment: DENORMD_STATE_DIR, DENORMD_PG_PORT (see scripts/README.md).
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_DIR"
step() { echo "==> $*" >&2; }

step "installing packages (skipped when present)"
bash scripts/install-deps.sh
step "building denormd"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target denormd -j 2
step "starting PostgreSQL"
DENORMD_POSTGRES="$(bash scripts/postgres.sh start)"
export DENORMD_POSTGRES
CONFIG=tests/data/article/config.yaml

step "denormd check -c $CONFIG"
build/denormd check -c "$CONFIG"
step "denormd replay -c $CONFIG tests/data/article/events.jsonl"
build/denormd replay -c "$CONFIG" tests/data/article/events.jsonl
step "denormd verify -c $CONFIG"
build/denormd verify -c "$CONFIG"

show() {
  echo
  echo "-- $1"
  bash scripts/postgres.sh psql -X -q -t -A -c "select jsonb_pretty(doc) from $2" 2>/dev/null
}
show "an author with its pre-calculated countOfBooks and book ids" "article.authors where id = 'a1'"
show "a book carrying copies of its authors' names and thumbnails" "article.books where id = 'b1'"
show "a post with its three most recent comments" "article.posts where id = 'p1'"
echo
echo "PostgreSQL is still running: $DENORMD_POSTGRES"
echo "  look around:  scripts/postgres.sh psql -c 'select id, doc from article.catalog'"
echo "  status:       DENORMD_POSTGRES=$DENORMD_POSTGRES build/denormd status -c $CONFIG"
echo "  stop it:      scripts/postgres.sh stop"
