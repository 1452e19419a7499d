#!/usr/bin/env bash
# Usage: bench/triggers_check.sh [--keep]
#
# Proves that the hand-written triggers of bench/triggers.sql maintain the same
# documents as denormd for the projections of bench/config.yaml.
#
# Starts a private PostgreSQL (state in $DENORMD_STATE_DIR, default /tmp/trigcheck,
# port $DENORMD_PG_PORT, default 55620), generates an event log that exercises every
# rule (lookups with thumbnails at different positions, missing and string
# references, reference moves, renames, deletes and re-creations, equal and
# absent createdAt, more than 100 comments in a post, stale events, events without
# version, patches with nested objects and nulls, plus a seeded random stream), and
# applies it three ways:
#   trig_one    apply_event, one event per transaction
#   trig_batch  apply_events, arrays of 100 events per transaction
#   denormd     the denormd binary: denormd replay (schema denormd_check), the reference
# Then compares, per collection, every document of both trigger schemas with
# denormd's (jsonb equality per id, both directions), the source rows (version,
# tombstone, data) and the applied/stale/invalid counts. Exits 1 with the
# differences if anything differs. Stops the server at the end unless --keep.
#
# Environment: DENORMD_BIN (default build/denormd), DENORMD_STATE_DIR, DENORMD_PG_PORT,
# DENORMD_PG_FSYNC (default off here: a throwaway cluster; applies when this script
# starts the server), TRIGCHECK_RANDOM_EVENTS (default 4000), TRIGCHECK_SEED (default 7).
# The timings it prints are those of this small event set, not benchmark figures.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$BENCH_DIR/.." && pwd)"
export DENORMD_STATE_DIR="${DENORMD_STATE_DIR:-/tmp/trigcheck}"
export DENORMD_PG_PORT="${DENORMD_PG_PORT:-55620}"
export DENORMD_PG_FSYNC="${DENORMD_PG_FSYNC:-off}"   # a throwaway cluster; applied at start
DENORMD_BIN="${DENORMD_BIN:-$REPO_DIR/build/denormd}"
RANDOM_EVENTS="${TRIGCHECK_RANDOM_EVENTS:-4000}"
SEED="${TRIGCHECK_SEED:-7}"
KEEP=0
[[ "${1:-}" == "--keep" ]] && KEEP=1

log() { echo "triggers_check: $*" >&2; }
now_ms() { date +%s%3N; }
since() { local t=$(( $(now_ms) - $1 )); printf '%d.%03d' $((t / 1000)) $((t % 1000)); }
die() { log "error: $*"; exit 2; }

[[ -x "$DENORMD_BIN" ]] || die "$DENORMD_BIN not found (build denormd first)"
command -v python3 >/dev/null || die "python3 is needed to generate the events"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/trigcheck.XXXXXX")"
stop_pg() {
  if [[ $KEEP -eq 0 ]]; then bash "$REPO_DIR/scripts/postgres.sh" stop || true; fi
  rm -rf "$WORK"
}
trap stop_pg EXIT

URL="$(bash "$REPO_DIR/scripts/postgres.sh" start)"
log "PostgreSQL at $URL"
PSQL=(psql "$URL" -X -q -v ON_ERROR_STOP=1)

"${PSQL[@]}" -c "drop schema if exists trig_one cascade; drop schema if exists trig_batch cascade;
                 drop schema if exists denormd_check cascade" 2>/dev/null

# ---------------------------------------------------------------------------
# The events.
# ---------------------------------------------------------------------------
python3 - "$WORK" "$RANDOM_EVENTS" "$SEED" <<'PY'
import json, random, sys

work, n_random, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
events = []
def ev(type_, id_, op, data=None, version=None):
    e = {"type": type_, "id": id_, "op": op}
    if version is not None:
        e["version"] = version
    if data is not None:
        e["data"] = data
    events.append(e)

# --- authors: thumbnails at different positions, absent, null, not an array ---
ev("author", "a1", "upsert", {"firstName": "Ada", "lastName": "Lovelace",
   "images": [{"thumbnail": "a1-0.png", "large": "a1-0L.png"}]}, 1)
ev("author", "a2", "upsert", {"firstName": "Alan", "lastName": "Turing",
   "images": [{"large": "x.png"}, "not an object", {"thumbnail": "a2-2.png"}, {"thumbnail": "a2-3.png"}]}, 1)
ev("author", "a3", "upsert", {"firstName": "Grace", "lastName": "Hopper"}, 5)
ev("author", "a4", "upsert", {"firstName": "Edsger", "lastName": "Dijkstra", "images": [{"large": "y"}]}, 1)
ev("author", "a5", "upsert", {"firstName": "Barbara", "lastName": "Liskov", "images": [{"thumbnail": None}]}, 1)
ev("author", "a6", "upsert", {"firstName": "Donald", "lastName": "Knuth", "images": {"thumbnail": "obj"}}, 1)
ev("author", "a7", "upsert", {"lastName": "Nofirst", "firstName": None, "countOfBooks": 99, "books": ["zz"]}, 1)
ev("author", "a8", "upsert", {"firstName": 42, "lastName": True, "id": "not-a8"}, 1)
# --- books: 1-3 authors, missing author, duplicate, non-string elements, string refs ---
ev("book", "b1", "upsert", {"name": "One", "authorIds": ["a1"], "pubId": "p"}, 1)
ev("book", "b2", "upsert", {"name": "Two", "authorIds": ["a1", "a2", "a3"]}, 1)
ev("book", "b3", "upsert", {"name": "Three", "authorIds": ["a2", "missing", "a4"]}, 1)
ev("book", "b4", "upsert", {"name": "Four", "authorIds": "a5"}, 1)
ev("book", "b5", "upsert", {"name": "Five", "authorIds": "nobody"}, 1)
ev("book", "b6", "upsert", {"name": "Six", "authors": ["stale copy"]}, 1)
ev("book", "b7", "upsert", {"name": "Seven", "authorIds": ["a1", "a1", "a6"]}, 1)
ev("book", "b8", "upsert", {"name": "Eight", "authorIds": [1, "a7", None, {"x": "a1"}, ["a1"], "a8"]}, 1)
ev("book", "b9", "upsert", {"name": "Nine", "authorIds": None, "authors": "x"}, 1)
ev("book", "b10", "upsert", {"name": "Ten", "authorIds": []}, 1)
ev("book", "b11", "upsert", {"name": "Eleven", "authorIds": ["a9"]}, 1)       # target arrives later
# --- reference moves, renames, deletes, re-creations ---
ev("book", "b1", "patch", {"authorIds": ["a2"]}, 2)                           # a1 -> a2
ev("author", "a1", "patch", {"firstName": "Augusta Ada"}, 2)                  # rename fans out
ev("author", "a2", "patch", {"images": [{"thumbnail": "a2-new.png"}], "extra": {"k": 1}}, 2)
ev("author", "a2", "patch", {"extra": {"k": None, "j": {"deep": None, "keep": 1}}}, 3)
ev("author", "a4", "patch", {"images": None}, 2)
ev("author", "a9", "upsert", {"firstName": "Late", "lastName": "Arrival"}, 1)
ev("book", "b2", "delete", None, 2)
ev("book", "b2", "upsert", {"name": "Two (stale)", "authorIds": ["a1"]}, 1)   # stale: tombstone v2
ev("author", "a3", "delete", None, 6)
ev("author", "a3", "upsert", {"firstName": "Old", "lastName": "Grace"}, 4)    # stale
ev("book", "b12", "upsert", {"name": "Twelve", "authorIds": ["a3", "a1"]}, 1)
ev("author", "a3", "upsert", {"firstName": "Grace", "lastName": "Again"}, 7)  # back
ev("author", "a5", "upsert", {"firstName": "No", "lastName": "Version"})      # no version: applies, keeps 1
ev("author", "a5", "patch", {"lastName": "Stale"}, 1)                         # stale (1 <= 1)
ev("author", "a5", "patch", {"lastName": "Fresh"}, 2)
ev("author", "a6", "delete")                                                  # no version
ev("author", "a6", "patch", {"firstName": "Patched"}, 3)                      # patch on a tombstone
ev("book", "b4", "patch", {"authorIds": ["a5", "a6"]}, 2)
ev("book", "b3", "patch", {"authorIds": None}, 2)                             # reference removed
ev("book", "b13", "patch", {"name": "Created by patch", "authorIds": ["a4"], "n": {"x": None}}, 1)
ev("book", "b1", "upsert", {"name": "One", "authorIds": ["a2"]}, 2)           # stale duplicate
ev("book", "b1", "upsert", {"name": "One", "authorIds": ["a2"]}, 3)           # same data, new version
ev("author", "a10", "delete", None, 3)                                        # delete of unknown
ev("author", "a10", "upsert", {"firstName": "Ten"}, 3)                        # stale
ev("nosuchtype", "x1", "upsert", {"a": 1}, 1)                                 # invalid

# --- posts and comments ---
ev("post", "p1", "upsert", {"title": "Big", "recentComments": "overwritten", "countOfComments": -1}, 1)
ev("post", "p2", "upsert", {"title": "Small"}, 1)
ev("post", "p3", "upsert", {"title": "Empty"}, 1)
for i in range(250):                                   # 3 buckets; equal createdAt in pairs
    data = {"postId": "p1", "author": f"u{i % 7}", "comment": f"text {i}",
            "createdAt": f"2024-01-{1 + (i // 2) % 28:02d}T00:00:{(i // 56):02d}Z"}
    if i % 17 == 0:
        del data["createdAt"]                          # absent: last
    if i % 23 == 0:
        del data["author"]
    ev("comment", f"c{i:03d}", "upsert", data, 1)
ev("comment", "d1", "upsert", {"postId": "p2", "author": "x", "comment": "same time", "createdAt": "2024-05-01"}, 1)
ev("comment", "d2", "upsert", {"postId": "p2", "author": "y", "comment": "same time", "createdAt": "2024-05-01"}, 1)
ev("comment", "d0", "upsert", {"postId": "p2", "author": "z", "createdAt": "2024-05-01"}, 1)
ev("comment", "d3", "upsert", {"postId": "p2", "comment": "no time"}, 1)
ev("comment", "d4", "upsert", {"postId": "p2", "comment": "null time", "createdAt": None}, 1)
ev("comment", "d5", "upsert", {"postId": "p2", "comment": "numeric time", "createdAt": 20240601}, 1)
ev("comment", "d6", "upsert", {"postId": "p2", "comment": "numeric time 2", "createdAt": 9.5}, 1)
ev("comment", "d7", "upsert", {"postId": "p2", "comment": "bool time", "createdAt": True}, 1)
ev("comment", "d8", "upsert", {"postId": ["p2", "p3"], "comment": "array parent"}, 1)
ev("comment", "d9", "upsert", {"postId": "p9", "comment": "orphan group", "createdAt": "2023"}, 1)
ev("comment", "d10", "upsert", {"postId": 5, "comment": "numeric postId"}, 1)
ev("comment", "d11", "upsert", {"comment": "no postId"}, 1)
ev("comment", "c005", "patch", {"comment": "edited in the middle"}, 2)
ev("comment", "c006", "patch", {"postId": "p2"}, 2)                           # moves p1 -> p2
ev("comment", "c007", "patch", {"createdAt": "2099-12-31"}, 2)                # newest now
ev("comment", "c008", "patch", {"unrelated": 1}, 2)                           # nothing visible changes
ev("comment", "d1", "delete", None, 2)
ev("comment", "d1", "upsert", {"postId": "p2", "comment": "resurrect?"}, 1)   # stale
for i in range(200, 250):                                                     # 3 buckets -> 2
    ev("comment", f"c{i:03d}", "delete", None, 5)
ev("comment", "c010", "delete")                                               # no version
ev("comment", "c010", "patch", {"postId": "p3", "comment": "patched tombstone"})
ev("post", "p3", "delete", None, 2)                                           # buckets stay
ev("post", "p2", "patch", {"title": "Small, renamed", "tags": {"a": 1}}, 2)

# --- a seeded random stream over small id spaces ---
rng = random.Random(seed)
versions = {}
def rand_author_data():
    d = {}
    if rng.random() < 0.9: d["firstName"] = rng.choice(["Ann", "Bob", "Cy", None, 7])
    if rng.random() < 0.9: d["lastName"] = rng.choice(["Lee", "Kim", "Ode"])
    if rng.random() < 0.7:
        imgs = []
        for _ in range(rng.randint(0, 3)):
            imgs.append(rng.choice([{"thumbnail": f"t{rng.randint(0, 9)}"}, {"large": "l"},
                                    {"thumbnail": None}, 3]))
        d["images"] = imgs
    return d
def rand_book_data():
    k = rng.randint(0, 3)
    d = {"name": f"book {rng.randint(0, 99)}"}
    r = rng.random()
    if r < 0.85: d["authorIds"] = [f"ra{rng.randint(0, 11)}" for _ in range(k)]
    elif r < 0.95: d["authorIds"] = f"ra{rng.randint(0, 11)}"
    return d
def rand_comment_data():
    d = {"postId": f"rp{rng.randint(0, 4)}"}
    if rng.random() < 0.9: d["createdAt"] = f"2024-0{rng.randint(1, 3)}-{rng.randint(10, 12)}"
    if rng.random() < 0.8: d["author"] = rng.choice(["u1", "u2", "u3"])
    if rng.random() < 0.8: d["comment"] = f"c{rng.randint(0, 5)}"
    return d
kinds = [("author", 12, rand_author_data), ("book", 30, rand_book_data),
         ("post", 5, lambda: {"title": f"t{rng.randint(0, 9)}"}),
         ("comment", 260, rand_comment_data)]
for _ in range(n_random):
    type_, count, gen = rng.choices(kinds, weights=[2, 3, 1, 6])[0]
    id_ = f"r{type_[0]}{rng.randint(0, count - 1)}"
    key = (type_, id_)
    r = rng.random()
    if r < 0.08:
        version = None
    elif r < 0.15:
        version = max(0, versions.get(key, 0) - rng.randint(0, 2))   # stale or duplicate
    else:
        version = versions.get(key, 0) + rng.randint(1, 3)
        versions[key] = version
    r = rng.random()
    if r < 0.12:
        ev(type_, id_, "delete", None, version)
    elif r < 0.55:
        ev(type_, id_, "upsert", gen(), version)
    else:
        fields = sorted(gen().items(), key=lambda kv: kv[0])
        patch = dict(rng.sample(fields, k=min(len(fields), rng.randint(0, 2))))
        if rng.random() < 0.2:
            patch[rng.choice(["createdAt", "images", "author", "authorIds", "postId", "x"])] = None
        ev(type_, id_, "patch", patch, version)

with open(f"{work}/events.jsonl", "w") as f:
    for e in events:
        f.write(json.dumps(e, separators=(",", ":")) + "\n")
# psql scripts: one apply_event per transaction (autocommit), and arrays of 100.
with open(f"{work}/one.sql", "w") as f:
    f.write("create temp table results (r text);\n")
    for e in events:
        f.write("insert into results select trig_one.apply_event($ev$" + json.dumps(e) + "$ev$);\n")
    f.write("\\copy (select format('applied=%s invalid=%s stale=%s', count(*) filter (where r = 'applied'), count(*) filter (where r = 'invalid'), count(*) filter (where r = 'stale')) from results) to '" + work + "/one.counts'\n")
with open(f"{work}/batch.sql", "w") as f:
    f.write("create temp table results (r jsonb);\n")
    for i in range(0, len(events), 100):
        f.write("insert into results select trig_batch.apply_events($ev$" +
                json.dumps(events[i:i + 100]) + "$ev$);\n")
    f.write("\\copy (select format('applied=%s invalid=%s stale=%s', sum((r->>'applied')::int), sum((r->>'invalid')::int), sum((r->>'stale')::int)) from results) to '" + work + "/batch.counts'\n")
PY
log "$(wc -l <"$WORK/events.jsonl") events generated"

# ---------------------------------------------------------------------------
# Apply them: triggers (two ways) and denormd.
# ---------------------------------------------------------------------------
"${PSQL[@]}" -v schema=trig_one -f "$BENCH_DIR/triggers.sql"
"${PSQL[@]}" -v schema=trig_batch -f "$BENCH_DIR/triggers.sql"

start=$(now_ms)
"${PSQL[@]}" -f "$WORK/one.sql"
log "trig_one: applied one event per transaction in $(since "$start") s"
start=$(now_ms)
"${PSQL[@]}" -f "$WORK/batch.sql"
log "trig_batch: applied in transactions of 100 events in $(since "$start") s"

sed -e 's/^\(  schema:\).*/\1 denormd_check/' "$BENCH_DIR/config.yaml" >"$WORK/config.yaml"
grep -q '^  schema: denormd_check$' "$WORK/config.yaml" || die "could not set the schema in the config copy"
start=$(now_ms)
DENORMD_POSTGRES="$URL" "$DENORMD_BIN" replay -q -c "$WORK/config.yaml" "$WORK/events.jsonl"
log "denormd: replayed in $(since "$start") s"
DENORMD_POSTGRES="$URL" "$DENORMD_BIN" verify -q -c "$WORK/config.yaml" >"$WORK/verify.out" 2>&1 \
  || { cat "$WORK/verify.out" >&2; die "denormd verify failed on its own documents"; }

# ---------------------------------------------------------------------------
# Compare.
# ---------------------------------------------------------------------------
"${PSQL[@]}" -At >"$WORK/diff.out" <<'SQL'
create temp table diffs (what text);
do $$
declare
  s text;
  c text;
  t text;
begin
  foreach s in array array['trig_one', 'trig_batch'] loop
    foreach c in array array['authors', 'books', 'posts', 'post_comments'] loop
      execute format($q$
        insert into diffs
        select format('%%s.%%s %%s: %%s', %L, %L, coalesce(t.id, d.id),
                      case when t.id is null then 'missing; denormd has ' || d.doc::text
                           when d.id is null then 'unexpected ' || t.doc::text
                           else E'differs\n    triggers: ' || t.doc::text || E'\n    denormd:  ' || d.doc::text end)
        from %I.%I t
        full join denormd_check.%I d on d.id = t.id
        where t.doc is distinct from d.doc
        order by coalesce(t.id, d.id)$q$, s, c, s, c, c);
    end loop;
    foreach t in array array['author', 'book', 'post', 'comment'] loop
      execute format($q$
        insert into diffs
        select format('%%s.%%s %%s: source row (version, deleted, data) triggers %%s / denormd %%s',
                      %L, %L, coalesce(t.id, d.id), row(t.version, t.deleted, t.data)::text,
                      row(d.version, d.deleted, d.data)::text)
        from %I.%I t
        full join (select * from denormd_check.entities where type = %L) d on d.id = t.id
        where row(t.version, t.deleted, t.data) is distinct from row(d.version, d.deleted, d.data)
        order by coalesce(t.id, d.id)$q$, s, t, s, t, t);
    end loop;
  end loop;
end $$;
select what from diffs;
SQL

# Counts: applied / stale / invalid (denormd: dead letters).
one_counts="$(cat "$WORK/one.counts")"
batch_counts="$(cat "$WORK/batch.counts")"
denormd_counts="$("${PSQL[@]}" -At -c "select format('applied=%s invalid=%s stale=%s', sum(applied), sum(dead), sum(stale)) from denormd_check.positions")"

summary="$("${PSQL[@]}" -At -F ' ' -c "
  select 'authors', count(*) from denormd_check.authors union all
  select 'books', count(*) from denormd_check.books union all
  select 'posts', count(*) from denormd_check.posts union all
  select 'post_comments', count(*) from denormd_check.post_comments" | tr '\n' ' ')"
log "denormd documents: $summary"
log "counts: trig_one $one_counts | trig_batch $batch_counts | denormd $denormd_counts"

status=0
# Guard against a vacuous pass: every collection has documents, a post has 2+ buckets.
sane="$("${PSQL[@]}" -At -c "
  select (select count(*) from denormd_check.authors) > 0 and (select count(*) from denormd_check.books) > 0
     and (select count(*) from denormd_check.posts) > 0
     and exists (select 1 from denormd_check.post_comments where id like '%:1')")"
if [[ "$sane" != t ]]; then
  log "the event set did not produce the expected kinds of documents"
  status=1
fi
if [[ -s "$WORK/diff.out" ]]; then
  log "DIFFERENCES ($(grep -c '^trig_' "$WORK/diff.out") documents or rows):"
  cat "$WORK/diff.out" >&2
  status=1
fi
if [[ "$one_counts" != "$denormd_counts" || "$batch_counts" != "$denormd_counts" ]]; then
  log "DIFFERENT COUNTS: trig_one $one_counts, trig_batch $batch_counts, denormd $denormd_counts"
  status=1
fi
if [[ $status -eq 0 ]]; then
  log "OK: trig_one and trig_batch documents and source rows equal denormd's"
fi
exit $status
