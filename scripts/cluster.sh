#!/usr/bin/env bash
# Usage: scripts/cluster.sh start | stop | status | env
#        scripts/cluster.sh broker N start|stop|kill      (N = 1, 2, 3)
#        scripts/cluster.sh postgres primary|standby start|stop|kill
#        scripts/cluster.sh promote
#
# The production topology on this one machine, for fault tests and the benchmark:
# a 3-node Apache Kafka cluster (KRaft, each node broker and controller, from the
# same Maven jars as scripts/kafka.sh; replication factor 3 and
# min.insync.replicas 2 for new and internal topics) and a PostgreSQL primary
# with a streaming standby (Debian's PostgreSQL, physical replication from a
# slot; scripts/postgres.sh with DENORMD_PG_STANDBY_OF). Each server has its own
# ports and data directory under the state dir.
#
#   start     starts what is not running (the three brokers side by side: a quorum
#             forms only with two of them), then prints `env`
#   stop      stops everything (brokers with SIGTERM, PostgreSQL fast)
#   status    one line per server; exit 3 if any is not running
#   env       the settings a daemon uses with it, as shell exports:
#             DENORMD_KAFKA_BROKERS (the three bootstrap addresses) and DENORMD_POSTGRES
#             (both servers, target_session_attrs=read-write: libpq connects to
#             whichever is the primary, so a promoted standby is found by itself)
#   broker N  start, stop or SIGKILL one broker
#   postgres  start, stop or kill -9 (the postmaster) the primary or the standby
#   promote   the standby ends recovery and becomes the primary
#
# Environment:
#   DENORMD_CLUSTER_STATE_DIR   state root (default <repo>/.local/cluster)
#   DENORMD_CLUSTER_KAFKA_PORT  broker 1's port (default 19400); broker N listens on
#                               PORT + 10 (N - 1), its controller on that + 1
#   DENORMD_CLUSTER_PG_PORT     the primary's port (default 15450); the standby's is + 1
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
STATE_DIR="$(realpath -m -- "${DENORMD_CLUSTER_STATE_DIR:-$REPO_DIR/.local/cluster}")"
KAFKA_BASE="${DENORMD_CLUSTER_KAFKA_PORT:-19400}"
PG_PRIMARY="${DENORMD_CLUSTER_PG_PORT:-15450}"
PG_STANDBY=$((PG_PRIMARY + 1))
NODES=(1 2 3)

log() { echo "cluster.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; }

broker_port() { echo $((KAFKA_BASE + 10 * ($1 - 1))); }
voters() {
  local n out=""
  for n in "${NODES[@]}"; do out+="${out:+,}$n@127.0.0.1:$(($(broker_port "$n") + 1))"; done
  echo "$out"
}
bootstrap() {
  local n out=""
  for n in "${NODES[@]}"; do out+="${out:+,}127.0.0.1:$(broker_port "$n")"; done
  echo "$out"
}
# One node's scripts/kafka.sh: its own state dir and ports, the cluster's voters.
kafka() {
  local n="$1"; shift
  DENORMD_STATE_DIR="$STATE_DIR/kafka-$n" DENORMD_KAFKA_PORT="$(broker_port "$n")" \
    DENORMD_KAFKA_NODE_ID="$n" DENORMD_KAFKA_VOTERS="$(voters)" DENORMD_KAFKA_REPLICATION=3 \
    DENORMD_KAFKA_CLUSTER_ID="$(cluster_id)" DENORMD_KAFKA_START_TIMEOUT=180 \
    bash "$SCRIPT_DIR/kafka.sh" "$@"
}
# The cluster id every node's storage is formatted with (made once).
cluster_id() {
  local file="$STATE_DIR/kafka-cluster.id"
  if [[ ! -s "$file" ]]; then
    mkdir -p "$STATE_DIR"
    # 16 random bytes, base64url without padding: Kafka's Uuid form.
    head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=' >"$file"
  fi
  cat "$file"
}
postgres() {
  local role="$1"; shift
  if [[ "$role" == primary ]]; then
    DENORMD_STATE_DIR="$STATE_DIR/pg-primary" DENORMD_PG_PORT="$PG_PRIMARY" \
      bash "$SCRIPT_DIR/postgres.sh" "$@"
  else
    DENORMD_STATE_DIR="$STATE_DIR/pg-standby" DENORMD_PG_PORT="$PG_STANDBY" \
      DENORMD_PG_STANDBY_OF="$PG_PRIMARY" bash "$SCRIPT_DIR/postgres.sh" "$@"
  fi
}
postgres_kill() {  # kill -9 of the postmaster (its children end with it)
  local dir="$STATE_DIR/pg-$1/postgres" pid
  [[ -f "$dir/postmaster.pid" ]] || { log "postgres $1 is not running"; return 0; }
  pid="$(head -1 "$dir/postmaster.pid")"
  kill -9 "$pid" 2>/dev/null && log "killed postgres $1 (pid $pid)"
}

cmd_env() {
  echo "export DENORMD_KAFKA_BROKERS=$(bootstrap)"
  echo "export DENORMD_POSTGRES='postgresql://postgres@127.0.0.1:$PG_PRIMARY,127.0.0.1:$PG_STANDBY/denorm?target_session_attrs=read-write'"
}

cmd_start() {
  bash "$SCRIPT_DIR/kafka.sh" fetch
  cluster_id >/dev/null   # made here, once: the nodes below start side by side
  local n failed=0
  local -a pids=()
  for n in "${NODES[@]}"; do
    kafka "$n" start >/dev/null 2>"$STATE_DIR/kafka-$n.start.log" &
    pids+=($!)
  done
  for n in "${!pids[@]}"; do
    if ! wait "${pids[$n]}"; then
      failed=1
      log "broker $((n + 1)) did not start:"
      cat "$STATE_DIR/kafka-$((n + 1)).start.log" >&2
    fi
  done
  ((failed == 0)) || die "the Kafka cluster did not start"
  log "Kafka: 3 brokers on $(bootstrap) (replication factor 3, min.insync.replicas 2)"
  postgres primary start >/dev/null
  postgres standby start >/dev/null
  log "PostgreSQL: primary on 127.0.0.1:$PG_PRIMARY, standby on 127.0.0.1:$PG_STANDBY (streaming)"
  cmd_env
}

cmd_stop() {
  local n
  for n in "${NODES[@]}"; do kafka "$n" stop || true; done
  postgres standby stop || true
  postgres primary stop || true
}

cmd_status() {
  local n bad=0
  for n in "${NODES[@]}"; do
    if kafka "$n" status >/dev/null 2>&1; then echo "broker $n: running on 127.0.0.1:$(broker_port "$n")"
    else echo "broker $n: not running"; bad=1; fi
  done
  for role in primary standby; do
    if postgres "$role" status >/dev/null 2>&1; then echo "postgres $role: running"
    else echo "postgres $role: not running"; bad=1; fi
  done
  ((bad == 0)) || return 3
}

mkdir -p "$STATE_DIR"
case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  promote) postgres standby promote ;;
  broker)
    [[ "${2:-}" =~ ^[123]$ ]] || die "broker N: N is 1, 2 or 3"
    case "${3:-}" in
      start|stop) kafka "$2" "$3" ;;
      kill)
        pid="$(cat "$STATE_DIR/kafka-$2/kafka/kafka.pid" 2>/dev/null || true)"
        [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null && log "killed broker $2 (pid $pid)" ;;
      *) die "broker N start|stop|kill" ;;
    esac ;;
  postgres)
    [[ "${2:-}" == primary || "${2:-}" == standby ]] || die "postgres primary|standby ..."
    case "${3:-}" in
      start|stop) postgres "$2" "$3" ;;
      kill) postgres_kill "$2" ;;
      *) die "postgres primary|standby start|stop|kill" ;;
    esac ;;
  -h|--help|help) usage ;;
  *) usage; exit 2 ;;
esac
