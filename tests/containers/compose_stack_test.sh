#!/usr/bin/env bash
# The compose stack, for real: docker-compose.yml run by podman-compose, with the
# project's Dockerfile built unchanged on a locally made debian:bookworm and the two
# registry-only images (apache/kafka, postgres) replaced by local stand-ins through
# tests/containers/compose.standins.yml (see scripts/containers.sh).
#
#   1. build the images (denormd through podman-compose build; cached when unchanged)
#   2. up: kafka, kafka-init (the topic), postgres, denormd, in depends_on order
#   3. /healthz on the published port 9464
#   4. the demo producer (profile demo) publishes tests/data/article/events.jsonl,
#      keyed type:id
#   5. wait until denormd has consumed every event, then compare every document
#      (psql in the postgres container) and the stale/dead counts with
#      tests/data/article/expected.json
#   6. restart the denormd container: the positions survive (no event is read,
#      let alone applied, again), and two new events are applied exactly once
#   7. down -v: nothing of the project is left
#
# Exit 0 pass, 1 fail, 77 skip (no podman and no way to install it). Registered in
# ctest with LABELS containers (cmake/container_tests.cmake). Run alone with
#   bash tests/containers/compose_stack_test.sh      or   ctest -L containers
# Environment: DENORMD_COMPOSE_PROJECT (default denormd-test), DENORMD_STATE_DIR,
# DENORMD_CONTAINERS_TEST_BUDGET (seconds for the whole test, default 540).
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export DENORMD_COMPOSE_PROJECT="${DENORMD_COMPOSE_PROJECT:-denormd-test}"
BUDGET="${DENORMD_CONTAINERS_TEST_BUDGET:-540}"
CONTAINERS=(bash "$REPO_DIR/scripts/containers.sh")
EVENTS="$REPO_DIR/tests/data/article/events.jsonl"
EXPECTED="$REPO_DIR/tests/data/article/expected.json"
CONFIG_IN_CONTAINER=/etc/denormd/config.yaml
PORT=9464
SCHEMA=article
PY=/usr/bin/python3
T0=$SECONDS

step() { echo "==> [$((SECONDS - T0)) s] $*" >&2; }
fail() { echo "FAIL: $*" >&2; exit 1; }
check_budget() { ((SECONDS - T0 < BUDGET)) || fail "over the time budget of $BUDGET s"; }

if [[ $EUID -ne 0 ]] && ! command -v podman >/dev/null; then
  echo "SKIP: podman is not installed and this is not root" >&2
  exit 77
fi

port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
if port_open "$PORT"; then
  fail "127.0.0.1:$PORT is in use; docker-compose.yml publishes the metrics port there"
fi

podman_() { "${CONTAINERS[@]}" podman "$@"; }
container() { "${CONTAINERS[@]}" name "$1"; }

# GET http://127.0.0.1:PORT/PATH from this host: prints the body, fails unless 200.
http_get() {
  "$PY" - "$PORT" "$1" <<'EOF'
import sys, urllib.request
with urllib.request.urlopen("http://127.0.0.1:%s%s" % (sys.argv[1], sys.argv[2]), timeout=5) as r:
    sys.stdout.write(r.read().decode())
EOF
}

psql_() { # SQL: one value, through psql in the postgres container
  podman_ exec "$(container postgres)" psql -X -q -t -A -v ON_ERROR_STOP=1 -U denormd -d denorm -c "$1"
}

status_() { podman_ exec "$(container denormd)" denormd status -c "$CONFIG_IN_CONTAINER"; }

# "applied stale dead lag" summed over the streams of `denormd status` (a
# partition has a line per lane when the model has parts that share no
# document), and the number of partitions at lag 0 in every lane.
status_totals() {
  status_ | awk '/ partition [0-9]+( lane [^:]*)?: next offset/ {
      key = $1 " " $3; sub(/:$/, "", key); seen[key] = 1
      for (i = 1; i <= NF; i++) {
        v = $(i + 1); sub(/[;,]$/, "", v); gsub(/,/, "", v)
        if ($i == "applied") a += v; if ($i == "stale") s += v; if ($i == "dead") d += v
        if ($i == "lag") { l += v; if (v + 0 > 0) behind[key] = 1 }
      }
    } END { for (k in seen) if (!(k in behind)) z++; printf "%d %d %d %d %d\n", a, s, d, l, z }'
}

metric() { # NAME: its value on /metrics
  http_get /metrics | awk -v n="$1" '$1 == n { print $2; exit }'
}

wait_for() { # SECONDS DESCRIPTION COMMAND...: until COMMAND succeeds
  local limit="$1" what="$2"; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "$what: not after $limit s"
    check_budget
    sleep 1
  done
}

cleanup() {
  local code=$?
  if [[ $code -ne 0 ]]; then
    echo "--- containers of project $DENORMD_COMPOSE_PROJECT:" >&2
    podman_ ps -a --filter "label=io.podman.compose.project=$DENORMD_COMPOSE_PROJECT" \
      --format '{{.Names}} {{.Status}}' >&2 || true
    for c in $(podman_ ps -a --filter "label=io.podman.compose.project=$DENORMD_COMPOSE_PROJECT" \
        --format '{{.Names}}' 2>/dev/null); do
      echo "--- last lines of $c:" >&2
      podman_ logs --tail 25 "$c" >&2 2>&1 || true
    done
  fi
  step "down -v"
  "${CONTAINERS[@]}" down || true
  echo "compose stack test: $([[ $code -eq 0 ]] && echo passed || echo FAILED) in $((SECONDS - T0)) s" >&2
  exit "$code"
}

step "images: base, stand-ins, denormd from the Dockerfile"
"${CONTAINERS[@]}" build
check_budget
# A stack left over by an interrupted run would keep old containers and volumes.
"${CONTAINERS[@]}" down >/dev/null 2>&1 || true
trap cleanup EXIT

step "up: kafka, kafka-init, postgres, denormd in depends_on order"
"${CONTAINERS[@]}" up --wait
check_budget

step "/healthz on the published port $PORT"
[[ "$(http_get /healthz)" == ok ]] || fail "/healthz did not answer ok"

step "publishing the article's events with the demo producer (profile demo)"
"${CONTAINERS[@]}" publish
total_events="$(grep -c '' "$EVENTS")"
# Keyed type:id, so that each entity's events keep their order on one partition.
keys="$(podman_ exec "$(container kafka)" /opt/kafka/bin/kafka-console-consumer.sh \
  --bootstrap-server localhost:9092 --topic article.entities --partition 0 --offset earliest \
  --max-messages 3 --timeout-ms 20000 --property print.key=true --property print.value=false \
  2>/dev/null)"
[[ "$(grep -cE '^[A-Za-z]+:[^ ]+$' <<<"$keys")" -eq 3 ]] || fail "the demo producer's records are not keyed type:id: '$keys'"
echo "    keyed: $(tr '\n' ' ' <<<"$keys")" >&2

step "waiting until denormd has consumed all $total_events events"
all_consumed() {
  local a s d z
  read -r a s d _ z < <(status_totals)
  [[ $((a + s + d)) -eq $total_events && "$z" -eq 4 ]]
}
wait_for 120 "denormd consuming the events" all_consumed
read -r applied stale dead _ _ < <(status_totals)
echo "    applied $applied, stale $stale, dead $dead" >&2

step "comparing every document and the stale/dead counts with $(basename "$EXPECTED")"
query="$("$PY" - "$EXPECTED" "$SCHEMA" <<'EOF'
import json, sys
expected = json.load(open(sys.argv[1]))
parts = ["'%s', (select coalesce(jsonb_object_agg(id, doc), '{}') from %s.%s)" % (c, sys.argv[2], c)
         for c in sorted(expected["collections"])]
print("select jsonb_build_object(%s)" % ", ".join(parts))
EOF
)"
psql_ "$query" >"${TMPDIR:-/tmp}/denormd-compose-docs.$$.json"
"$PY" - "$EXPECTED" "${TMPDIR:-/tmp}/denormd-compose-docs.$$.json" "$stale" "$dead" <<'EOF' || fail "documents differ"
import json, sys
expected = json.load(open(sys.argv[1]))
actual = json.load(open(sys.argv[2]))
bad = 0

def groups(docs, shape):
    """A stable bucket collection by group: its items in seq order, and its
    invariant breaches (which bucket holds which member depends on how the
    events were split into batches; DESIGN.md "Buckets (revised contract)")."""
    out, breaches = {}, []
    by, field, size = shape["by"], shape["field"], shape["size"]
    per_group = {}
    for doc in docs.values():
        per_group.setdefault(doc.get(by), []).append(doc)
    for group, buckets in per_group.items():
        buckets.sort(key=lambda d: d["seq"])
        if len({d["seq"] for d in buckets}) != len(buckets):
            breaches.append("group %s: repeated seq" % group)
        for i, d in enumerate(buckets):
            n = len(d[field])
            low = 1 if i == len(buckets) - 1 else (size + 1) // 2
            if not low <= n <= size:
                breaches.append("%s: %d items, outside %d..%d" % (d["id"], n, low, size))
        out[group] = [item for d in buckets for item in d[field]]
    return out, breaches

for coll, docs in sorted(expected["collections"].items()):
    got = actual.get(coll) or {}
    shape = expected.get("buckets", {}).get(coll)
    if shape and shape.get("layout") == "stable":
        want, _ = groups(docs, shape)
        have, breaches = groups(got, shape)
        for line in breaches:
            bad += 1
            print("    %s %s" % (coll, line), file=sys.stderr)
        for group in sorted(set(want) | set(have), key=str):
            if want.get(group) != have.get(group):
                bad += 1
                print("    %s group %s: items in seq order differ:\n      expected %s\n      actual   %s" % (
                    coll, group, json.dumps(want.get(group)), json.dumps(have.get(group))),
                    file=sys.stderr)
        continue
    for doc_id in sorted(set(docs) | set(got)):
        if docs.get(doc_id) != got.get(doc_id):
            bad += 1
            print("    %s/%s differs:\n      expected %s\n      actual   %s" % (
                coll, doc_id, json.dumps(docs.get(doc_id), sort_keys=True),
                json.dumps(got.get(doc_id), sort_keys=True)), file=sys.stderr)
for key, value in (("stale", int(sys.argv[3])), ("dead", int(sys.argv[4]))):
    if expected[key] != value:
        bad += 1
        print("    %s: expected %d, actual %d" % (key, expected[key], value), file=sys.stderr)
n = sum(len(d) for d in expected["collections"].values())
print("    %d documents in %d collections %s" % (n, len(expected["collections"]),
      "match" if not bad else "checked, %d differences" % bad), file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
rm -f "${TMPDIR:-/tmp}/denormd-compose-docs.$$.json"
[[ "$(metric denormd_up)" == 1 ]] || fail "/metrics has no denormd_up 1"
check_budget

step "restarting the denormd container"
before="$(status_totals)"
"${CONTAINERS[@]}" compose restart -t 30 denormd >/dev/null 2>&1
denormd_c="$(container denormd)"
healthy() { podman_ healthcheck run "$denormd_c"; }
wait_for 60 "denormd healthy after the restart" healthy
# The consumer has its partitions again once the log says so a second time.
assigned_twice() { [[ "$(podman_ logs "$denormd_c" 2>&1 | grep -c 'event=partitions_assigned')" -ge 2 ]]; }
wait_for 60 "partitions assigned after the restart" assigned_twice
sleep 3   # time to re-read anything it would (wrongly) re-read
after="$(status_totals)"
[[ "$after" == "$before" ]] || fail "positions or counts changed across the restart: '$before' -> '$after'"
for m in denormd_events_applied_total denormd_events_stale_total denormd_dead_letters_total; do
  [[ "$(metric "$m")" == 0 ]] || fail "after the restart $m is $(metric "$m"), not 0: events were read again"
done
echo "    positions and counts unchanged ($after), nothing re-read" >&2

step "two new events after the restart are applied exactly once"
printf '%s\n' \
  '{"type": "author", "id": "a1", "op": "patch", "version": 3, "data": {"lastName": "After-Restart"}}' \
  '{"type": "stock", "id": "2", "op": "patch", "version": 2, "data": {"open": 90}}' \
  | podman_ exec -i "$denormd_c" denormd publish -c "$CONFIG_IN_CONTAINER" - >/dev/null
applied_two() { [[ "$(metric denormd_events_applied_total)" == 2 ]]; }
wait_for 60 "the two new events applied" applied_two
sleep 2
read -r a2 s2 d2 _ z2 < <(status_totals)
[[ "$a2" -eq $((applied + 2)) && "$s2" -eq "$stale" && "$d2" -eq "$dead" && "$z2" -eq 4 ]] \
  || fail "after two new events: applied $a2 stale $s2 dead $d2 (expected $((applied + 2)) $stale $dead)"
[[ "$(metric denormd_events_stale_total)" == 0 ]] || fail "stale events after the restart"
name="$(psql_ "select doc->'authors'->0->>'name' from $SCHEMA.books where id = 'b1'")"
[[ "$name" == "Thomas After-Restart" ]] || fail "book b1 carries author name '$name'"
echo "    book b1 now carries \"$name\"; applied $a2, stale $s2, dead $d2" >&2
check_budget

trap - EXIT
step "down -v"
"${CONTAINERS[@]}" down
left="$(podman_ ps -a --filter "label=io.podman.compose.project=$DENORMD_COMPOSE_PROJECT" --format '{{.Names}}')"
left+="$(podman_ volume ls --filter "label=io.podman.compose.project=$DENORMD_COMPOSE_PROJECT" --format '{{.Name}}')"
[[ -z "$left" ]] || fail "left after down -v: $left"
echo "compose stack test: passed in $((SECONDS - T0)) s" >&2
