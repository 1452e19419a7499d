#!/usr/bin/env bash
# Usage: scripts/kafka.sh COMMAND [ARGS]
#
# A private, single-node Apache Kafka 4.x broker (KRaft, combined broker+controller)
# for development and tests. No tarball, no Docker: the broker's jars come from
# Maven Central through scripts/kafka/pom.xml.
#
# Commands:
#   fetch                      download the broker + tools jars into $DENORMD_STATE_DIR/kafka/lib
#                              (no-op when already complete; tries `mvn -o` before going online)
#   start                      fetch if needed, format storage on first use, start the broker in
#                              the background and wait until it is ready (no-op if running)
#   stop                       SIGTERM, wait, then SIGKILL (no-op if not running)
#   status                     exit 0 and say so if running, exit 3 if not
#   bootstrap                  print the bootstrap address (127.0.0.1:PORT)
#   topic-create NAME PARTITIONS [KEY=VALUE...]
#                              create a topic (replication factor DENORMD_KAFKA_REPLICATION,
#                              default 1) with the topic configs
#                              given (e.g. max.message.bytes=4096); no-op if it exists
#   topic-delete TOPIC         delete the topics TOPIC names (a regular expression, as
#                              Kafka's TopicCommand reads it: 'bench\..*'); no-op if none
#   describe TOPIC             print the topic's partitions: leader, replicas, in-sync replicas
#   produce TOPIC FILE [--keyed] [ConsoleProducer options...]
#                              send each line of FILE ('-' = stdin) as one record;
#                              --keyed: each line is KEY<TAB>VALUE
#   consume TOPIC [MAX] [ConsoleConsumer options...]
#                              print records from the beginning (key<TAB>value), stop after MAX
#                              records (default 10) or 10 s without a record
#
# Environment:
#   DENORMD_STATE_DIR            state root (default: <repo>/.local)
#   DENORMD_KAFKA_PORT           PLAINTEXT port (default 19092); the controller uses PORT+1
#   DENORMD_KAFKA_START_TIMEOUT  seconds to wait for the broker at start (default 90)
#   DENORMD_KAFKA_STOP_TIMEOUT   seconds to wait after SIGTERM before SIGKILL (default 30)
#   DENORMD_KAFKA_HEAP_OPTS      broker JVM options (default "-Xms256m -Xmx512m -XX:+UseSerialGC")
#   DENORMD_KAFKA_EXTRA_CONFIG   a properties file appended to the generated server.properties
# For one node of a cluster (scripts/cluster.sh sets these; the defaults make the single node):
#   DENORMD_KAFKA_NODE_ID        node.id (default 1)
#   DENORMD_KAFKA_VOTERS         controller.quorum.voters (default 1@127.0.0.1:CONTROLLER_PORT)
#   DENORMD_KAFKA_REPLICATION    replication factor of new topics and of the internal ones
#                                (default 1); min.insync.replicas is one less (at least 1)
#   DENORMD_KAFKA_CLUSTER_ID     the cluster id its storage is formatted with (default: a new one)
#   DENORMD_KAFKA_LIB_DIR        where the jars go (default <repo>/.local/kafka/lib, shared)
#   DENORMD_MAVEN_REPO           Maven local repository (default: Maven's own, ~/.m2/repository)
#
# State: $DENORMD_STATE_DIR/kafka/{lib,data,logs,server.properties,kafka.pid,cluster.id}.
# Reset: scripts/kafka.sh stop && rm -rf "$DENORMD_STATE_DIR/kafka/data"  (keeps the jars).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
# shellcheck source=lib/process.sh
source "$SCRIPT_DIR/lib/process.sh"
# Relative to the caller's directory, whichever directory a command runs in later.
STATE_DIR="$(realpath -m -- "${DENORMD_STATE_DIR:-$REPO_DIR/.local}")"
KAFKA_DIR="$STATE_DIR/kafka"
# The jars are shared by every state dir (test runs, private brokers of tests).
LIB_DIR="${DENORMD_KAFKA_LIB_DIR:-$REPO_DIR/.local/kafka/lib}"
DATA_DIR="$KAFKA_DIR/data"
LOG_DIR="$KAFKA_DIR/logs"
CONF="$KAFKA_DIR/server.properties"
PID_FILE="$KAFKA_DIR/kafka.pid"
POM="$SCRIPT_DIR/kafka/pom.xml"
LOG4J_CONF="$SCRIPT_DIR/kafka/log4j2.properties"
PORT="${DENORMD_KAFKA_PORT:-19092}"
CONTROLLER_PORT=$((PORT + 1))
BOOTSTRAP="127.0.0.1:$PORT"
START_TIMEOUT="${DENORMD_KAFKA_START_TIMEOUT:-90}"
STOP_TIMEOUT="${DENORMD_KAFKA_STOP_TIMEOUT:-30}"
HEAP_OPTS="${DENORMD_KAFKA_HEAP_OPTS:--Xms256m -Xmx512m -XX:+UseSerialGC}"
TOOL_OPTS=(-Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1)
NODE_ID="${DENORMD_KAFKA_NODE_ID:-1}"
VOTERS="${DENORMD_KAFKA_VOTERS:-$NODE_ID@127.0.0.1:$CONTROLLER_PORT}"
REPLICATION="${DENORMD_KAFKA_REPLICATION:-1}"
MIN_ISR=$((REPLICATION > 1 ? REPLICATION - 1 : 1))
DEPENDENCY_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"

log() { echo "kafka.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; }

# Fingerprint of what fetch must produce: changes to the pom force a new fetch.
pom_stamp() { sha256sum "$POM" | cut -d' ' -f1; }
fetched() { [[ -f "$LIB_DIR/.fetched" && "$(cat "$LIB_DIR/.fetched")" == "$(pom_stamp)" ]]; }

cmd_fetch() {
  if fetched; then
    log "jars already in $LIB_DIR ($(find "$LIB_DIR" -name '*.jar' | wc -l) jars); nothing to fetch"
    return 0
  fi
  command -v mvn >/dev/null || die "mvn not found; run scripts/install-deps.sh"
  mkdir -p "$KAFKA_DIR" "$(dirname "$LIB_DIR")"
  # Next to LIB_DIR, so that the final mv is a rename on one file system.
  local tmp="$LIB_DIR.tmp.$$" fetch_log="$KAFKA_DIR/fetch.log"
  rm -rf "$tmp"
  local -a mvn=(mvn -B -Dstyle.color=never -f "$POM" "$DEPENDENCY_PLUGIN" -DincludeScope=runtime
    -DoutputDirectory="$tmp" -Dmdep.useRepositoryLayout=false)
  [[ -n "${DENORMD_MAVEN_REPO:-}" ]] && mvn+=(-Dmaven.repo.local="$DENORMD_MAVEN_REPO")
  log "fetching Kafka jars with Maven (log: $fetch_log)"
  if "${mvn[@]}" -o >"$fetch_log" 2>&1; then
    log "resolved offline from the local Maven repository"
  else
    rm -rf "$tmp"
    log "not all in the local Maven repository; downloading from Maven Central"
    if ! "${mvn[@]}" >"$fetch_log" 2>&1; then
      tail -n 40 "$fetch_log" >&2
      rm -rf "$tmp"
      die "mvn failed; see $fetch_log"
    fi
  fi
  compgen -G "$tmp/kafka_2.13-*.jar" >/dev/null || die "fetch produced no kafka_2.13 jar in $tmp"
  pom_stamp >"$tmp/.fetched"
  rm -rf "$LIB_DIR"
  mv "$tmp" "$LIB_DIR"
  log "fetched $(find "$LIB_DIR" -name '*.jar' | wc -l) jars into $LIB_DIR"
}

# --- process helpers -------------------------------------------------------

# Prints the broker's pid if it is running (the pid file names a live kafka.Kafka
# process started with our config file), else returns 1.
running_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid
  pid="$(cat "$PID_FILE" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  local cmdline
  cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ "$cmdline" == *kafka.Kafka*"$CONF"* ]] || return 1
  echo "$pid"
}

port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }


java_bin() {
  command -v java >/dev/null || die "java not found; run scripts/install-deps.sh"
  echo java
}

run_tool() { # CLASS ARGS...
  local class="$1"; shift
  if ! running_pid >/dev/null; then die "the broker is not running; run: scripts/kafka.sh start"; fi
  fetched || die "jars missing; run: scripts/kafka.sh fetch"
  mkdir -p "$LOG_DIR"
  "$(java_bin)" "${TOOL_OPTS[@]}" -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$LOG4J_CONF" -Dkafka.logs.dir="$LOG_DIR" \
    -Ddenormd.log.name=tools.log -Ddenormd.log.stderr.level="${TOOL_STDERR_LEVEL:-ERROR}" \
    -cp "$LIB_DIR/*" "$class" "$@"
}

write_config() {
  cat >"$CONF" <<EOF
# Generated by scripts/kafka.sh at every start; edits are overwritten.
# Use DENORMD_KAFKA_EXTRA_CONFIG to add properties.
process.roles=broker,controller
node.id=$NODE_ID
controller.quorum.voters=$VOTERS
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$DATA_DIR
num.partitions=1
default.replication.factor=$REPLICATION
min.insync.replicas=$MIN_ISR
offsets.topic.replication.factor=$REPLICATION
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=$REPLICATION
transaction.state.log.min.isr=$MIN_ISR
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=$REPLICATION
share.coordinator.state.topic.min.isr=$MIN_ISR
group.initial.rebalance.delay.ms=0
log.cleaner.dedupe.buffer.size=16777216
num.network.threads=2
num.io.threads=4
EOF
  if [[ -n "${DENORMD_KAFKA_EXTRA_CONFIG:-}" ]]; then
    [[ -f "$DENORMD_KAFKA_EXTRA_CONFIG" ]] || die "DENORMD_KAFKA_EXTRA_CONFIG=$DENORMD_KAFKA_EXTRA_CONFIG: no such file"
    { echo "# from $DENORMD_KAFKA_EXTRA_CONFIG"; cat "$DENORMD_KAFKA_EXTRA_CONFIG"; } >>"$CONF"
  fi
}

storage_tool() {
  "$(java_bin)" "${TOOL_OPTS[@]}" -Dlog4j2.configurationFile="$LOG4J_CONF" -Dkafka.logs.dir="$LOG_DIR" \
    -Ddenormd.log.name=tools.log -cp "$LIB_DIR/*" kafka.tools.StorageTool "$@"
}

# --- commands --------------------------------------------------------------

cmd_start() {
  local pid
  if pid="$(running_pid)"; then
    log "already running (pid $pid) on $BOOTSTRAP"
    echo "$BOOTSTRAP"
    return 0
  fi
  cmd_fetch
  local java; java="$(java_bin)"
  for p in "$PORT" "$CONTROLLER_PORT"; do
    if port_open "$p"; then
      die "port $p on 127.0.0.1 is already in use by another process ($(ss -Htlnp "sport = :$p" 2>/dev/null | grep -o 'users:.*' || echo "not listening now: a connection's end?")); set DENORMD_KAFKA_PORT"
    fi
  done
  mkdir -p "$DATA_DIR" "$LOG_DIR"
  write_config
  if [[ ! -f "$DATA_DIR/meta.properties" ]]; then
    local cluster_id
    cluster_id="${DENORMD_KAFKA_CLUSTER_ID:-}"
    [[ "$cluster_id" != -* ]] ||
      die "DENORMD_KAFKA_CLUSTER_ID '$cluster_id' begins with '-', which Kafka's storage tool reads as an option; Kafka's own ids never do"
    [[ -n "$cluster_id" ]] ||
      cluster_id="$(storage_tool random-uuid)" || die "StorageTool random-uuid failed; see $LOG_DIR/tools.log"
    log "formatting $DATA_DIR (cluster id $cluster_id)"
    storage_tool format -t "$cluster_id" -c "$CONF" >"$LOG_DIR/format.out" 2>&1 \
      || { cat "$LOG_DIR/format.out" >&2; die "storage format failed"; }
    echo "$cluster_id" >"$KAFKA_DIR/cluster.id"
  fi

  local server_log="$LOG_DIR/server.log" offset=0
  [[ -f "$server_log" ]] && offset="$(stat -c %s "$server_log")"
  log "starting broker on $BOOTSTRAP (controller 127.0.0.1:$CONTROLLER_PORT, log $server_log)"
  # setsid: the broker must outlive this shell and not get the terminal's signals.
  # shellcheck disable=SC2086
  setsid "$java" $HEAP_OPTS -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$LOG4J_CONF" -Dkafka.logs.dir="$LOG_DIR" \
    -Ddenormd.log.name=server.log -cp "$LIB_DIR/*" kafka.Kafka "$CONF" \
    </dev/null >"$LOG_DIR/kafka.out" 2>&1 &
  pid=$!
  echo "$pid" >"$PID_FILE"

  local deadline=$((SECONDS + START_TIMEOUT)) started=""
  while ((SECONDS < deadline)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      log "the broker exited during startup; last lines of its logs:"
      tail -n 30 "$LOG_DIR/kafka.out" >&2 || true
      tail -n 40 "$server_log" >&2 2>/dev/null || true
      rm -f "$PID_FILE"
      exit 1
    fi
    if [[ -f "$server_log" ]] && logged_since "$server_log" offset "Kafka Server started"; then
      started=1
    fi
    if [[ -n "$started" ]] && port_open "$PORT"; then
      log "broker ready (pid $pid) in $((SECONDS - deadline + START_TIMEOUT)) s on $BOOTSTRAP"
      echo "$BOOTSTRAP"
      return 0
    fi
    sleep 0.5
  done
  log "broker not ready after $START_TIMEOUT s; last lines of $server_log:"
  tail -n 40 "$server_log" >&2 2>/dev/null || true
  tail -n 20 "$LOG_DIR/kafka.out" >&2 || true
  log "stopping the half-started broker"
  cmd_stop || true
  exit 1
}

cmd_stop() { stop_process "broker"; }

cmd_status() {
  local pid
  if pid="$(running_pid)"; then
    if port_open "$PORT"; then
      log "running (pid $pid) on $BOOTSTRAP"
    else
      log "process running (pid $pid) but $BOOTSTRAP not accepting connections yet"
    fi
    return 0
  fi
  log "not running"
  return 3
}

cmd_topic_create() {
  [[ $# -ge 2 ]] || die "usage: kafka.sh topic-create NAME PARTITIONS [KEY=VALUE...]"
  [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "PARTITIONS must be a positive integer, got '$2'"
  local name="$1" partitions="$2" config
  local -a configs=()
  shift 2
  for config in "$@"; do
    [[ "$config" == *=* ]] || die "a topic config is KEY=VALUE, got '$config'"
    configs+=(--config "$config")
  done
  # Kafka warns about metric-name collisions for every name with a '.' or a '_';
  # names collide only when they differ in those, so the warning is kept for a
  # name holding both.
  local drop_warning='/^WARNING: Due to limitations in metric names/d'
  [[ "$name" == *.* && "$name" == *_* ]] && drop_warning=''
  run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" \
    --create --if-not-exists --topic "$name" --partitions "$partitions" --replication-factor "$REPLICATION" \
    "${configs[@]}" | sed -e "$drop_warning" >&2
  set -- "$name"
  log "topic $1 ready ($(run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" \
    --describe --topic "$1" | grep -c 'Partition: ') partitions)"
}

cmd_topic_delete() {
  [[ $# -eq 1 ]] || die "usage: kafka.sh topic-delete TOPIC (a name or a regular expression)"
  run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" \
    --delete --if-exists --topic "$1" >&2
  log "topics matching $1 deleted"
}

cmd_produce() {
  [[ $# -ge 2 ]] || die "usage: kafka.sh produce TOPIC FILE [--keyed] [ConsoleProducer options...]"
  local topic="$1" file="$2"; shift 2
  local -a extra=()
  if [[ "${1:-}" == "--keyed" ]]; then
    shift
    extra+=(--property parse.key=true --property "key.separator=$(printf '\t')")
  fi
  if [[ "$file" != "-" ]]; then
    [[ -f "$file" ]] || die "no such file: $file"
    exec <"$file"
  fi
  run_tool org.apache.kafka.tools.ConsoleProducer --bootstrap-server "$BOOTSTRAP" \
    --topic "$topic" --producer-property acks=all "${extra[@]}" "$@"
}

cmd_consume() {
  [[ $# -ge 1 ]] || die "usage: kafka.sh consume TOPIC [MAX] [ConsoleConsumer options...]"
  local topic="$1" max="${2:-10}"; shift; [[ $# -gt 0 ]] && shift
  # Reaching --timeout-ms before MAX records is logged as an ERROR: keep it in tools.log.
  TOOL_STDERR_LEVEL=FATAL run_tool org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$BOOTSTRAP" \
    --topic "$topic" --from-beginning --max-messages "$max" --timeout-ms 10000 \
    --property print.key=true --property "key.separator=$(printf '\t')" "$@"
}

case "${1:-}" in
  fetch) cmd_fetch ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  bootstrap) echo "$BOOTSTRAP" ;;
  topic-create) shift; cmd_topic_create "$@" ;;
  topic-delete) shift; cmd_topic_delete "$@" ;;
  describe)
    [[ $# -eq 2 ]] || die "usage: kafka.sh describe TOPIC"
    run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" --describe --topic "$2" ;;
  produce) shift; cmd_produce "$@" ;;
  consume) shift; cmd_consume "$@" ;;
  -h|--help|help) usage ;;
  *) usage; exit 2 ;;
esac
