#!/usr/bin/env bash
# scripts/cluster.sh starts the production topology on this machine and stops it:
# three Kafka brokers in one KRaft quorum whose new topics have three in-sync
# replicas (and min.insync.replicas 2), a PostgreSQL primary whose writes reach
# its streaming standby, the multi-host connection string of `cluster.sh env`
# reaching the primary, and after `promote` the standby (the primary stopped):
# libpq finds the new primary by itself. Then `stop` leaves nothing running.
#
# Usage: cluster_script_test.sh REPO_DIR (ctest passes it). Ports of its own:
# DENORMD_TEST_CLUSTER_KAFKA_PORT (default 19500: 19500, 19510, 19520 and +1 each)
# and DENORMD_TEST_CLUSTER_PG_PORT (default 15460 and 15461).
set -euo pipefail
REPO_DIR="$1"
WORK="$(mktemp -d)"
export DENORMD_CLUSTER_STATE_DIR="$WORK/cluster"
export DENORMD_CLUSTER_KAFKA_PORT="${DENORMD_TEST_CLUSTER_KAFKA_PORT:-19500}"
export DENORMD_CLUSTER_PG_PORT="${DENORMD_TEST_CLUSTER_PG_PORT:-15460}"
cluster() { bash "$REPO_DIR/scripts/cluster.sh" "$@"; }
trap 'cluster stop >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# The postgres OS user reaches the state dir through the temporary one.
chmod o+x "$WORK"

cluster start >"$WORK/env" 2>"$WORK/start.log" || { cat "$WORK/start.log" >&2; fail "cluster.sh start"; }
cluster status >/dev/null || fail "status after start: $(cluster status)"
# shellcheck disable=SC1091
source "$WORK/env"
[[ "$DENORMD_KAFKA_BROKERS" == *,*,* ]] || fail "env names three brokers: $DENORMD_KAFKA_BROKERS"

# A new topic: three replicas, all in sync.
kafka1() {
  DENORMD_STATE_DIR="$DENORMD_CLUSTER_STATE_DIR/kafka-1" DENORMD_KAFKA_PORT="$DENORMD_CLUSTER_KAFKA_PORT" \
    DENORMD_KAFKA_REPLICATION=3 bash "$REPO_DIR/scripts/kafka.sh" "$@"
}
kafka1 topic-create probe.replicated 2 >/dev/null 2>&1 || fail "topic-create"
describe="$(kafka1 describe probe.replicated)"
grep -q "ReplicationFactor: 3" <<<"$describe" || fail "replication factor: $describe"
grep -q "min.insync.replicas=2" <<<"$describe" || fail "min.insync.replicas: $describe"
[[ "$(grep -cE 'Isr: [123],[123],[123]' <<<"$describe")" == 2 ]] || fail "both partitions with 3 in-sync replicas: $describe"

# The primary's writes reach the standby; the multi-host URL reaches the primary.
primary="postgresql://postgres@127.0.0.1:$DENORMD_CLUSTER_PG_PORT/denorm"
standby="postgresql://postgres@127.0.0.1:$((DENORMD_CLUSTER_PG_PORT + 1))/denorm"
psql -X -q "$primary" -c "create table probe (x int); insert into probe values (42)"
for _ in $(seq 1 100); do
  [[ "$(psql -X -At "$standby" -c "select x from probe" 2>/dev/null)" == 42 ]] && break
  sleep 0.1
done
[[ "$(psql -X -At "$standby" -c "select pg_is_in_recovery(), x from probe")" == "t|42" ]] ||
  fail "the standby does not show the primary's row"
[[ "$(psql -X -At "$DENORMD_POSTGRES" -c "select inet_server_port()")" == "$DENORMD_CLUSTER_PG_PORT" ]] ||
  fail "the multi-host URL did not reach the primary"

# The primary gone, the standby promoted: the same URL finds it, writable.
cluster postgres primary kill 2>/dev/null
cluster promote 2>/dev/null
[[ "$(psql -X -q -At "$DENORMD_POSTGRES" -c "insert into probe values (43); select inet_server_port(), pg_is_in_recovery(), count(*) from probe")" == \
   "$((DENORMD_CLUSTER_PG_PORT + 1))|f|2" ]] || fail "after promote the URL does not reach the new primary"

cluster stop >/dev/null 2>&1
if cluster status >/dev/null 2>&1; then fail "still running after stop: $(cluster status)"; fi
echo ok >&2
