#!/usr/bin/env bash
# Usage: scripts/demo-debezium.sh      (or scripts/demo.sh --debezium)
#
# denormd fed by an existing database, on a fresh machine, in one command: an
# "application" PostgreSQL (wal_level=logical) with normalized tables
# (tests/data/debezium/app_schema.sql: authors, books, book_authors, posts,
# comments), Kafka Connect running the Debezium PostgreSQL connector
# (scripts/connect.sh; jars from Maven Central, cached under .local), a Kafka
# broker, and `denormd run` with tests/data/debezium/config.yaml. It shows the
# documents of the seed rows (Debezium's snapshot), then runs SQL statements in
# the application database and shows the same documents change. The daemon
# keeps running until Ctrl-C; change rows meanwhile with
#   DENORMD_STATE_DIR=.local/app DENORMD_PG_PORT=15434 DENORMD_PG_DB=app scripts/postgres.sh psql
# (a relative DENORMD_STATE_DIR is taken from the directory the command runs in)
#
# Each run starts over: new application tables, a new replication slot and
# snapshot, topics under a new prefix (demo<unix time>.public.*), an empty
# document schema app_docs.
#
# Environment: DENORMD_STATE_DIR, DENORMD_PG_PORT, DENORMD_KAFKA_PORT (denormd's
# store and the broker, as scripts/demo.sh); DENORMD_APP_PG_PORT (the application
# database, default 15434); DENORMD_CONNECT_PORT (Connect's REST port, default 18083).
# Everything keeps running after the demo, which says so when it ends; stop all
# of it with scripts/demo.sh stop (from any directory).
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Relative to the caller's directory, before the scripts run in the repository.
STATE_DIR="$(realpath -m -- "${DENORMD_STATE_DIR:-$REPO_DIR/.local}")"
export DENORMD_STATE_DIR="$STATE_DIR"
cd "$REPO_DIR"
step() { echo "==> $*" >&2; }
APP_PG_PORT="${DENORMD_APP_PG_PORT:-15434}"
PREFIX="demo$(date +%s)"
DEMO_DIR="$STATE_DIR/demo-debezium"
CONFIG="$DEMO_DIR/config.yaml"

# The application database and the connector: their own environment.
app() {
  DENORMD_STATE_DIR="$STATE_DIR/app" DENORMD_PG_PORT="$APP_PG_PORT" DENORMD_PG_DB=app \
    DENORMD_PG_WAL_LEVEL=logical DENORMD_CONNECT_DB_PORT="$APP_PG_PORT" \
    DENORMD_CONNECT_TOPIC_PREFIX="$PREFIX" DENORMD_CONNECT_BOOTSTRAP="$DENORMD_KAFKA_BROKERS" \
    "$@"
}
app_sql() { app bash scripts/postgres.sh psql -X -q -v ON_ERROR_STOP=1 "$@"; }
connect() { app bash scripts/connect.sh "$@"; }  # its state: $STATE_DIR/app/connect

step "installing packages (skipped when present)"
bash scripts/install-deps.sh
step "building denormd"
# The suite's configuration (scripts/test.sh), so that it compiles nothing twice.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDENORMD_WERROR=ON >/dev/null
cmake --build build --target denormd -j 2
step "starting PostgreSQL (documents), Kafka, and the application's PostgreSQL (wal_level=logical)"
DENORMD_POSTGRES="$(bash scripts/postgres.sh start)"
DENORMD_KAFKA_BROKERS="$(bash scripts/kafka.sh start)"
export DENORMD_POSTGRES DENORMD_KAFKA_BROKERS
app bash scripts/postgres.sh start >/dev/null

step "application tables and seed rows (tests/data/debezium/app_schema.sql, app_seed.sql)"
connect stop
connect reset 2>/dev/null   # a new slot: Debezium snapshots the seed rows
app_sql -f tests/data/debezium/app_schema.sql
app_sql -f tests/data/debezium/app_seed.sql

step "Kafka Connect with the Debezium PostgreSQL connector (topics $PREFIX.public.*)"
connect start
connect wait-streaming
connect config | sed 's/^/    /' >&2

mkdir -p "$DEMO_DIR"
sed -e "s/topic: app\.public\./topic: $PREFIX.public./" -e "s/group: denormd-app/group: $PREFIX/" \
  tests/data/debezium/config.yaml >"$CONFIG"
step "denormd check -c $CONFIG"
build/denormd check -c "$CONFIG"
bash scripts/postgres.sh psql -X -q -c "set client_min_messages = warning; drop schema if exists app_docs cascade" >/dev/null
step "denormd run -c $CONFIG --metrics-port 9465   (Ctrl-C stops it)"
build/denormd run -c "$CONFIG" --metrics-port 9465 &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon' INT TERM
trap 'bash "$REPO_DIR/scripts/demo.sh" status' EXIT

docs() { bash scripts/postgres.sh psql -X -q -t -A -c "$1" 2>/dev/null || true; }
# Waits (at most 60 s) until the SQL query $1 prints $2.
wait_for() {
  for _ in $(seq 1 300); do
    [[ "$(docs "$1")" == "$2" ]] && return 0
    kill -0 $daemon 2>/dev/null || { echo "the daemon exited" >&2; exit 1; }
    sleep 0.2
  done
  echo "timed out waiting for: $1 = $2" >&2
  return 1
}
show() {
  echo
  echo "-- $1"
  docs "select jsonb_pretty(doc) from $2"
}

# The book's authors' names, in the document's order.
authors_of() {
  echo "select string_agg(a->>'name', ', ' order by n) from app_docs.books,
          jsonb_array_elements(doc->'authors') with ordinality as t(a, n) where id = '$1'"
}
# The snapshot's documents, the links included (each table has its own topic).
wait_for "$(authors_of b1)" "Thomas Andersen, William Wakefield"
wait_for "select doc->>'countOfBooks' from app_docs.authors where id = 'a1'" 2
show "author a1 (row of authors; countOfBooks and bookIds go through book_authors; images is jsonb)" \
  "app_docs.authors where id = 'a1'"
show "book b1 with its authors, looked up through book_authors" "app_docs.books where id = 'b1'"

step "SQL in the application: rename author a1; book b1 loses author a2 and gains a new author a3"
app_sql <<'SQL'
update authors set last_name = 'Andersen-Smith' where id = 'a1';
insert into authors (id, first_name, last_name, images)
  values ('a3', 'Dirk', 'Stinger', '[{"thumbnail": "https://img.example/a3-t.png"}]');
begin;
delete from book_authors where book_id = 'b1' and author_id = 'a2';
insert into book_authors (book_id, author_id, position) values ('b1', 'a3', 2);
commit;
SQL
wait_for "$(authors_of b1)" "Thomas Andersen-Smith, Dirk Stinger"
wait_for "$(authors_of b2)" "Thomas Andersen-Smith"
wait_for "select doc->>'bookIds' from app_docs.authors where id = 'a2'" "[]"
show "book b1 now: a2 gone, a3 added, a1 renamed" "app_docs.books where id = 'b1'"
show "book b2: the rename reached it through its book_authors row" "app_docs.books where id = 'b2'"
show "author a2 lost book b1" "app_docs.authors where id = 'a2'"
show "author a3 gained it" "app_docs.authors where id = 'a3'"

step "SQL in the application: two comments on post p1, one deleted"
app_sql <<'SQL'
insert into comments (id, post_id, author, comment, created_at) values
  ('c3', 'p1', 'angry', 'comment number 3', '2024-01-02 03:04:07.5+00'),
  ('c4', 'p1', 'bored', 'comment number 4', '2024-01-02 03:04:07.123456+00');
delete from comments where id = 'c1';
SQL
wait_for "select jsonb_array_length(doc->'recentComments') from app_docs.posts where id = 'p1'" 3
show "post p1 with its three most recent comments" "app_docs.posts where id = 'p1'"
echo
build/denormd verify -c "$CONFIG" && echo "verify: every document is exact"
cat <<EOT

The daemon is still running (pid $daemon); Ctrl-C stops it. Change rows of the
application and watch the documents follow:
  application: DENORMD_STATE_DIR=$STATE_DIR/app DENORMD_PG_PORT=$APP_PG_PORT DENORMD_PG_DB=app scripts/postgres.sh psql
  documents:   scripts/postgres.sh psql -c 'select id, doc from app_docs.books'
  connector:   DENORMD_STATE_DIR=$STATE_DIR/app scripts/connect.sh rest connectors/denormd-app/status
  metrics:     curl -s http://127.0.0.1:9465/metrics
EOT
wait $daemon
