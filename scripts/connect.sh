#!/usr/bin/env bash
# Usage: scripts/connect.sh COMMAND [ARGS]
#
# A private Kafka Connect worker (standalone mode) running the Debezium PostgreSQL
# connector against an "application" PostgreSQL database, for tests and demos of
# denormd's Debezium input. No tarball, no Docker: the worker's and the connector's
# jars come from Maven Central through scripts/connect/worker-pom.xml and
# scripts/connect/debezium-pom.xml; offline after the first fetch.
#
# Commands:
#   fetch          download the worker jars and the connector (no-op when already complete;
#                  tries `mvn -o` before going online)
#   start          fetch if needed, check the application database (reachable, wal_level=logical),
#                  write worker.properties and connector.properties from the environment, start
#                  the worker in the background and wait until the connector and its task are
#                  RUNNING (no-op if running); prints the REST URL
#   stop           SIGTERM (offsets flushed), wait, then SIGKILL (no-op if not running)
#   kill           SIGKILL at once, for crash tests: what was sent after the last offset flush
#                  is sent again at the next start
#   status         exit 0 if the worker runs (connector status JSON on stdout), 3 if not
#   wait-running   wait until the connector and its task are RUNNING (exit 1 on FAILED/timeout)
#   wait-streaming wait until the connector streams changes (its snapshot, if any, is done):
#                  Debezium logs "Processing messages" (since the last start)
#   wait-caught-up wait until what was committed in the application database before this call
#                  is in Kafka: the slot's walsender has sent past the current WAL position, then
#                  Connect's offsets file stays unchanged for 3 flush intervals (3 s)
#   config         print the connector properties that start uses (stdout)
#   rest PATH      GET http://127.0.0.1:PORT/PATH and print the body, e.g.
#                  `rest connectors/denormd-app/status`, `rest connectors/denormd-app/topics`
#   topics         print the topics the connector has written to, one a line
#   capture FILE   write every record of the connector's topics, from the beginning, to FILE as
#                  JSON Lines {"topic","partition","offset","key","value"} (key and value parsed;
#                  a tombstone's value is null); needs scripts/kafka.sh's broker (same env)
#   reset          (worker stopped) delete the stored offsets and drop the replication slot in
#                  the application database: the next start takes a new snapshot
#
# Environment (defaults in brackets):
#   DENORMD_STATE_DIR                state root [<repo>/.local]
#   DENORMD_CONNECT_PORT             REST port on 127.0.0.1 [18083]
#   DENORMD_CONNECT_BOOTSTRAP        Kafka bootstrap [127.0.0.1:$DENORMD_KAFKA_PORT, i.e. 19092]
#   DENORMD_CONNECT_NAME             connector name (keys the stored offsets) [denormd-app]
#   DENORMD_CONNECT_DB_HOST / _DB_PORT / _DB_NAME / _DB_USER / _DB_PASSWORD
#                                    the application database [127.0.0.1 / 15434 / app / postgres / ""]
#   DENORMD_CONNECT_TOPIC_PREFIX     topic.prefix: topics are PREFIX.SCHEMA.TABLE [app]
#   DENORMD_CONNECT_TABLES           table.include.list
#                                    [public.authors,public.books,public.book_authors,public.posts,public.comments]
#   DENORMD_CONNECT_SLOT             replication slot name [denormd_app]
#   DENORMD_CONNECT_PUBLICATION      publication name [denormd_app]
#   DENORMD_CONNECT_SCHEMAS_ENABLE   JsonConverter schemas.enable for keys and values, true|false [true]
#   DENORMD_CONNECT_SNAPSHOT_MODE    snapshot.mode [initial]
#   DENORMD_CONNECT_EXTRA_CONFIG     a properties file appended to connector.properties (overrides)
#   DENORMD_CONNECT_EXTRA_WORKER_CONFIG  a properties file appended to worker.properties
#   DENORMD_CONNECT_HEAP_OPTS        worker JVM options ["-Xms256m -Xmx512m -XX:+UseSerialGC"]
#   DENORMD_CONNECT_START_TIMEOUT    seconds to wait for RUNNING at start [120]
#   DENORMD_CONNECT_STOP_TIMEOUT     seconds to wait after SIGTERM before SIGKILL [30]
#   DENORMD_CONNECT_LIB_DIR          where the jars go [<repo>/.local/connect/lib, shared by all state dirs]
#   DENORMD_MAVEN_REPO               Maven local repository [Maven's own, ~/.m2/repository]
#
# State: $DENORMD_STATE_DIR/connect/{worker.properties,connector.properties,offsets.dat,
# connect.pid,logs/}; jars: $DENORMD_CONNECT_LIB_DIR/{worker,plugins/debezium-connector-postgres}.
# The application database must run with wal_level=logical: e.g.
#   DENORMD_STATE_DIR=$PWD/.local/app DENORMD_PG_PORT=15434 DENORMD_PG_DB=app \
#     DENORMD_PG_WAL_LEVEL=logical scripts/postgres.sh start
# Reset: scripts/connect.sh stop && scripts/connect.sh reset
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
# shellcheck source=lib/process.sh
source "$SCRIPT_DIR/lib/process.sh"
# Relative to the caller's directory, whichever directory a command runs in later.
STATE_DIR="$(realpath -m -- "${DENORMD_STATE_DIR:-$REPO_DIR/.local}")"
CONNECT_DIR="$STATE_DIR/connect"
# The jars are shared by every state dir (test runs, demos), like the broker's.
LIB_ROOT="${DENORMD_CONNECT_LIB_DIR:-$REPO_DIR/.local/connect/lib}"
WORKER_LIB="$LIB_ROOT/worker"
PLUGIN_PATH="$LIB_ROOT/plugins"
CONNECTOR_LIB="$PLUGIN_PATH/debezium-connector-postgres"
LOG_DIR="$CONNECT_DIR/logs"
WORKER_CONF="$CONNECT_DIR/worker.properties"
CONNECTOR_CONF="$CONNECT_DIR/connector.properties"
OFFSETS="$CONNECT_DIR/offsets.dat"
PID_FILE="$CONNECT_DIR/connect.pid"
WORKER_POM="$SCRIPT_DIR/connect/worker-pom.xml"
DEBEZIUM_POM="$SCRIPT_DIR/connect/debezium-pom.xml"
LOG4J_CONF="$SCRIPT_DIR/connect/log4j2.properties"
PORT="${DENORMD_CONNECT_PORT:-18083}"
REST="http://127.0.0.1:$PORT"
BOOTSTRAP="${DENORMD_CONNECT_BOOTSTRAP:-127.0.0.1:${DENORMD_KAFKA_PORT:-19092}}"
NAME="${DENORMD_CONNECT_NAME:-denormd-app}"
DB_HOST="${DENORMD_CONNECT_DB_HOST:-127.0.0.1}"
DB_PORT="${DENORMD_CONNECT_DB_PORT:-15434}"
DB_NAME="${DENORMD_CONNECT_DB_NAME:-app}"
DB_USER="${DENORMD_CONNECT_DB_USER:-postgres}"
DB_PASSWORD="${DENORMD_CONNECT_DB_PASSWORD:-}"
TOPIC_PREFIX="${DENORMD_CONNECT_TOPIC_PREFIX:-app}"
TABLES="${DENORMD_CONNECT_TABLES:-public.authors,public.books,public.book_authors,public.posts,public.comments}"
SLOT="${DENORMD_CONNECT_SLOT:-denormd_app}"
PUBLICATION="${DENORMD_CONNECT_PUBLICATION:-denormd_app}"
SCHEMAS_ENABLE="${DENORMD_CONNECT_SCHEMAS_ENABLE:-true}"
SNAPSHOT_MODE="${DENORMD_CONNECT_SNAPSHOT_MODE:-initial}"
HEAP_OPTS="${DENORMD_CONNECT_HEAP_OPTS:--Xms256m -Xmx512m -XX:+UseSerialGC}"
START_TIMEOUT="${DENORMD_CONNECT_START_TIMEOUT:-120}"
STOP_TIMEOUT="${DENORMD_CONNECT_STOP_TIMEOUT:-30}"
DEPENDENCY_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"

log() { echo "connect.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; }

[[ "$PORT" =~ ^[0-9]+$ ]] || die "DENORMD_CONNECT_PORT must be a number, got '$PORT'"
[[ "$DB_PORT" =~ ^[0-9]+$ ]] || die "DENORMD_CONNECT_DB_PORT must be a number, got '$DB_PORT'"
[[ "$SCHEMAS_ENABLE" == true || "$SCHEMAS_ENABLE" == false ]] \
  || die "DENORMD_CONNECT_SCHEMAS_ENABLE must be true or false, got '$SCHEMAS_ENABLE'"
[[ "$SLOT" =~ ^[a-z0-9_]+$ ]] || die "DENORMD_CONNECT_SLOT: lower-case letters, digits and _ only (PostgreSQL slot name), got '$SLOT'"

# --- fetch -----------------------------------------------------------------

# Fingerprint of what fetch must produce: a change to either pom forces a new fetch.
pom_stamp() { cat "$WORKER_POM" "$DEBEZIUM_POM" | sha256sum | cut -d' ' -f1; }
fetched() { [[ -f "$LIB_ROOT/.fetched" && "$(cat "$LIB_ROOT/.fetched")" == "$(pom_stamp)" ]]; }

# copy_deps POM OUTDIR LOGFILE: the pom's runtime dependencies into OUTDIR, offline first.
copy_deps() {
  local pom="$1" out="$2" fetch_log="$3"
  local -a mvn=(mvn -B -Dstyle.color=never -f "$pom" "$DEPENDENCY_PLUGIN" -DincludeScope=runtime
    -DoutputDirectory="$out" -Dmdep.useRepositoryLayout=false)
  [[ -n "${DENORMD_MAVEN_REPO:-}" ]] && mvn+=(-Dmaven.repo.local="$DENORMD_MAVEN_REPO")
  if "${mvn[@]}" -o >"$fetch_log" 2>&1; then
    log "$(basename "$pom"): resolved offline from the local Maven repository"
    return 0
  fi
  rm -rf "$out"
  log "$(basename "$pom"): not all in the local Maven repository; downloading from Maven Central"
  if ! "${mvn[@]}" >"$fetch_log" 2>&1; then
    tail -n 40 "$fetch_log" >&2
    rm -rf "$out"
    return 1
  fi
}

cmd_fetch() {
  if fetched; then
    log "jars already in $LIB_ROOT ($(find "$WORKER_LIB" -name '*.jar' | wc -l) worker jars," \
      "$(find "$CONNECTOR_LIB" -name '*.jar' | wc -l) connector jars); nothing to fetch"
    return 0
  fi
  command -v mvn >/dev/null || die "mvn not found; run scripts/install-deps.sh"
  mkdir -p "$CONNECT_DIR" "$(dirname "$LIB_ROOT")"
  # Next to LIB_ROOT, so that the final mv is a rename on one file system.
  local tmp="$LIB_ROOT.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp/plugins"
  log "fetching the Kafka Connect worker and the Debezium PostgreSQL connector with Maven" \
    "(logs: $CONNECT_DIR/fetch-*.log)"
  copy_deps "$WORKER_POM" "$tmp/worker" "$CONNECT_DIR/fetch-worker.log" \
    || { rm -rf "$tmp"; die "mvn failed; see $CONNECT_DIR/fetch-worker.log"; }
  copy_deps "$DEBEZIUM_POM" "$tmp/plugins/debezium-connector-postgres" "$CONNECT_DIR/fetch-debezium.log" \
    || { rm -rf "$tmp"; die "mvn failed; see $CONNECT_DIR/fetch-debezium.log"; }
  compgen -G "$tmp/worker/connect-runtime-*.jar" >/dev/null || die "fetch produced no connect-runtime jar"
  compgen -G "$tmp/plugins/debezium-connector-postgres/debezium-connector-postgres-*.jar" >/dev/null \
    || die "fetch produced no debezium-connector-postgres jar"
  pom_stamp >"$tmp/.fetched"
  rm -rf "$LIB_ROOT"
  mv "$tmp" "$LIB_ROOT"
  log "fetched $(find "$LIB_ROOT/worker" -name '*.jar' | wc -l) worker jars and" \
    "$(find "$CONNECTOR_LIB" -name '*.jar' | wc -l) connector jars into $LIB_ROOT ($(du -sh "$LIB_ROOT" | cut -f1))"
}

# --- process and REST helpers ------------------------------------------------

LOGPOS_FILE="$CONNECT_DIR/connect.log.startpos"

# Prints the worker's pid if it is running (the pid file names a live ConnectStandalone
# process started with our worker file), else returns 1.
running_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid cmdline
  pid="$(cat "$PID_FILE" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ && -r "/proc/$pid/cmdline" ]] || return 1
  cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ "$cmdline" == *ConnectStandalone*"$WORKER_CONF"* ]] || return 1
  echo "$pid"
}

port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

py() { command -v python3 >/dev/null || die "python3 not found; run scripts/install-deps.sh"; python3 "$@"; }

# rest_get PATH: prints the body; exit 1 when the worker does not answer, 2 on an HTTP error
# (body still printed).
rest_get() {
  py - "$REST/$1" <<'EOF'
import sys, urllib.request, urllib.error
try:
    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
        sys.stdout.write(r.read().decode())
except urllib.error.HTTPError as e:
    sys.stdout.write(e.read().decode()); sys.exit(2)
except Exception:
    sys.exit(1)
EOF
}

# Reads a connector status JSON on stdin; prints RUNNING, FAILED (with the traces on
# stderr), or the states seen.
summarize_status() {
  py -c '
import json, sys
try:
    s = json.load(sys.stdin)
except Exception:
    print("NO-STATUS"); sys.exit()
states = [s.get("connector", {}).get("state")] + [t.get("state") for t in s.get("tasks", [])]
if "FAILED" in states:
    for part in [s.get("connector", {})] + s.get("tasks", []):
        if part.get("trace"):
            sys.stderr.write(part["trace"][:4000] + "\n")
    print("FAILED")
elif len(states) >= 2 and all(x == "RUNNING" for x in states):
    print("RUNNING")
else:
    print(",".join(str(x) for x in states))
'
}

# wait_running PID|"" TIMEOUT: until connector + tasks RUNNING.
wait_running() {
  local pid="$1" timeout="$2" start=$SECONDS state="" body
  while ((SECONDS - start < timeout)); do
    if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
      log "the worker exited; last lines of its logs:"
      tail -n 20 "$LOG_DIR/connect.out" >&2 2>/dev/null || true
      tail -n 40 "$LOG_DIR/connect.log" >&2 2>/dev/null || true
      return 1
    fi
    if body="$(rest_get "connectors/$NAME/status" 2>/dev/null)"; then
      state="$(summarize_status <<<"$body")"
      case "$state" in
        RUNNING) return 0 ;;
        FAILED) log "connector $NAME FAILED (traces above; log $LOG_DIR/connect.log)"; return 1 ;;
      esac
    fi
    sleep 0.25
  done
  log "connector $NAME not RUNNING after $timeout s (last state: ${state:-no answer from $REST})"
  tail -n 40 "$LOG_DIR/connect.log" >&2 2>/dev/null || true
  return 1
}

psql_app() { # ARGS...: psql against the application database
  command -v psql >/dev/null || die "psql not found; run scripts/install-deps.sh"
  PGPASSWORD="$DB_PASSWORD" psql -X -q -v ON_ERROR_STOP=1 -h "$DB_HOST" -p "$DB_PORT" -U "$DB_USER" -d "$DB_NAME" "$@"
}

check_database() {
  command -v psql >/dev/null || { log "psql not found: not checking the application database"; return 0; }
  local wal
  if ! wal="$(psql_app -tAc 'show wal_level' 2>&1)"; then
    die "the application database $DB_USER@$DB_HOST:$DB_PORT/$DB_NAME does not answer: $wal"
  fi
  [[ "$wal" == logical ]] || die "the application database runs with wal_level=$wal; Debezium needs logical" \
    "(scripts/postgres.sh: DENORMD_PG_WAL_LEVEL=logical, applied at start)"
}

# --- configuration -------------------------------------------------------------

connector_config() {
  cat <<EOF
# Generated by scripts/connect.sh from the environment; edits are overwritten at start.
# Use DENORMD_CONNECT_EXTRA_CONFIG to override or add properties.
name=$NAME
connector.class=io.debezium.connector.postgresql.PostgresConnector
tasks.max=1
plugin.name=pgoutput
database.hostname=$DB_HOST
database.port=$DB_PORT
database.user=$DB_USER
database.password=$DB_PASSWORD
database.dbname=$DB_NAME
topic.prefix=$TOPIC_PREFIX
table.include.list=$TABLES
slot.name=$SLOT
publication.name=$PUBLICATION
# filtered: create the publication for the included tables if it does not exist
# (or set its tables to them); needs ownership of the tables.
publication.autocreate.mode=filtered
snapshot.mode=$SNAPSHOT_MODE
# numeric/decimal as exact strings ("12.50") instead of base64 bytes of the unscaled value.
decimal.handling.mode=string
# The default; timestamptz is always an ISO-8601 string in UTC (io.debezium.time.ZonedTimestamp).
time.precision.mode=adaptive
# Debezium skips truncates by default (skipped.operations=t): denormd must see them.
skipped.operations=none
# A delete is followed by a tombstone (same key, null value), for log compaction.
tombstones.on.delete=true
# Latency: how long the task sleeps when the replication stream had nothing (default 500 ms).
poll.interval.ms=50
# Topics are created by Connect with these settings (the broker's defaults would do too).
topic.creation.default.replication.factor=1
topic.creation.default.partitions=1
key.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=$SCHEMAS_ENABLE
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=$SCHEMAS_ENABLE
EOF
  if [[ -n "${DENORMD_CONNECT_EXTRA_CONFIG:-}" ]]; then
    [[ -f "$DENORMD_CONNECT_EXTRA_CONFIG" ]] || die "DENORMD_CONNECT_EXTRA_CONFIG=$DENORMD_CONNECT_EXTRA_CONFIG: no such file"
    echo "# from $DENORMD_CONNECT_EXTRA_CONFIG"
    cat "$DENORMD_CONNECT_EXTRA_CONFIG"
  fi
}

write_worker_config() {
  cat >"$WORKER_CONF" <<EOF
# Generated by scripts/connect.sh at every start; edits are overwritten.
# Use DENORMD_CONNECT_EXTRA_WORKER_CONFIG to add properties.
bootstrap.servers=$BOOTSTRAP
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=$SCHEMAS_ENABLE
value.converter.schemas.enable=$SCHEMAS_ENABLE
offset.storage.file.filename=$OFFSETS
# The default 60 s would widen what a crash (kill -9) sends again.
offset.flush.interval.ms=1000
plugin.path=$PLUGIN_PATH
# Plugins are found through their ServiceLoader manifests: starts in about half the time.
plugin.discovery=service_load
listeners=http://127.0.0.1:$PORT
rest.advertised.host.name=127.0.0.1
rest.advertised.port=$PORT
EOF
  if [[ -n "${DENORMD_CONNECT_EXTRA_WORKER_CONFIG:-}" ]]; then
    [[ -f "$DENORMD_CONNECT_EXTRA_WORKER_CONFIG" ]] \
      || die "DENORMD_CONNECT_EXTRA_WORKER_CONFIG=$DENORMD_CONNECT_EXTRA_WORKER_CONFIG: no such file"
    { echo "# from $DENORMD_CONNECT_EXTRA_WORKER_CONFIG"; cat "$DENORMD_CONNECT_EXTRA_WORKER_CONFIG"; } >>"$WORKER_CONF"
  fi
}

# --- commands --------------------------------------------------------------

cmd_start() {
  local pid
  if pid="$(running_pid)"; then
    log "already running (pid $pid), REST $REST"
    wait_running "$pid" "$START_TIMEOUT" || exit 1
    echo "$REST"
    return 0
  fi
  cmd_fetch
  command -v java >/dev/null || die "java not found; run scripts/install-deps.sh"
  port_open "$PORT" && die "port $PORT on 127.0.0.1 is already in use by another process; set DENORMD_CONNECT_PORT"
  local host="${BOOTSTRAP%:*}" kport="${BOOTSTRAP##*:}"
  timeout 2 bash -c "exec 3<>/dev/tcp/$host/$kport" 2>/dev/null \
    || die "no Kafka broker at $BOOTSTRAP (scripts/kafka.sh start; DENORMD_CONNECT_BOOTSTRAP or DENORMD_KAFKA_PORT)"
  check_database
  mkdir -p "$CONNECT_DIR" "$LOG_DIR"
  write_worker_config
  connector_config >"$CONNECTOR_CONF"

  log "starting Kafka Connect (connector $NAME: $DB_USER@$DB_HOST:$DB_PORT/$DB_NAME -> $BOOTSTRAP," \
    "topics $TOPIC_PREFIX.*; REST $REST; log $LOG_DIR/connect.log)"
  local t0=$SECONDS
  # Where this start's log lines begin (wait-streaming reads from there).
  if [[ -f "$LOG_DIR/connect.log" ]]; then stat -c %s "$LOG_DIR/connect.log"; else echo 0; fi >"$LOGPOS_FILE"
  # setsid: the worker must outlive this shell and not get the terminal's signals.
  # shellcheck disable=SC2086
  setsid java $HEAP_OPTS -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$LOG4J_CONF" -Dconnect.logs.dir="$LOG_DIR" \
    -cp "$WORKER_LIB/*" org.apache.kafka.connect.cli.ConnectStandalone "$WORKER_CONF" "$CONNECTOR_CONF" \
    </dev/null >>"$LOG_DIR/connect.out" 2>&1 &
  pid=$!
  echo "$pid" >"$PID_FILE"
  if ! wait_running "$pid" "$START_TIMEOUT"; then
    kill -0 "$pid" 2>/dev/null && { log "stopping the half-started worker"; cmd_stop || true; }
    rm -f "$PID_FILE"
    exit 1
  fi
  log "connector $NAME RUNNING (worker pid $pid) in $((SECONDS - t0)) s"
  echo "$REST"
}

cmd_wait_streaming() {
  local pid start=$SECONDS pos
  pid="$(running_pid)" || die "not running"
  pos="$(cat "$LOGPOS_FILE" 2>/dev/null || echo 0)"
  while ((SECONDS - start < START_TIMEOUT)); do
    kill -0 "$pid" 2>/dev/null || die "the worker exited; see $LOG_DIR/connect.log"
    if logged_since "$LOG_DIR/connect.log" pos "Processing messages"; then
      log "connector $NAME is streaming (waited $((SECONDS - start)) s)"
      return 0
    fi
    sleep 0.25
  done
  die "connector $NAME not streaming after $START_TIMEOUT s; see $LOG_DIR/connect.log"
}

cmd_wait_caught_up() {
  local pid start=$SECONDS target sent="" stamp last_change
  pid="$(running_pid)" || die "not running"
  target="$(psql_app -tAc 'select pg_current_wal_lsn()')" || die "the application database does not answer"
  while :; do
    ((SECONDS - start < START_TIMEOUT)) || die "slot $SLOT: walsender not past $target after $START_TIMEOUT s (sent: ${sent:-none})"
    kill -0 "$pid" 2>/dev/null || die "the worker exited; see $LOG_DIR/connect.log"
    sent="$(psql_app -tAc "select r.sent_lsn >= '$target'::pg_lsn from pg_replication_slots s
      join pg_stat_replication r on r.pid = s.active_pid where s.slot_name = '$SLOT'")"
    [[ "$sent" == t ]] && break
    sleep 0.1
  done
  # Connect rewrites the offsets file at a flush (every second) only when records were acknowledged.
  last_change=$SECONDS
  stamp="$(stat -c "%y %s" "$OFFSETS" 2>/dev/null || echo none)"
  while ((SECONDS - last_change < 3)); do
    ((SECONDS - start < START_TIMEOUT)) || die "offsets still changing after $START_TIMEOUT s"
    sleep 0.2
    local now; now="$(stat -c "%y %s" "$OFFSETS" 2>/dev/null || echo none)"
    if [[ "$now" != "$stamp" ]]; then stamp="$now"; last_change=$SECONDS; fi
  done
  log "caught up with $target (waited $((SECONDS - start)) s)"
}

cmd_stop() { stop_process "Kafka Connect"; }

cmd_kill() { kill_process "Kafka Connect"; }

cmd_status() {
  local pid body
  if ! pid="$(running_pid)"; then
    log "not running"
    return 3
  fi
  if body="$(rest_get "connectors/$NAME/status")"; then
    log "running (pid $pid), REST $REST, connector $NAME: $(summarize_status <<<"$body" 2>/dev/null)"
    echo "$body"
  else
    log "process running (pid $pid) but $REST does not answer (yet)"
  fi
  return 0
}

cmd_topics() {
  local body
  body="$(rest_get "connectors/$NAME/topics")" || die "no answer from $REST (is the worker running?)"
  py -c 'import json, sys; [print(t) for t in sorted(json.load(sys.stdin)[sys.argv[1]]["topics"])]' "$NAME" <<<"$body"
}

cmd_capture() {
  [[ $# -eq 1 ]] || die "usage: connect.sh capture FILE"
  local out="$1" topic tmp
  local -a topics
  mapfile -t topics < <(cmd_topics)
  [[ ${#topics[@]} -gt 0 ]] || die "the connector has written no topic yet"
  tmp="$(mktemp)"
  : >"$out"
  for topic in "${topics[@]}"; do
    log "capturing $topic"
    # Partition, offset, key and value, tab-separated; a null value (tombstone) as <null>.
    bash "$SCRIPT_DIR/kafka.sh" consume "$topic" 1000000 \
      --property print.partition=true --property print.offset=true \
      --property null.literal='<null>' >"$tmp"
    py "$SCRIPT_DIR/connect/records-to-jsonl.py" "$topic" <"$tmp" >>"$out"
  done
  rm -f "$tmp"
  log "wrote $(wc -l <"$out") records of ${#topics[@]} topics to $out"
}

cmd_reset() {
  if pid="$(running_pid)"; then die "the worker is running (pid $pid); stop it first"; fi
  rm -f "$OFFSETS" "$OFFSETS".*
  log "removed the stored offsets ($OFFSETS)"
  if command -v psql >/dev/null && psql_app -tAc 'select 1' >/dev/null 2>&1; then
    local dropped
    dropped="$(psql_app -tAc "select count(pg_drop_replication_slot(slot_name)) from pg_replication_slots where slot_name = '$SLOT'")"
    log "dropped $dropped replication slot(s) named $SLOT in $DB_NAME"
  else
    log "the application database $DB_HOST:$DB_PORT/$DB_NAME does not answer: slot $SLOT not dropped"
  fi
}

case "${1:-}" in
  fetch) cmd_fetch ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  kill) cmd_kill ;;
  status) cmd_status ;;
  wait-running) pid="$(running_pid)" || die "not running"; wait_running "$pid" "$START_TIMEOUT" ;;
  wait-streaming) cmd_wait_streaming ;;
  wait-caught-up) cmd_wait_caught_up ;;
  config) connector_config ;;
  rest) [[ $# -eq 2 ]] || die "usage: connect.sh rest PATH"; rest_get "${2#/}"; echo ;;
  topics) cmd_topics ;;
  capture) shift; cmd_capture "$@" ;;
  reset) cmd_reset ;;
  -h|--help|help) usage ;;
  *) usage; exit 2 ;;
esac
