#!/usr/bin/env bash
# Usage: scripts/demo.sh [--debezium]
#        scripts/demo.sh status | stop
#
# --debezium: the same documents fed by an existing database through Debezium
# instead (scripts/demo-debezium.sh).
# status: which servers either demo left running (Kafka Connect, the
# application database, Kafka, PostgreSQL); stop: stops all of them. Both work
# from any directory, with the demo's environment (DENORMD_STATE_DIR, ports).
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
# (see scripts/README.md). The servers keep running after the demo, which says
# so when it ends; `scripts/demo.sh stop` stops them.
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Relative to the caller's directory, before the scripts run in the repository.
STATE_DIR="$(realpath -m -- "${DENORMD_STATE_DIR:-$REPO_DIR/.local}")"
cd "$REPO_DIR"
export DENORMD_STATE_DIR="$STATE_DIR"
APP_PG_PORT="${DENORMD_APP_PG_PORT:-15434}"

# Every server either demo may have left running, with its own state.
servers() {
  local app=(env DENORMD_STATE_DIR="$STATE_DIR/app" DENORMD_PG_PORT="$APP_PG_PORT")
  case "$1" in
    status)
      "${app[@]}" bash scripts/connect.sh status >/dev/null 2>&1 && echo "  Kafka Connect (Debezium)"
      "${app[@]}" bash scripts/postgres.sh status >/dev/null 2>&1 &&
        echo "  the application's PostgreSQL on 127.0.0.1:$APP_PG_PORT"
      bash scripts/kafka.sh status >/dev/null 2>&1 && echo "  Kafka on 127.0.0.1:${DENORMD_KAFKA_PORT:-19092}"
      bash scripts/postgres.sh status >/dev/null 2>&1 &&
        echo "  PostgreSQL on 127.0.0.1:${DENORMD_PG_PORT:-15432}"
      return 0 ;;
    stop)
      "${app[@]}" bash scripts/connect.sh stop
      "${app[@]}" bash scripts/postgres.sh stop
      bash scripts/kafka.sh stop
      bash scripts/postgres.sh stop ;;
  esac
}
# Said when a demo ends, by Ctrl-C or otherwise.
say_still_running() {
  local running
  running="$(servers status)"
  [[ -n "$running" ]] || return 0
  printf '\nStill running (the documents stay; the next demo reuses them):\n%s\nStop all of it with: %s stop\n' \
    "$running" "$REPO_DIR/scripts/demo.sh" >&2
}
if [[ "${1:-}" == stop ]]; then servers stop; exit 0; fi
if [[ "${1:-}" == status ]]; then say_still_running; exit 0; fi
if [[ "${1:-}" == --debezium ]]; then exec bash scripts/demo-debezium.sh; fi
step() { echo "==> $*" >&2; }
CONFIG=tests/data/article/config.yaml
TOPIC=article.entities

step "installing packages (skipped when present)"
bash scripts/install-deps.sh
step "building denormd, while PostgreSQL and Kafka start"
# The servers start beside the compiler (they wait on I/O and the JVM, it on the
# CPU); their messages are shown once both are done.
mkdir -p "$STATE_DIR"
services_log="$STATE_DIR/demo-services.log"
(
  bash scripts/postgres.sh start >"$STATE_DIR/demo-postgres.url" &&
    bash scripts/kafka.sh start >"$STATE_DIR/demo-kafka.url" &&
    bash scripts/kafka.sh topic-create "$TOPIC" 4
) >"$services_log" 2>&1 &
services=$!
# The suite's configuration (scripts/test.sh), so that it compiles nothing twice.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDENORMD_WERROR=ON >/dev/null
cmake --build build --target denormd -j 2
step "PostgreSQL and Kafka"
services_ok=0
wait "$services" || services_ok=$?
cat "$services_log" >&2
[[ "$services_ok" == 0 ]] || { echo "demo.sh: starting PostgreSQL or Kafka failed (above)" >&2; exit 1; }
DENORMD_POSTGRES="$(cat "$STATE_DIR/demo-postgres.url")"
DENORMD_KAFKA_BROKERS="$(cat "$STATE_DIR/demo-kafka.url")"
export DENORMD_POSTGRES DENORMD_KAFKA_BROKERS

step "denormd check -c $CONFIG"
build/denormd check -c "$CONFIG"
# A demo run starts from a clean slate of documents; the topic keeps what
# earlier runs published, and replaying it again changes nothing (versions).
bash scripts/postgres.sh psql -X -q -c "set client_min_messages = warning; drop schema if exists article cascade" >/dev/null
step "denormd publish -c $CONFIG tests/data/article/events.jsonl"
build/denormd publish -c "$CONFIG" tests/data/article/events.jsonl

step "denormd run -c $CONFIG --metrics-port 9464   (Ctrl-C stops it)"
build/denormd run -c "$CONFIG" --metrics-port 9464 &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon' INT TERM
trap say_still_running EXIT

# Wait until the daemon has caught up: every partition of the topic at lag 0.
for _ in $(seq 1 600); do
  caught_up=$(build/denormd status -c "$CONFIG" 2>/dev/null | grep -c ", lag 0 events;" || true)
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
with the psql command below. The config's store.postgres and source.kafka.brokers
name other servers than the demo's, so give the commands the demo's (another
shell, same folder):

  export DENORMD_POSTGRES='$DENORMD_POSTGRES' DENORMD_KAFKA_BROKERS=$DENORMD_KAFKA_BROKERS
  build/denormd status -c $CONFIG           # positions, lag, counts, dead letters
  build/denormd verify -c $CONFIG           # recompute every document and compare
  scripts/postgres.sh psql -c 'select id, doc from article.books'
  scripts/postgres.sh psql -c 'select source, partition, position, reason from article.dead_letters order by 1, 2, 3'
  curl -s http://127.0.0.1:9464/metrics
  build/denormd publish -c $CONFIG FILE      # more events (JSON Lines)
EOT
wait $daemon
