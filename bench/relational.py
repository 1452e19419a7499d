"""The relational path: the benchmark's workload as Debezium change records of relational
tables with a join table, consumed by `denormd run` with projections `through` the join
table (issue 26, point 3). Called by bench/run.py (--skip-relational leaves it out).

The tables (PostgreSQL, as an application would keep the benchmark's model):

  authors       (id, firstName, lastName, images json)   one row per native author
  books         (id, name, pubYear)                       a native book without authorIds
  book_authors  (book_id, author_id, position)            one row per entry of a book's
                primary key (book_id, author_id),         authorIds, position = its index
                ON DELETE CASCADE from books              (0, 1, ...)
  posts         (id, name, summary)
  comments      (id, postId, author, comment, createdAt)

Column names are the native field names, so that the projections' `select`, `order_by`
and templates stay those of bench/config.yaml. `images` is a json column: Debezium sends
json/jsonb as a string of JSON (PostgreSQL's text form, `[{"thumbnail": "..."}, ...]`),
which the topic's `json_columns: [images]` decodes back into the array that
`images[].thumbnail` reads.

The translation (Translator) keeps every row's full current state and turns each native
event (one logical change, as one application transaction) into the change records
PostgreSQL's WAL would give, as the PostgreSQL connector with the JSON converter writes
them (schemas.enable=false; tombstones.on.delete=false, which denormd allows: it skips
tombstones either way):

  upsert of a new entity        `c` of its row (+ `c` of a book's book_authors rows)
  upsert of an existing one     `u` with the whole row (+ the book_authors difference)
  patch                         `u` with the whole row after the merge (Debezium always
                                sends the whole row), only when the patch touches a column
                                of the entity's table; a book's `authorIds` in a patch
                                changes book_authors only: `d` of the rows of authors no
                                longer listed, `u` of those whose position moved, `c` of
                                the new ones (nothing when the list is the same)
  delete                        `d` of the row (key columns, the rest null: the default
                                replica identity); a book's also `d` of each of its
                                book_authors rows (as ON DELETE CASCADE does)

`source.lsn` (denormd's version) is a global counter, one step per change record, so it
grows strictly across the change stream; `source.txId` is one per logical change. The
LOAD is translated as the connector's initial snapshot of the tables holding load.jsonl's
final state: every row an `r` record carrying the snapshot's one LSN (below every streamed
change's), as a real snapshot does (docs/configuration.md, "Versions"). Record keys are
the primary key as JSON, `{"id": "b1"}`, `{"book_id": "b1", "author_id": "a1"}` (the
book_author entity id `b1:a1`). Each table has its own topic of 1 partition (what Kafka
Connect creates by default; the record key would partition it as Debezium does).

The mapping of the projections (bench/config.yaml rewritten by write_config below, the
rest unchanged):

  authors.countOfBooks  {count: book, via: authorIds}
                     -> {count: book, through: book_author, from: author_id, to: book_id}
  authors.books         {ids: book, via: authorIds}
                     -> {ids: book, through: book_author, from: author_id, to: book_id}
  books.authors         lookup: author, by: authorIds
                     -> lookup: author, through: book_author, from: book_id, to: author_id,
                        link_order_by: position (the authorIds order)
  books.authorIds       (new) {ids: author, through: book_author, from: book_id,
                        to: author_id, link_order_by: position}

The native books document carries the book's own `authorIds` (its data); the book row has
no such column, so the field rebuilds it from the join table. `ids` through a link lists
only live linked authors, while the native array keeps every id it holds: the two agree
exactly when every listed author exists and is never deleted. That is what the workload
does (bench/generate_workload.py: every author a0..aN-1 is in load.jsonl before any book,
books only ever list those, and no change deletes an author), and what a relational schema
with a foreign key book_authors.author_id -> authors.id would enforce. The documents are
then compared with the native replay's as every contender's are (bench/harness/store.py,
`check`): the same four collections, jsonb equality, post_comments by content. A workload
that deleted authors would show here as WRONG, not be hidden.

The contender (Relational, harness.contenders.Contender's interface): LOAD (the snapshot
records pre-filled into the five topics, consumed by `denormd run` on an empty store: the
stored source differs from the native path's, so it cannot be replay's copy, as denormd
run's is), its documents compared with denormd replay's loaded store (the reference store,
while it is still at the load point); then CHANGES (changes.jsonl's records appended to the
topics while no daemon runs, consumed by a new `denormd run` of the same group), timed like
denormd run's: from `partitions_assigned` in its log until the positions of the five topics
count every record; then the documents against denormd replay's after all changes; then
freshness at 20% of its own CHANGES rate (logical changes, each one's records produced
together; the generator's change stream continued past changes.jsonl, translated by the
same Translator), from the daemon's denormd_event_age_seconds histogram like the freshness
of bench/harness/freshness.py.
"""

import json
import os
import re
import subprocess
import time

import kafka_produce
from harness.contenders import Contender
from harness.contenders.denormd_run import run_rate
from harness.daemon import Daemon, event_age, metric_value
from harness.freshness import DEFAULT_FRESHNESS_FRACTION, new_events
from harness.requests import metrics_requests
from harness.services import BENCH, REPO, BenchError, log
from harness.store import (SCHEMAS, check, checkpoint, drop_schema, mark_schema, row_writes,
                           vacuum_analyze)

TABLES = {  # table -> (entity type, key columns, other columns)
    "authors": ("author", ["id"], ["firstName", "lastName", "images"]),
    "books": ("book", ["id"], ["name", "pubYear"]),
    "book_authors": ("book_author", ["book_id", "author_id"], ["position"]),
    "posts": ("post", ["id"], ["name", "summary"]),
    "comments": ("comment", ["id"], ["postId", "author", "comment", "createdAt"]),
}
TABLE_OF = {"author": "authors", "book": "books", "post": "posts", "comment": "comments"}
JSON_COLUMNS = {"authors": ["images"]}
LINKS = "authorIds"  # a book's field kept in book_authors
SNAPSHOT_LSN = 1 << 24  # the initial snapshot's LSN; streamed changes follow it
PARTITIONS = 1  # per table topic
SCHEMA_KEY = "relational"  # harness.store.SCHEMAS's key


class TranslationError(Exception):
    pass


def merge_patch(target, patch):
    """RFC 7396, as the native `patch` applies it."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def dumps(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


class Translator:
    """Native events -> Debezium change records, keeping every row's current state."""

    def __init__(self):
        self.data = {}    # (type, id) -> native data (the current state)
        self.links = {}   # book id -> [author id, ...] (its book_authors rows, by position)
        self.lsn = SNAPSHOT_LSN
        self.tx = 1000
        self.snapshot = False

    # -- rows ---------------------------------------------------------------
    @staticmethod
    def row_of(table, eid, data):
        _, keys, cols = TABLES[table]
        unknown = set(data) - set(cols) - {LINKS if table == "books" else ""}
        if unknown:
            raise TranslationError(f"{table} {eid}: field(s) {sorted(unknown)} have no column")
        row = {"id": eid}
        for c in cols:
            v = data.get(c)
            if c in JSON_COLUMNS.get(table, ()) and v is not None:
                v = json.dumps(v)  # PostgreSQL's text form of json: ", " and ": "
            row[c] = v
        return row

    def record(self, table, op, key, before=None, after=None):
        if not self.snapshot:
            self.lsn += 1
        now_ms = int(time.time() * 1000)
        source = {"version": "3.6.1.Final", "connector": "postgresql", "name": "bench",
                  "ts_ms": now_ms, "snapshot": "true" if self.snapshot else "false",
                  "db": "bench", "sequence": f'[null,"{self.lsn}"]', "ts_us": now_ms * 1000,
                  "ts_ns": now_ms * 1_000_000, "schema": "public", "table": table,
                  "txId": self.tx, "lsn": self.lsn, "xmin": None, "origin": None,
                  "origin_lsn": None}
        value = {"before": before, "after": after, "source": source, "transaction": None,
                 "op": op, "ts_ms": now_ms, "ts_us": now_ms * 1000, "ts_ns": now_ms * 1_000_000}
        return table, dumps(key).encode(), dumps(value).encode()

    @staticmethod
    def key_image(table, row):
        """`before` of a delete under the default replica identity: the key, the rest null."""
        _, keys, cols = TABLES[table]
        before = {k: row[k] for k in keys}
        before.update({c: None for c in cols})
        return before

    def link_records(self, book, old, new):
        out = []
        if len(set(new)) != len(new) or not all(isinstance(a, str) for a in new):
            raise TranslationError(f"book {book}: authorIds {new!r} cannot be book_authors rows "
                                   "(not distinct strings)")
        old_pos = {a: i for i, a in enumerate(old)}
        new_pos = {a: i for i, a in enumerate(new)}
        for a in old:
            if a not in new_pos:
                key = {"book_id": book, "author_id": a}
                out.append(self.record("book_authors", "d", key,
                                       before=self.key_image("book_authors", key)))
        for a in new:
            if a in old_pos and old_pos[a] != new_pos[a]:
                key = {"book_id": book, "author_id": a}
                out.append(self.record("book_authors", "u", key,
                                       after=dict(key, position=new_pos[a])))
        for a in new:
            if a not in old_pos:
                key = {"book_id": book, "author_id": a}
                out.append(self.record("book_authors", "r" if self.snapshot else "c", key,
                                       after=dict(key, position=new_pos[a])))
        if new:
            self.links[book] = list(new)
        else:
            self.links.pop(book, None)
        return out

    # -- events -------------------------------------------------------------
    def translate(self, event):
        """One native event (one logical change) -> [(table, key bytes, value bytes)]."""
        kind, eid, op = event["type"], event["id"], event["op"]
        table = TABLE_OF.get(kind)
        if table is None:
            raise TranslationError(f"no table for type {kind!r}")
        self.tx += 1
        cur = self.data.get((kind, eid))
        out = []
        key = {"id": eid}
        if op == "delete":
            if cur is not None:
                out.append(self.record(table, "d", key,
                                       before=self.key_image(table, {"id": eid})))
                del self.data[(kind, eid)]
            if kind == "book":  # ON DELETE CASCADE, after the book's own row
                out += self.link_records(eid, self.links.get(eid, []), [])
            return out
        patch = event.get("data")
        if not isinstance(patch, dict):
            raise TranslationError(f"{kind} {eid}: {op} without a data object")
        if op == "upsert":
            new = dict(patch)
        elif op == "patch":
            new = merge_patch(cur or {}, patch)
        else:
            raise TranslationError(f"{kind} {eid}: unknown op {op!r}")
        row = self.row_of(table, eid, new)
        if cur is None:
            out.append(self.record(table, "r" if self.snapshot else "c", key, after=row))
        elif op == "upsert" or any(k != LINKS or kind != "book" for k in patch):
            out.append(self.record(table, "u", key, after=row))
        self.data[(kind, eid)] = new
        if kind == "book":
            links = new.get(LINKS, [])
            if not isinstance(links, list):
                raise TranslationError(f"book {eid}: authorIds is not an array")
            out += self.link_records(eid, self.links.get(eid, []), links)
        return out


# ----------------------------------------------------------------------------
# Kafka, config, the daemon
# ----------------------------------------------------------------------------

def topic_names(run_id):
    return {t: f"bench.rel.{run_id}.{t}" for t in TABLES}


def create_topics(env, names):
    """scripts/kafka.sh topic-create for each (two JVM starts each: side by side)."""
    script = os.path.join(REPO, "scripts", "kafka.sh")
    procs = [(name, subprocess.Popen([script, "topic-create", name, str(PARTITIONS)], env=env.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     cwd=REPO)) for name in names]
    for name, p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            raise BenchError(f"create topic {name} failed (exit {p.returncode}):\n{err[-2000:]}")


def write_config(env, schema, topics, group, batch_events=None):
    """bench/config.yaml with the Debezium topics and the join table (the mapping above), and
    batch.max_events set to `batch_events` when given."""
    text = open(os.path.join(BENCH, "config.yaml")).read()
    source = ("source:\n  kafka:\n    brokers: " + env.brokers + "\n    group: " + group +
              "\n    topics:\n" + "".join(
                  f"      - {{topic: {topics[t]}, format: debezium, entity: {TABLES[t][0]}"
                  + (f", json_columns: [{', '.join(JSON_COLUMNS[t])}]" if t in JSON_COLUMNS else "")
                  + "}\n" for t in TABLES))
    through_author = "through: book_author, from: author_id, to: book_id"
    subs = [
        (r"(?m)^source:\n(?:[ \t]+\S.*\n)+", lambda m: source),
        (r"(?m)^(\s*schema:\s*)\S+", lambda m: m.group(1) + schema),
        (r"(?m)^entities:.*$", lambda m: "entities: [author, book, book_author, post, comment]"),
        (r"\{count: book, via: authorIds\}", lambda m: "{count: book, " + through_author + "}"),
        (r"\{ids: book, via: authorIds\}", lambda m: "{ids: book, " + through_author + "}"),
        (r"(?m)^([ \t]+)by: authorIds\n",
         lambda m: "".join(f"{m.group(1)}{x}\n" for x in (
             "through: book_author", "from: book_id", "to: author_id", "link_order_by: position"))),
        (r"(?m)^([ \t]+)books:[^\n]*\n\1  from: book\n\1  fields:\n",
         lambda m: m.group(0) + m.group(1) + "    authorIds: {ids: author, through: book_author, "
         "from: book_id, to: author_id, link_order_by: position}\n"),
    ]
    if batch_events is not None:  # `denormd check` refuses a value below 1
        subs.append((r"(?m)^(batch:.*max_events:\s*)\d+", lambda m: m.group(1) + str(batch_events)))
    if getattr(env.args, "max_lanes", 0):
        lanes = env.args.max_lanes
        subs.append((r"(?m)^batch:\s*\{", lambda m: f"batch: {{max_lanes: {lanes}, "))
    for pattern, repl in subs:
        text, n = re.subn(pattern, repl, text, count=1)
        if n != 1:
            raise BenchError(f"bench/config.yaml: no match for {pattern!r} (relational config)")
    if "authorIds" in text.replace("authorIds: {ids: author", ""):
        raise BenchError("bench/config.yaml: a use of authorIds the relational config "
                         "does not map (bench/relational.py)")
    path = os.path.join(env.work, f"config-{schema}.yaml")
    with open(path, "w") as f:
        f.write("# bench/config.yaml rewritten by bench/relational.py: Debezium topics, the join "
                "table\n" + text)
    return path


class TopicWriter:
    """Pre-fills the table topics: one producer (connection) per topic, batches of ~512 KiB."""

    def __init__(self, env, topics):
        self.producers = {t: kafka_produce.Producer(env.brokers, topics[t], PARTITIONS)
                          for t in topics}
        self.pending = {t: [] for t in topics}
        self.size = {t: 0 for t in topics}
        self.counts = {t: 0 for t in topics}

    def add(self, records, ts=None):
        ts = ts or int(time.time() * 1000)
        for table, key, value in records:
            self.pending[table].append((ts, key, value))
            self.size[table] += len(key) + len(value) + 24
            self.counts[table] += 1
            if self.size[table] >= 512 * 1024:
                self.flush(table)

    def flush(self, table=None):
        for t in [table] if table else list(self.pending):
            if self.pending[t]:
                self.producers[t].send(self.pending[t])
                self.pending[t], self.size[t] = [], 0

    def close(self):
        self.flush()
        for p in self.producers.values():
            p.close()


def fill(env, topics, path, tr, snapshot):
    """Translates a JSON Lines log and appends its records to the topics. Returns
    (logical changes, change records, records per table, seconds)."""
    start = time.time()
    w = TopicWriter(env, topics)
    n = 0
    tr.snapshot = snapshot
    if snapshot:
        tr.lsn += 1  # the snapshot's LSN, above anything before
        tr.tx += 1
    try:
        with open(path) as f:
            for line in f:
                if line.strip():
                    w.add(tr.translate(json.loads(line)))
                    n += 1
    finally:
        w.close()
        tr.snapshot = False
    return n, sum(w.counts.values()), dict(w.counts), time.time() - start


def positions(env, schema, group, topics):
    """(records committed: applied + stale + dead, of which stale, dead) over the topics."""
    names = ", ".join(f"'kafka:{group}:{t}'" for t in topics.values())
    row = env.poll_query(f"select coalesce(sum(applied + stale + dead), 0), coalesce(sum(stale), 0), "
                         f'coalesce(sum(dead), 0) from "{schema}".positions where source in ({names})')
    return tuple(int(v) for v in row[0])


def consume(env, config, schema, group, topics, n_records, n_logical, tag, what):
    """A new `denormd run` until the topics' positions count n_records more records; timed
    from partitions_assigned. Returns the phase's figures."""
    args = env.args
    base, base_stale, base_dead = positions(env, schema, group, topics)
    before = row_writes(env, schema)
    vacuum_analyze(env, schema)
    checkpoint(env)
    log_path = os.path.join(env.work, f"relational-{tag}.log")
    d = Daemon(env, config, args.metrics_port, log_path)
    try:
        assigned = d.wait_for(r"partitions_assigned", 60)
        done = d.wait_for_count(lambda: positions(env, schema, group, topics)[0] - base,
                                n_records, what, "records", args.stall_seconds)
        text = d.save_metrics(os.path.join(env.work, f"relational-{tag}.metrics"))
    finally:
        code = d.stop()
    if code != 0:
        raise BenchError(f"{what}: exit {code} after SIGTERM:\n" + d.log_text()[-3000:])
    _, stale, dead = positions(env, schema, group, topics)
    seconds = done - assigned
    return {"records": n_records, "logical": n_logical, "events": n_logical, "seconds": seconds,
            "records_rate": n_records / seconds, "rate": n_logical / seconds,
            "startup_seconds": assigned - d.started, "stale": stale - base_stale,
            "dead": dead - base_dead,
            "denormd_documents_written": int(metric_value(text, "denormd_documents_written_total") or 0),
            "requests": metrics_requests(text, n_records), "rss_kib": d.rss_kib,
            "documents": row_writes(env, schema) - before}


def freshness(env, r, tr, config, schema, group, topics, w, tag):
    """The daemon on the store after CHANGES, new logical changes (the stream continued past
    changes.jsonl) produced at 20% of this contender's CHANGES rate (logical changes/s), each
    one's records together (the due time as their timestamp), for --freshness-seconds."""
    args = env.args
    rate = max(1.0, DEFAULT_FRESHNESS_FRACTION * r["changes"]["rate"])
    lines = new_events(env, w, rate, "relational freshness")
    groups = [tr.translate(json.loads(line)) for line in lines]
    base = positions(env, schema, group, topics)[0]
    checkpoint(env)
    d = Daemon(env, config, args.metrics_port,
               os.path.join(env.work, f"relational-fresh-{tag}.log"))
    f = {"rate": rate, "fraction": DEFAULT_FRESHNESS_FRACTION, "seconds": args.freshness_seconds}
    try:
        d.wait_for(r"partitions_assigned", 60)
        time.sleep(1.0)
        log(f"relational path: freshness: producing {rate:,.0f} logical changes/s "
            f"(20% of its CHANGES rate) for {args.freshness_seconds:g} s")
        producers = {t: kafka_produce.Producer(env.brokers, topics[t], PARTITIONS) for t in topics}
        start, i, sent_records, max_lag = time.time(), 0, 0, 0.0
        try:
            while i < len(groups) and d.alive():
                now = time.time()
                if now - start >= args.freshness_seconds:
                    break
                due = min(len(groups), int((now - start) * rate) + 1)
                if due > i:
                    by_table = {}
                    for j in range(i, due):
                        ts = int((start + j / rate) * 1000)
                        for table, key, value in groups[j]:
                            by_table.setdefault(table, []).append((ts, key, value))
                    max_lag = max(max_lag, now - (start + i / rate))
                    for table, recs in by_table.items():
                        producers[table].send(recs)
                        sent_records += len(recs)
                    i = due
                time.sleep(max(0.0, min(0.005, start + i / rate - time.time())))
            elapsed = time.time() - start
        finally:
            for p in producers.values():
                p.close()
        f.update({"sent": i, "sent_records": sent_records, "elapsed": elapsed,
                  "producer_max_lag": max_lag})
        d.wait_until(lambda: not positions(env, schema, group, topics)[0] - base < sent_records,
                     "relational path: freshness: the daemon did not catch up")
        text = d.save_metrics(os.path.join(env.work, f"relational-fresh-{tag}.metrics"))
    finally:
        d.stop()
    f.update(event_age(text, "relational path: freshness: denormd_event_age_seconds is empty"))
    f["rss_kib"] = d.rss_kib
    r["freshness"] = f
    log(f"relational path: freshness: {i} logical changes ({sent_records} records) at "
        f"{i / elapsed:,.0f}/s: p50 {f['p50'] * 1000:.1f} ms, p99 {f['p99'] * 1000:.1f} ms, "
        f"max {f['max'] * 1000:.1f} ms")


# ----------------------------------------------------------------------------
# The contender
# ----------------------------------------------------------------------------

class Relational(Contender):
    """LOAD and CHANGES of the relational path (the module's docstring), its documents checked
    after each, then its freshness; a failure is reported in the results and the notes, and
    the other contenders go on."""

    key = "relational"

    def __init__(self, env, results, w, ref, run_id):
        super().__init__(env, results, w)
        self.ref, self.run_id = ref, run_id
        self.schema = SCHEMAS[SCHEMA_KEY]
        self.group = f"denormd-rel-{run_id}"
        self.topics = topic_names(run_id)
        self.config = self.tr = None  # from load() on
        self.phase = None  # the phase done: "load", "changes"

    def load(self):
        env, schema, group, topics, load, n_load = (self.env, self.schema, self.group, self.topics,
                                                    self.w.load, self.w.n_load)
        r = self.result()
        r["partitions"] = PARTITIONS
        self.config = config = write_config(env, schema, topics, group,
                                            env.args.relational_batch_events)
        r["batch_events"] = env.args.relational_batch_events
        env.run([env.denormd, "check", "-q", "-c", config], "denormd check (relational)")
        drop_schema(env, schema)
        env.run([env.denormd, "verify", "-q", "-c", config], f"create schema {schema}")
        mark_schema(env, schema)
        create_topics(env, topics.values())
        self.tr = Translator()

        n, recs = self.fill_topics("load", load, n_load)
        r["load"] = consume(env, config, schema, group, topics, recs, n, "load",
                            "relational path (load)")
        lo = r["load"]
        log(f"relational path: load: {lo['seconds']:.1f} s from partition assignment "
            f"(+{lo['startup_seconds']:.1f} s start-up), {lo['records_rate']:,.0f} records/s, "
            f"{lo['rate']:,.0f} logical changes/s, peak RSS {(lo['rss_kib'] or 0) // 1024} MiB")
        self.phase = "load"

    def changes(self):
        env, results, schema, group, topics = self.env, self.results, self.schema, self.group, self.topics
        r = self.result()
        lo = r["load"]
        n, recs = self.fill_topics("changes", self.w.changes, self.w.n_changes)
        r["changes"] = consume(env, self.config, schema, group, topics, recs, n, "changes",
                               "relational path (changes)")
        c = r["changes"]
        r["rss_kib"] = max(x for x in (lo["rss_kib"], c["rss_kib"], 0) if x is not None) or None
        log(f"relational path: changes: {c['seconds']:.1f} s from partition assignment "
            f"(+{c['startup_seconds']:.1f} s start-up), {c['records_rate']:,.0f} change records/s, "
            f"{c['rate']:,.0f} logical changes/s, {c['documents'] / n:.2f} documents written per "
            f"logical change, peak RSS {(c['rss_kib'] or 0) // 1024} MiB")
        for phase in ("load", "changes"):
            if r[phase]["dead"]:
                results["notes"].append(f"relational path: {r[phase]['dead']} dead letters in {phase} "
                                        f"(see the schema {schema}'s dead_letters)")
        self.phase = "changes"

    def fill_topics(self, phase, path, expected):
        """A log's records appended to the topics (untimed): the load as the initial snapshot,
        the changes as streamed changes. Returns (logical changes, change records)."""
        snapshot = phase == "load"
        n, recs, per_table, secs = fill(self.env, self.topics, path, self.tr, snapshot=snapshot)
        if n != expected:
            raise BenchError(f"relational path: {n} {'load' if snapshot else 'change'} events "
                             f"translated, {expected} expected")
        self.result()[f"{phase}_fill"] = {"seconds": secs, "records": per_table}
        units = ("events", "snapshot records") if snapshot else ("logical changes", "change records")
        log(f"relational path: {phase}: {n:,} {units[0]} -> {recs:,} {units[1]} "
            f"({', '.join(f'{t} {c:,}' for t, c in per_table.items())}) in the topics in {secs:.1f} s")
        return n, recs

    def documents(self):
        """After LOAD, against the reference store while it is still at the load point; after
        CHANGES, against denormd replay's."""
        env, results, schema, ref = self.env, self.results, self.schema, self.ref
        if self.phase == "load":
            if ref is not None and ref.get("at") == 0:
                return check(env, "relational", results, schema, SCHEMAS["ref"],
                             "relational path after load")
            return None
        return check(env, "relational", results, schema, SCHEMAS["replay"],
                     "relational path after load + all changes")

    def freshness(self):
        env, results, r = self.env, self.results, self.result()
        try:
            freshness(env, r, self.tr, self.config, self.schema, self.group, self.topics, self.w,
                      self.run_id)
        except BenchError as e:
            log(f"relational path: freshness failed: {e}")
            results["notes"].append("relational path: freshness failed: " + str(e).splitlines()[0])

    def measure(self):
        env, results = self.env, self.results
        try:
            self.load()
            self.documents()
            self.changes()
            self.documents()
            if not self.result().get("wrong"):
                self.freshness()
        except (BenchError, TranslationError) as e:
            log(f"relational path: failed: {e}")
            results["contenders"].setdefault("relational", {})["failed"] = str(e)[:2000]
            results["notes"].append("relational path failed (its logs are in "
                                    f"{os.path.relpath(env.work, REPO)}): " + str(e).splitlines()[0])


# ----------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------

TARGET_RATIO = 0.8


def report_lines(results):
    """The relational path's rows under the main table (empty when it did not run)."""
    r = results["contenders"].get("relational")
    if not r:
        return []
    out = ["Relational path (Debezium change records of tables authors, books, book_authors "
           "(join table), posts, comments, one 1-partition topic each; projections `through` the "
           "join table; bench/relational.py): a logical change is one native event, which "
           "becomes 0 to 6 change records (a book's authorIds become book_authors rows: a move "
           "from 3 authors to 3 others is 6).", ""]
    if r.get("failed"):
        return out + [f"Relational path: failed: {r['failed'].splitlines()[0]}", ""]
    out += ["| relational path | logical changes | change records | change records/s "
            "| logical changes/s | documents written per logical change | peak RSS "
            "| vs denormd run (events/s) |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    run = run_rate(results)
    for phase, label in (("load", "LOAD (initial snapshot, `r` records, denormd run)"),
                         ("changes", "CHANGES (denormd run)")):
        p = r.get(phase)
        if not p:
            continue
        if r.get("wrong"):
            cells = [f"WRONG: {r['wrong']} documents differ"] * 2 + ["—"]
        else:
            cells = [f"{p['records_rate']:,.0f}", f"{p['rate']:,.0f}",
                     f"{p['documents'] / p['logical']:.2f}"]
        vs = (f"{p['rate'] / run:.2f}x" if phase == "changes" and run and not r.get("wrong")
              else "—")
        rss = f"{p['rss_kib'] / 1024:.0f} MiB" if p.get("rss_kib") else "—"
        out.append(f"| {label} | {p['logical']:,} | {p['records']:,} | " + " | ".join(cells)
                   + f" | {rss} | {vs} |")
    out.append("")
    c = r.get("changes")
    if c:
        note = (f"Relational path: each phase timed from partition assignment to the last record "
                f"committed (start-up {r['load']['startup_seconds']:.1f} s and "
                f"{c['startup_seconds']:.1f} s excluded); its LOAD is its own (the snapshot records "
                "through `denormd run`: the stored source differs from the native path's, so no "
                "copy of replay's)")
        if c.get("requests"):
            q = c["requests"]
            note += (f"; CHANGES in {q['batches']:,} batch{'es' if q['batches'] != 1 else ''}, "
                     f"{q['round_trips_per_batch']:.1f} round "
                     f"trips and {q['statements_per_batch']:.1f} statements per batch")
        if r.get("batch_events") is not None:
            note += (f"; its batch.max_events set to {r['batch_events']:,} "
                     "(--relational-batch-events), the native contenders' left as bench/config.yaml's")
        out.append(note + ".")
    f = r.get("freshness")
    if f and f.get("p99") is not None:
        out.append(f"Relational path freshness (Kafka timestamp → committed document, "
                   f"denormd_event_age_seconds per change record): {f['sent']:,} logical changes "
                   f"({f['sent_records']:,} records) at {f['sent'] / f['elapsed']:,.0f} logical "
                   f"changes/s (20% of its CHANGES rate): p50 {f['p50'] * 1000:.1f} ms, p99 "
                   f"{f['p99'] * 1000:.1f} ms, max {f['max'] * 1000:.1f} ms.")
    return out + [""]


def targets(results):
    """[(target, measured, verdict)] for bench/run.py's targets table."""
    r = results["contenders"].get("relational")
    if not r or r.get("failed"):
        return []
    mine = r["changes"]["rate"] if r.get("changes") and not r.get("wrong") else None
    run = run_rate(results)
    ok = None if not (mine and run) else mine / run >= TARGET_RATIO
    return [(f"relational path (Debezium, join table) >= {TARGET_RATIO}x denormd run's CHANGES "
             "events/s (logical changes)", f"{mine / run:.2f}x" if mine and run else "—",
             "n/a" if ok is None else ("MET" if ok else "NOT MET"))]
