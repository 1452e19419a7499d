#!/usr/bin/env bash
# Usage: scripts/demo.sh [--debezium]
#
# --debezium: the same documents fed by an existing database through Debezium
# instead (scripts/demo-debezium.sh).
#
# The main job on a fresh machine, in one command: installs the packages,
# builds denormd, starts a private PostgreSQL and a real Apache Kafka broker,
# publishes the article's example event log (tests/data/article/events.jsonl)
# to the topic of the example config, runs the daemon on it, and shows some of
# the resulting documents with plain SQL. The daemon keeps running until
# Ctrl-C; publish more events meanwhile from another terminal with
#   build/denormd publish -c tests/data/article/config.yaml FILE
# (with DENORMD_KAFKA_BROKERS as printed below).
#
# Environment: DENORMD_STATE_DIR, DENORMD_PG_PORT, DENORMD_KAFKA_PORT
# (see scripts/README.md). The servers keep running after the demo; stop them
# with scripts/postgres.sh stop and scripts/kafka.sh stop.
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_DIR"
if [[ "${1:-}" == --debezium ]]; then exec bash scripts/demo-debezium.sh; fi
step() { echo "==> $*" >&2; }
CONFIG=tests/data/article/config.yaml
TOPIC=article.entities

step "installing packages (skipped when present)"
bash scripts/install-deps.sh
step "building denormd"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target denormd -j 2
step "starting PostgreSQL and Kafka"
DENORMD_POSTGRES="$(bash scripts/postgres.sh start)"
DENORMD_KAFKA_BROKERS="$(bash scripts/kafka.sh start)"
export DENORMD_POSTGRES DENORMD_KAFKA_BROKERS
bash scripts/kafka.sh topic-create "$TOPIC" 4

step "denormd check -c $CONFIG"
build/denormd check -c "$CONFIG"
# A demo run starts from a clean slate of documents; the topic keeps what
# earlier runs published, and replaying it again changes nothing (versions).
bash scripts/postgres.sh psql -X -q -c "drop schema if exists article cascade" >/dev/null
step "denormd publish -c $CONFIG tests/data/article/events.jsonl"
build/denormd publish -c "$CONFIG" tests/data/article/events.jsonl

step "denormd run -c $CONFIG --metrics-port 9464   (Ctrl-C stops it)"
build/denormd run -c "$CONFIG" --metrics-port 9464 &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon' INT TERM

# Wait until the daemon has caught up: every partition of the topic at lag 0.
for _ in $(seq 1 600); do
  caught_up=$(build/denormd status -c "$CONFIG" 2>/dev/null | grep -c ", lag 0;" || true)
  [[ "$caught_up" == 4 ]] && break
  kill -0 $daemon 2>/dev/null || { echo "the daemon exited" >&2; exit 1; }
  sleep 0.2
done

show() {
  echo
  echo "-- $1"
  bash scripts/postgres.sh psql -X -q -t -A -c "select jsonb_pretty(doc) from $2" 2>/dev/null
}
show "an author with its pre-calculated countOfBooks and book ids" "article.authors where id = 'a1'"
show "a book carrying copies of its authors' names and thumbnails" "article.books where id = 'b1'"
show "a post with its three most recent comments" "article.posts where id = 'p1'"
echo
build/denormd status -c "$CONFIG"
dead=$(bash scripts/postgres.sh psql -X -q -t -A -c "select count(*) from article.dead_letters" 2>/dev/null || echo "?")
cat <<EOT

The daemon is still running (pid $daemon); Ctrl-C stops it. The $dead dead letters are
the example's deliberate bad lines (an unknown entity type, broken JSON, ...): see them
with the psql command below. The config names no server, so give the commands the
demo's (another shell, same folder):

  export DENORMD_POSTGRES='$DENORMD_POSTGRES' DENORMD_KAFKA_BROKERS=$DENORMD_KAFKA_BROKERS
  build/denormd status -c $CONFIG           # positions, lag, counts, dead letters
  build/denormd verify -c $CONFIG           # recompute every document and compare
  scripts/postgres.sh psql -c 'select id, doc from article.books'
  scripts/postgres.sh psql -c 'select position, reason from article.dead_letters'
  curl -s http://127.0.0.1:9464/metrics
  build/denormd publish -c $CONFIG FILE      # more events (JSON Lines)
EOT
wait $daemon
