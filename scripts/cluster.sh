#!/usr/bin/env bash
# Usage: scripts/cluster.sh start | stop | status | env
#        scripts/cluster.sh broker N start|stop|kill      (N = 1, 2, 3)
#        scripts/cluster.sh postgres primary|standby start|stop|kill
#        scripts/cluster.sh promote | rejoin | primary
#        scripts/cluster.sh partition postgres cut|heal
#        scripts/cluster.sh disk fill|free
#        scripts/cluster.sh clean
#
# The production topology on this one machine, for fault tests and the benchmark:
# a 3-node Apache Kafka cluster (KRaft, each node broker and controller, from the
# same Maven jars as scripts/kafka.sh; replication factor 3 and
# min.insync.replicas 2 for new and internal topics; a broker that stops
# heartbeating fenced after 5 s, not 9) and a PostgreSQL primary
# with a streaming standby (Debian's PostgreSQL, physical replication from a
# slot; scripts/postgres.sh with DENORMD_PG_STANDBY_OF), synchronous
# (synchronous_standby_names '*': a commit is acknowledged once the standby has
# it, so a promotion loses no acknowledged commit). Each server has its own
# ports and data directory under the state dir; with DENORMD_CLUSTER_PG_DISK_MB
# each PostgreSQL's data directory sits on a tmpfs of that size (its WAL beside
# it, on the state dir's disk), so that `disk fill` can fill it.
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
#   promote   the standby ends recovery and becomes the primary; as it has no standby
#             now, it stops waiting for one (synchronous_standby_names '')
#   rejoin    the server that is not running is made again, as a fresh standby of the
#             primary (a base backup), and the primary waits for it again
#   primary   prints which server is the primary now: "primary" or "standby" (the
#             names are the servers' data directories; after a promote the standby is
#             the primary), exit 3 if neither is reachable and writable
#   partition postgres cut|heal
#             cut: packets between anything and either PostgreSQL server's port are
#             dropped (an nftables table of the cluster's own, on this machine's
#             loopback), so they vanish instead of being refused, as in a network
#             partition; heal: the table is deleted
#   disk fill|free
#             fill: a file takes every free byte of the primary's data filesystem
#             (needs DENORMD_CLUSTER_PG_DISK_MB); free: it is removed
#   clean     stops everything, unmounts the tmpfs and deletes the state dir
#
# Environment:
#   DENORMD_CLUSTER_STATE_DIR   state root (default <repo>/.local/cluster)
#   DENORMD_CLUSTER_KAFKA_PORT  broker 1's port (default 19400); broker N listens on
#                               PORT + 10 (N - 1), its controller on that + 1
#   DENORMD_CLUSTER_PG_PORT     the primary's port (default 15450); the standby's is + 1
#   DENORMD_CLUSTER_PG_DISK_MB  each PostgreSQL's data on a tmpfs of this many MiB (as root;
#                               default: none, the state dir's filesystem)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
STATE_DIR="$(realpath -m -- "${DENORMD_CLUSTER_STATE_DIR:-$REPO_DIR/.local/cluster}")"
KAFKA_BASE="${DENORMD_CLUSTER_KAFKA_PORT:-19400}"
PG_PRIMARY="${DENORMD_CLUSTER_PG_PORT:-15450}"
PG_STANDBY=$((PG_PRIMARY + 1))
PG_DISK_MB="${DENORMD_CLUSTER_PG_DISK_MB:-}"
# The nftables table of `partition`: one per cluster (its primary's port).
NFT_TABLE="denormd_cluster_$PG_PRIMARY"
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
# What the nodes add to kafka.sh's configuration: a broker that stops
# heartbeating is fenced by the controller after 5 s instead of 9 s, so the
# leaders and the group and transaction coordinators it held move sooner (a
# client can move no faster than that).
broker_extra_config() {
  local file="$STATE_DIR/kafka-extra.properties"
  printf '%s\n' "broker.session.timeout.ms=5000" "broker.heartbeat.interval.ms=1000" >"$file"
  echo "$file"
}
# One node's scripts/kafka.sh: its own state dir and ports, the cluster's voters.
kafka() {
  local n="$1"; shift
  DENORMD_KAFKA_EXTRA_CONFIG="$(broker_extra_config)" \
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
    # 16 random bytes, base64url without padding: Kafka's Uuid form. Like
    # Kafka's own Uuid.randomUuid, never one that begins with '-': the storage
    # tool would read it as an option ("--cluster-id: expected one argument").
    local id="-"
    while [[ "$id" == -* ]]; do
      id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
    done
    echo "$id" >"$file"
  fi
  cat "$file"
}
pg_port() { if [[ "$1" == primary ]]; then echo "$PG_PRIMARY"; else echo "$PG_STANDBY"; fi; }
other_role() { if [[ "$1" == primary ]]; then echo standby; else echo primary; fi; }
# One server's scripts/postgres.sh. A server made from nothing is a standby of
# `standby_of` (a port) when given, else initdb'd.
postgres_as() {
  local role="$1" standby_of="$2"; shift 2
  mount_pg_disk "$role"
  DENORMD_STATE_DIR="$STATE_DIR/pg-$role" DENORMD_PG_PORT="$(pg_port "$role")" \
    DENORMD_PG_WAL_DIR="$STATE_DIR/pg-$role-wal" DENORMD_PG_STANDBY_OF="$standby_of" \
    bash "$SCRIPT_DIR/postgres.sh" "$@"
}
postgres() {
  if [[ "$1" == primary ]]; then postgres_as primary "" "${@:2}"
  else postgres_as standby "$PG_PRIMARY" "${@:2}"; fi
}
# The tmpfs under a server's state dir (DENORMD_CLUSTER_PG_DISK_MB), mounted once.
mount_pg_disk() {
  [[ -n "$PG_DISK_MB" ]] || return 0
  local dir="$STATE_DIR/pg-$1"
  mountpoint -q "$dir" && return 0
  [[ $EUID -eq 0 ]] || die "DENORMD_CLUSTER_PG_DISK_MB needs root (mount -t tmpfs)"
  mkdir -p "$dir"
  mount -t tmpfs -o "size=${PG_DISK_MB}m,mode=0755" tmpfs "$dir" || die "mount tmpfs on $dir"
}
psql_at() {  # psql_at PORT SQL: one value, or nothing when the server does not answer
  psql -X -q -At -h 127.0.0.1 -p "$1" -U postgres -d postgres -c "$2" 2>/dev/null || true
}
# The role whose server answers and is not in recovery.
current_primary() {
  local role
  for role in primary standby; do
    [[ "$(psql_at "$(pg_port "$role")" "select pg_is_in_recovery()")" == f ]] && { echo "$role"; return 0; }
  done
  return 3
}
# The primary waits for a standby's confirmation before a commit returns ('*'),
# or for none ('').
set_synchronous() {
  psql_at "$1" "alter system set synchronous_standby_names = '$2'" >/dev/null
  psql_at "$1" "select pg_reload_conf()" >/dev/null
}
broker_kill() {  # kill -9 of a broker's JVM
  local pid
  pid="$(cat "$STATE_DIR/kafka-$1/kafka/kafka.pid" 2>/dev/null || true)"
  [[ -n "$pid" ]] || { log "broker $1 is not running"; return 0; }
  kill -9 "$pid" 2>/dev/null && log "killed broker $1 (pid $pid)"
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
  if ((failed != 0)); then
    for n in "${NODES[@]}"; do kafka "$n" stop >/dev/null 2>&1 || true; done
    die "the Kafka cluster did not start (the brokers that did are stopped again)"
  fi
  log "Kafka: 3 brokers on $(bootstrap) (replication factor 3, min.insync.replicas 2)"
  postgres primary start >/dev/null
  postgres standby start >/dev/null
  set_synchronous "$PG_PRIMARY" '*'
  log "PostgreSQL: primary on 127.0.0.1:$PG_PRIMARY, standby on 127.0.0.1:$PG_STANDBY (streaming, synchronous)"
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

cmd_promote() {
  local role port
  for role in standby primary; do
    port="$(pg_port "$role")"
    if [[ "$(psql_at "$port" "select pg_is_in_recovery()")" == t ]]; then
      postgres_as "$role" "" promote
      set_synchronous "$port" ''
      return 0
    fi
  done
  die "no server in recovery to promote"
}

cmd_rejoin() {
  local primary lost primary_port
  primary="$(current_primary)" || die "no primary answers"
  lost="$(other_role "$primary")"
  primary_port="$(pg_port "$primary")"
  postgres_as "$lost" "" stop >/dev/null 2>&1 || true
  log "rejoin: $lost made again as a standby of $primary (127.0.0.1:$primary_port)"
  rm -rf "${STATE_DIR:?}/pg-$lost/postgres" "${STATE_DIR:?}/pg-$lost/postgres.init.tmp"
  psql_at "$primary_port" "select pg_drop_replication_slot(slot_name) from pg_replication_slots
                           where slot_name = 'standby_$(pg_port "$lost")' and not active" >/dev/null
  postgres_as "$lost" "$primary_port" start >/dev/null
  set_synchronous "$primary_port" '*'
}

cmd_partition() {
  [[ "${1:-}" == postgres ]] || die "partition postgres cut|heal"
  command -v nft >/dev/null 2>&1 || die "nft not found; run scripts/install-deps.sh"
  case "${2:-}" in
    cut)
      nft delete table inet "$NFT_TABLE" 2>/dev/null || true
      nft -f - <<EOF
table inet $NFT_TABLE {
  chain output {
    type filter hook output priority 0; policy accept;
    tcp dport { $PG_PRIMARY, $PG_STANDBY } drop
    tcp sport { $PG_PRIMARY, $PG_STANDBY } drop
  }
}
EOF
      log "partition: packets to and from 127.0.0.1:$PG_PRIMARY and :$PG_STANDBY are dropped" ;;
    heal)
      nft delete table inet "$NFT_TABLE" 2>/dev/null || true
      log "partition healed" ;;
    *) die "partition postgres cut|heal" ;;
  esac
}

cmd_disk() {
  [[ -n "$PG_DISK_MB" ]] || die "disk: the data is not on a tmpfs of its own (set DENORMD_CLUSTER_PG_DISK_MB before start)"
  local primary ballast
  case "${1:-}" in
    fill)
      primary="$(current_primary)" || die "no primary answers"
      ballast="$STATE_DIR/pg-$primary/ballast"
      # Every free block: the server's next extension of a file fails with
      # "No space left on device" (its WAL is elsewhere, so it keeps running).
      fallocate -l "$(($(stat -f -c '%a * %S' "$STATE_DIR/pg-$primary")))" "$ballast" 2>/dev/null ||
        dd if=/dev/zero of="$ballast" bs=1M status=none 2>/dev/null || true
      log "disk: the $primary's data filesystem is full ($(df --output=avail -B1 "$STATE_DIR/pg-$primary" | tail -1 | tr -d ' ') bytes free)" ;;
    free)
      rm -f "$STATE_DIR/pg-primary/ballast" "$STATE_DIR/pg-standby/ballast"
      log "disk: space freed" ;;
    *) die "disk fill|free" ;;
  esac
}

# Everything is thrown away, so nothing is stopped gracefully: a broker's
# controlled shutdown waits long once the quorum is gone.
cmd_clean() {
  local n role
  for n in "${NODES[@]}"; do broker_kill "$n" >/dev/null 2>&1 || true; done
  for role in primary standby; do postgres_kill "$role" >/dev/null 2>&1 || true; done
  nft delete table inet "$NFT_TABLE" 2>/dev/null || true
  for role in primary standby; do
    # The server's processes end when they notice their postmaster gone.
    for _ in $(seq 1 100); do
      mountpoint -q "$STATE_DIR/pg-$role" || break
      umount "$STATE_DIR/pg-$role" 2>/dev/null && break
      sleep 0.1
    done
  done
  rm -rf "${STATE_DIR:?}"
}

mkdir -p "$STATE_DIR"
case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  promote) cmd_promote ;;
  rejoin) cmd_rejoin ;;
  primary) current_primary ;;
  partition) cmd_partition "${2:-}" "${3:-}" ;;
  disk) cmd_disk "${2:-}" ;;
  clean) cmd_clean ;;
  broker)
    [[ "${2:-}" =~ ^[123]$ ]] || die "broker N: N is 1, 2 or 3"
    case "${3:-}" in
      start|stop) kafka "$2" "$3" ;;
      kill) broker_kill "$2" ;;
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
