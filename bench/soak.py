"""The soak mode of the benchmark (issue 31, point 3): one `denormd run` with the change
feed on, fed at a fixed share of its measured rate for a long time, sampled at a fixed
interval. Called by bench/run.py with --soak-minutes (the contenders other than denormd
run are then left out).

What it does, after bench/run.py has loaded the store and measured `denormd run`:

  1. the reference store (a copy of the loaded store) applies changes.jsonl (untimed),
     as before the freshness runs: the soak starts in the steady state;
  2. a new 4-partition source topic and a 4-partition feed topic (both with a size-bound
     retention, so that an hour at full rate does not fill the disk), and one `denormd
     run` on the reference store with a `feed` publishing every collection;
  3. a producer thread sends the soak stream (SoakStream below) at the soak rate
     (--soak-rate, or --soak-fraction of denormd run's measured CHANGES events/s) for
     --soak-minutes, each record stamped with the moment it became due;
  4. every --soak-sample-seconds: the daemon's RSS (VmRSS of /proc/PID/status), freshness
     p50/p99 over the interval (the difference of denormd_event_age_seconds between two
     scrapes of /metrics), batches and the mean batch time over the interval
     (denormd_batch_duration_seconds), the outbox rows (denormd_feed_outbox_rows), and per
     table of the store's schema its total size (pg_total_relation_size: heap, TOAST and
     indexes), index size, n_live_tup and n_dead_tup (pg_stat_user_tables), summed into
     groups: the collections, the entities (source rows), the reference index (refs and
     ref_counts), the outbox, the lock table, and the others;
  5. production stops; the daemon drains the topic and the outbox; its positions must
     count every event sent as applied (none stale, none dead: the stream is valid).

The samples become a table, an SVG plot (RSS, p99 and the table groups' sizes against
time) and three verdicts (verdicts()), with windows scaled by minutes/60 for a run
shorter than an hour.
"""

import bisect
import json
import math
import os
import random
import statistics
import threading
import time

import generate_workload  # noqa: E402  (bench/generate_workload.py: the Zipf sampler)
import kafka_produce  # noqa: E402
from harness.contenders.denormd_run import run_rate
from harness.daemon import Daemon, histogram, metric_value, positions_total, quantile
from harness.services import REPO, BenchError, log
from harness.svg import round_step, svg_start, x_ticks
from harness.store import COLLECTIONS, SCHEMAS, checkpoint, ref_advance, write_config

# The sustained-rate measurement's backlog: events sent ahead of what the daemon has
# committed (several of its largest batches, so it never waits for input).
SUSTAINED_BACKLOG = 20_000

# Table groups, in the order of the table's columns. A table not named here is "other".
GROUPS = ["collections", "entities", "refs", "outbox", "locks", "other"]
GROUP_TABLES = {"entities": {"entities"}, "refs": {"refs", "ref_counts"},
                "outbox": {"outbox"}, "locks": {"locks"}}
GROUP_NAMES = {"collections": "collections", "entities": "entities (source rows)",
               "refs": "reference index (refs, ref_counts)", "outbox": "outbox",
               "locks": "lock table", "other": "other"}

# Topic configs of the soak's topics: a size bound per partition, in segments small enough
# for it to apply (Kafka deletes whole closed segments, checked every 5 minutes).
TOPIC_RETENTION = ["retention.bytes=268435456", "segment.bytes=67108864"]

# --soak-autovacuum: per-table autovacuum settings for tables with much churn and few live
# rows (PostgreSQL's defaults vacuum a table once 20 % of its rows are dead, throttled by
# autovacuum_vacuum_cost_delay): vacuum after 1 % (at least 1,000 rows), unthrottled; the
# same for each table's TOAST table.
AUTOVACUUM = ["autovacuum_vacuum_scale_factor = 0.01", "autovacuum_vacuum_threshold = 1000",
              "autovacuum_vacuum_cost_delay = 0", "autovacuum_analyze_scale_factor = 0.02"]
AUTOVACUUM += ["toast." + x for x in AUTOVACUUM[:3]]

# The soak stream's mix, per 200 events. The benchmark's (generate_workload.py, per 100):
# new_comment 50, comment_delete 6, new_book 8, book_delete 3, book_rename 12, book_move 4,
# author_rename 5, author_thumbnail 5, comment_edit 4, comment_move 3. It creates 44
# comments and 5 books more than it deletes per 100 events: the store would grow 40-fold in
# an hour, and table sizes with it, by design. Here the creates and deletes of each type
# are the same events in the same total share, split evenly (new and delete comment 28 %
# each, new and delete book 5.5 % each); every other kind keeps its share.
SOAK_MIX = [
    (56, "new_comment"), (56, "comment_delete"), (11, "new_book"), (11, "book_delete"),
    (24, "book_rename"), (8, "book_move"), (10, "author_rename"), (10, "author_thumbnail"),
    (8, "comment_edit"), (6, "comment_move"),
]


class LiveSet:
    """Ids (ints) with O(1) add, removal of a random one and a random pick."""

    def __init__(self, ids=()):
        self.items = list(ids)
        self.index = {v: i for i, v in enumerate(self.items)}

    def __len__(self):
        return len(self.items)

    def add(self, v):
        self.index[v] = len(self.items)
        self.items.append(v)

    def pick(self, rng):
        return self.items[rng.randrange(len(self.items))]

    def pop_random(self, rng):
        i = rng.randrange(len(self.items))
        v, last = self.items[i], self.items[-1]
        self.items[i] = last
        self.index[last] = i
        self.items.pop()
        del self.index[v]
        return v


class SoakStream:
    """An endless change stream of the benchmark's shape, continuing a workload's
    changes.jsonl: the same ten kinds of change with the same data and the same Zipf skew
    over authors and posts (generate_workload.py), on the entities live after
    changes.jsonl, each event one version above the entity's last (so none is stale), new
    ids after the workload's highest, createdAt going on from its latest. The mix is
    SOAK_MIX: as many creates as deletes, so the live store keeps its size (deleted
    entities stay as tombstones in `entities` for retention.tombstone_hours)."""

    def __init__(self, load_path, changes_path, authors, posts, seed, zipf=1.1, id_prefix=""):
        self.P = id_prefix
        self.version = {}  # (type, id) -> last version, live entities only
        deleted = set()
        clock = 0
        for path in (load_path, changes_path):
            with open(path) as f:
                for line in f:
                    e = json.loads(line)
                    key = (e["type"], e["id"])
                    if e["op"] == "delete":
                        deleted.add(key)
                        self.version.pop(key, None)
                        continue
                    deleted.discard(key)
                    self.version[key] = max(self.version.get(key, 0), int(e["version"]))
                    created = (e.get("data") or {}).get("createdAt")
                    if isinstance(created, int):
                        clock = max(clock, created)
        n = len(id_prefix) + 1

        def live(kind):
            return [int(i[n:]) for t, i in self.version if t == kind]
        books, comments = live("book"), live("comment")
        self.books, self.comments = LiveSet(sorted(books)), LiveSet(sorted(comments))
        self.next_book = max(books + [int(i[n:]) for t, i in deleted if t == "book"] + [-1]) + 1
        self.next_comment = max(comments + [int(i[n:]) for t, i in deleted if t == "comment"]
                                + [-1]) + 1
        self.authors, self.posts = authors, posts
        self.clock = clock
        self.rng = random.Random(f"soak-{seed}")
        self.hot_author = generate_workload.zipf_sampler(self.rng, authors, zipf)
        self.hot_post = generate_workload.zipf_sampler(self.rng, posts, zipf)
        self.kinds = [k for w, k in SOAK_MIX for _ in range(w)]
        self.sent = 0
        self.counts = {k: 0 for _, k in SOAK_MIX}

    def _event(self, kind, eid, op, data=None):
        key = (kind, eid)
        v = self.version.get(key, 0) + 1
        if op == "delete":
            self.version.pop(key, None)  # never touched again: no need to remember it
        else:
            self.version[key] = v
        e = {"type": kind, "id": eid, "op": op, "version": v}
        if data is not None:
            e["data"] = data
        return json.dumps(e, separators=(",", ":"))

    def _author_data(self, i, generation=0):
        images = [{"profile": f"https://img.example/a{i}-p.png"}]
        images.insert(self.rng.randrange(2),
                      {"thumbnail": f"https://img.example/a{i}-t{generation}.png"})
        return {"firstName": f"First{i}", "lastName": f"Last{i}", "images": images}

    def _book_authors(self):
        ids = []
        for _ in range(self.rng.choice((1, 1, 2, 3))):
            a = f"{self.P}a{self.hot_author()}"
            if a not in ids:
                ids.append(a)
        return ids

    def _comment_data(self):
        self.clock += self.rng.randrange(1, 2000)
        return {"postId": f"{self.P}p{self.hot_post()}",
                "author": f"user{self.rng.randrange(50_000)}",
                "comment": "x" * self.rng.randrange(20, 120), "createdAt": self.clock}

    def next(self):
        """(key bytes, line bytes) of the next event."""
        rng, P = self.rng, self.P
        kind = rng.choice(self.kinds)
        if kind == "comment_delete" and len(self.comments) < 2:
            kind = "new_comment"
        if kind == "book_delete" and len(self.books) < 2:
            kind = "new_book"
        self.counts[kind] += 1
        if kind == "new_comment":
            c = self.next_comment
            self.next_comment += 1
            self.comments.add(c)
            t, i, line = "comment", f"{P}c{c}", self._event("comment", f"{P}c{c}", "upsert",
                                                             self._comment_data())
        elif kind == "new_book":
            b = self.next_book
            self.next_book += 1
            self.books.add(b)
            t, i = "book", f"{P}b{b}"
            line = self._event(t, i, "upsert", {"name": f"Book {b}", "authorIds":
                                                self._book_authors(), "pubYear": 2026})
        elif kind == "book_rename":
            b = self.books.pick(rng)
            t, i = "book", f"{P}b{b}"
            line = self._event(t, i, "patch", {"name": f"Book {b}, 2nd ed."})
        elif kind == "book_move":
            b = self.books.pick(rng)
            t, i = "book", f"{P}b{b}"
            line = self._event(t, i, "patch", {"authorIds": self._book_authors()})
        elif kind == "author_rename":
            a = rng.randrange(self.authors)
            t, i = "author", f"{P}a{a}"
            line = self._event(t, i, "patch", {"lastName": f"Last{a}-{rng.randrange(1000)}"})
        elif kind == "author_thumbnail":
            a = rng.randrange(self.authors)
            t, i = "author", f"{P}a{a}"
            line = self._event(t, i, "patch",
                               {"images": self._author_data(a, rng.randrange(1, 1000))["images"]})
        elif kind == "book_delete":
            b = self.books.pop_random(rng)
            t, i = "book", f"{P}b{b}"
            line = self._event(t, i, "delete")
        elif kind == "comment_delete":
            c = self.comments.pop_random(rng)
            t, i = "comment", f"{P}c{c}"
            line = self._event(t, i, "delete")
        elif kind == "comment_edit":
            c = self.comments.pick(rng)
            t, i = "comment", f"{P}c{c}"
            line = self._event(t, i, "patch", {"comment": "edited " + "y" * 40})
        else:  # comment_move: a reference move between posts
            c = self.comments.pick(rng)
            t, i = "comment", f"{P}c{c}"
            line = self._event(t, i, "patch", {"postId": f"{P}p{self.hot_post()}"})
        self.sent += 1
        return f"{t}:{i}".encode(), line.encode()


# How often the soak's producer sends what has become due (--soak-send-ms).
SEND_MS = 50


class Producer(threading.Thread):
    """Sends stream.next() at `rate` per second until `seconds` have passed or stop is set,
    as kafka_produce.produce_at_rate does (each record stamped with the moment it became
    due, so a producer behind schedule counts against freshness), what has become due every
    `send_ms` milliseconds, at most 2,000 records per request. sent, elapsed, max_lag and
    error are read by the sampler.

    send_ms: the broker runs on the same two cores as the daemon and PostgreSQL. Sending
    whenever a record became due (a request of a record or two every half millisecond at
    1,900 events/s) made the broker take half a core (0.50-0.53, against 0.11 while the
    closed-loop measurement sent 2,000 a request), which the daemon's batches then waited
    for; a producer batches (librdkafka waits linger.ms, 5 ms by default, and sends what
    gathered), and the delay is counted in the freshness (the stamps are the due times).

    With rate None it runs closed-loop instead (the sustained-rate measurement): it sends
    whenever fewer than `limit` events have been sent, `limit` being raised by the caller
    as the daemon commits, so that a fixed backlog stays ahead of the daemon."""

    def __init__(self, brokers, topic, stream, rate, seconds, send_ms=SEND_MS):
        super().__init__(daemon=True)
        self.send_s = send_ms / 1000
        self.producer = kafka_produce.Producer(brokers, topic, 4)
        self.stream, self.rate, self.seconds = stream, rate, seconds
        self.stop = threading.Event()
        self.sent, self.elapsed, self.max_lag, self.error = 0, 0.0, 0.0, None
        self.start_time = None
        self.limit = 0

    def run(self):
        try:
            start = self.start_time = time.time()
            i = 0
            while not self.stop.is_set():
                now = time.time()
                if now - start >= self.seconds:
                    break
                if self.rate is None:
                    n = min(self.limit, i + 2000)
                    if n > i:
                        stamp = int(now * 1000)
                        self.producer.send([(stamp,) + self.stream.next() for _ in range(i, n)])
                        i = self.sent = n
                    else:
                        time.sleep(0.01)
                    continue
                due = int((now - start) * self.rate) + 1
                if due > i:
                    n = min(due, i + 2000)
                    self.max_lag = max(self.max_lag, now - (start + i / self.rate))
                    batch = []
                    for j in range(i, n):
                        key, line = self.stream.next()
                        batch.append((int((start + j / self.rate) * 1000), key, line))
                    self.producer.send(batch)
                    i = self.sent = n
                time.sleep(max(0.0, now + self.send_s - time.time()))
            self.elapsed = time.time() - start
        except Exception as e:  # reported by the sampler
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.producer.close()


def vm_rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def histogram_delta(now, before):
    """The difference of two cumulative histograms ([(le, count)], same bounds)."""
    if not before:
        return now
    prev = dict(before)
    return [(le, c - prev.get(le, 0)) for le, c in now]


def table_stats(env, schema):
    """{group: {bytes, index_bytes, live, dead, autovacuums}} of the schema's tables."""
    rows = env.query(
        "select c.relname, pg_total_relation_size(c.oid), pg_indexes_size(c.oid), "
        "coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0), "
        "coalesce(s.autovacuum_count, 0) from pg_class c "
        "join pg_namespace n on n.oid = c.relnamespace "
        "left join pg_stat_user_tables s on s.relid = c.oid "
        f"where n.nspname = '{schema}' and c.relkind in ('r', 'p')")
    out = {g: {"bytes": 0, "index_bytes": 0, "live": 0, "dead": 0, "autovacuums": 0}
           for g in GROUPS}
    tables = {}
    for name, total, idx, live, dead, av in rows:
        g = "collections" if name in COLLECTIONS else next(
          (k for k, names in GROUP_TABLES.items() if name in names), "other")
        for k, v in zip(("bytes", "index_bytes", "live", "dead", "autovacuums"),
                        (total, idx, live, dead, av)):
            out[g][k] += int(v)
        tables[name] = {"bytes": int(total), "index_bytes": int(idx), "live": int(live),
                        "dead": int(dead), "autovacuums": int(av)}
    return out, tables


def run(env, results, changes, n_changes, sizes, ref, run_id, wdir):
    """The soak: see the module's docstring."""
    args = env.args
    r = results["soak"] = {"minutes": args.soak_minutes, "sample_seconds": args.soak_sample_seconds,
                           "samples": []}
    rate = None  # --soak-base sustained: measured below, once the daemon runs
    if args.soak_rate:
        rate, how = args.soak_rate, "--soak-rate"
    elif args.soak_base != "sustained":
        if args.soak_base == "feed":
            feed = results["contenders"].get("feed", {})
            base = feed["changes"]["rate"] if feed.get("changes") and not feed.get("wrong") else None
            whose = "denormd run + feed's"
        else:
            base, whose = run_rate(results), "denormd run's"
        if not base:
            raise BenchError(f"soak: no measured {whose} rate (and no --soak-rate)")
        rate, how = args.soak_fraction * base, f"{args.soak_fraction:.0%} of {whose} CHANGES rate"
        r["base_rate"] = base
    r["run_rate"] = run_rate(results)
    if rate is not None:
        r.update({"rate": rate, "how": how})
    schema = SCHEMAS["ref"]
    ref_advance(env, ref, changes, n_changes)
    log("soak: building the soak stream's state from the workload (load + changes)")
    stream = SoakStream(os.path.join(wdir, "load.jsonl"), changes, sizes["authors"],
                        sizes["posts"], args.seed)
    r["stream_start"] = {"live_books": len(stream.books), "live_comments": len(stream.comments)}
    topic, feed_topic = f"bench.soak.{run_id}", f"bench.soakfeed.{run_id}"
    for t in (topic, feed_topic):
        env.run([os.path.join(REPO, "scripts", "kafka.sh"), "topic-create", t, "4"]
                + TOPIC_RETENTION, f"create topic {t}")
    config = write_config(env, schema, topic=topic, group=f"denormd-soak-{run_id}")
    with open(config, "a") as fh:
        fh.write(f"feed:\n  topic: {feed_topic}\n  transactional_id: denormd-bench-soak-{run_id}\n")
        if args.soak_retention_interval:
            fh.write(f"retention:\n  interval_s: {args.soak_retention_interval}\n")
    r["settings"] = []
    if args.soak_retention_interval:
        r["settings"].append(f"retention.interval_s: {args.soak_retention_interval}")
    if args.soak_autovacuum:
        # The outbox exists once a daemon with a feed has started: set after start-up below.
        r["settings"].append("per table (--soak-autovacuum): " + ", ".join(AUTOVACUUM))
    r["config"] = open(config).read()
    samples_path = os.path.join(env.work, f"soak-{run_id}.jsonl")
    checkpoint(env)
    d = Daemon(env, config, args.metrics_port, os.path.join(env.work, f"soak-{run_id}.log"))
    seconds = args.soak_minutes * 60
    producer = None
    try:
        d.wait_for(r"partitions_assigned", 60)
        d.wait_for(r"feed_relay_started", 60)
        if args.soak_autovacuum:
            tables = [t for (t,) in env.query(
                f"select tablename from pg_tables where schemaname = '{schema}'")]
            env.psql("; ".join(f'alter table "{schema}"."{t}" set ({", ".join(AUTOVACUUM)})'
                               for t in tables))
        base_sent = 0
        if rate is None:
            m = r["sustained"] = measure_sustained(env, d, schema, topic, stream, args)
            base_sent = m["sent"]
            base = r["base_rate"] = m["rate"]
            rate = args.soak_fraction * base
            how = (f"{args.soak_fraction:.0%} of the {base:,.0f} events/s denormd run + feed "
                   f"sustained over {m['window']:.0f} s")
            r.update({"rate": rate, "how": how})
        log(f"soak: producing at {rate:,.0f} events/s ({how}) for {args.soak_minutes:g} min, "
            f"sampling every {args.soak_sample_seconds:g} s (samples: "
            f"{os.path.relpath(samples_path, REPO)})")
        text = d.metrics()  # the intervals' differences start here
        before = {"age": histogram(text, "denormd_event_age_seconds"), "cpu": cpu_seconds(),
                  "work": work_counters(text)}
        producer = Producer(env.brokers, topic, stream, rate, seconds, args.soak_send_ms)
        producer.base = base_sent  # the measurement's events, already applied
        producer.start()
        while producer.start_time is None and producer.is_alive():
            time.sleep(0.01)
        start = producer.start_time or time.time()
        k = 0
        with open(samples_path, "w") as out:
            while True:
                k += 1
                at = start + k * args.soak_sample_seconds
                if k * args.soak_sample_seconds > seconds + 1e-6:
                    break
                while time.time() < at:
                    if not d.alive():
                        raise BenchError("soak: denormd run exited "
                                         f"({d.proc.returncode}):\n" + d.log_text()[-3000:])
                    if producer.error:
                        raise BenchError(f"soak: the producer failed: {producer.error}")
                    time.sleep(min(0.5, max(0.0, at - time.time())))
                s = sample(env, d, schema, topic, producer, start, before)
                s["minute"] = k * args.soak_sample_seconds / 60  # nominal: the windows' clock
                r["samples"].append(s)
                out.write(json.dumps(s) + "\n")
                out.flush()
                log(f"soak: {s['minute']:5.1f} min: RSS {s['rss_kib'] / 1024:.0f} MiB, p50 "
                    f"{fmt_ms(s['p50'])} p99 {fmt_p99(s)}, {s['batches']} batches of "
                    f"{fmt_ms(s['batch_mean'])}, sent {s['sent']:,}, committed "
                    f"{s['committed']:,}, outbox {s['outbox_rows']}, tables "
                    + ", ".join(f"{g} {s['groups'][g]['bytes'] / 2**20:.0f}" for g in GROUPS)
                    + f" MiB; load {s['loadavg']:.1f}, harness CPU {s['harness_cpu']:.0%}; "
                    + fmt_work(s["work"]))
        producer.stop.set()
        producer.join(30)
        r.update({"sent": producer.sent, "sent_before": base_sent, "elapsed": producer.elapsed,
                  "producer_max_lag": producer.max_lag, "mix": dict(stream.counts)})
        log(f"soak: production stopped after {producer.sent:,} events; waiting for the daemon "
            "to apply them and the relay to empty the outbox")
        caught = wait_applied(env, d, schema, topic, base_sent + producer.sent,
                              "no catch-up after production", outbox=True)
        r["catch_up_seconds"] = caught - (start + producer.elapsed)
        row = env.query(f'select coalesce(sum(applied), 0), coalesce(sum(stale), 0), '
                        f'coalesce(sum(dead), 0) from "{schema}".positions '
                        f"where source like 'kafka:%:' || '{topic}'")[0]
        r["positions"] = {"applied": int(row[0]), "stale": int(row[1]), "dead": int(row[2])}
        text = d.save_metrics(os.path.join(env.work, f"soak-{run_id}.metrics"))
        r["feed_published"] = int(metric_value(text, "denormd_feed_published_total") or 0)
        _, r["tables_end"] = table_stats(env, schema)
    finally:
        if producer is not None:
            producer.stop.set()
        d.stop()
        r["peak_rss_kib"] = d.rss_kib
    p = r["positions"]
    total = r["sent"] + r["sent_before"]
    if p["stale"] or p["dead"] or p["applied"] != total:
        results["notes"].append(f"soak: of {total:,} events sent, {p['applied']:,} applied, "
                                f"{p['stale']:,} stale, {p['dead']:,} dead (all should apply)")
    log(f"soak: done: {total:,} events, {p['applied']:,} applied, {p['stale']} stale, "
        f"{p['dead']} dead; caught up {r['catch_up_seconds']:.1f} s after production; peak RSS "
        f"{(d.rss_kib or 0) // 1024} MiB")


def measure_sustained(env, d, schema, topic, stream, args):
    """The rate `d` (denormd run with the feed on) sustains: the soak stream sent closed-loop
    for --soak-measure-seconds, a backlog of SUSTAINED_BACKLOG events kept ahead of what the
    daemon has committed, so it always has work and never a growing queue; the rate is what
    it committed after the first --soak-measure-warmup seconds, divided by the time. Then the
    daemon drains the backlog. Returns {rate, window, sent, minutes: [per-minute rates]}."""
    seconds, warmup = args.soak_measure_seconds, args.soak_measure_warmup
    log(f"soak: measuring the sustained rate: {seconds:g} s closed-loop, "
        f"{SUSTAINED_BACKLOG:,} events ahead of the daemon, the first {warmup:g} s not counted")
    producer = Producer(env.brokers, topic, stream, None, seconds)
    producer.limit = SUSTAINED_BACKLOG
    producer.start()
    points = []  # (seconds since start, committed)
    work = []  # work_counters at the first point after the warm-up, and at the end
    start = time.time()
    try:
        while time.time() - start < seconds:
            if not d.alive():
                raise BenchError("soak: denormd run exited while measuring its rate "
                                 f"({d.proc.returncode}):\n" + d.log_text()[-3000:])
            if producer.error:
                raise BenchError(f"soak: the producer failed: {producer.error}")
            committed = positions_total(env, schema, topic)
            points.append((time.time() - start, committed))
            if not work and points[-1][0] >= warmup:
                work.append(work_counters(d.metrics()))
            producer.limit = committed + SUSTAINED_BACKLOG
            if len(points) > 60 and len(points) % 60 == 1:
                a = points[-61]
                log(f"soak: measuring: {points[-1][0]:.0f} s, {committed:,} committed, "
                    f"{(committed - a[1]) / (points[-1][0] - a[0]):,.0f} events/s over the "
                    "last minute")
            time.sleep(1.0)
    finally:
        producer.stop.set()
        producer.join(30)
    if producer.error:
        raise BenchError(f"soak: the producer failed: {producer.error}")
    text = d.metrics()
    now = work_counters(text)
    w = work_between(work[0] if work else now, now)
    outbox = int(metric_value(text, "denormd_feed_outbox_rows") or 0)
    t0, c0 = next(p for p in points if p[0] >= warmup)
    t1, c1 = points[-1]
    minutes = []
    for a, b in zip(points, points[60::60]):
        minutes.append(round((b[1] - a[1]) / (b[0] - a[0])))
    rate = (c1 - c0) / (t1 - t0)
    wait_applied(env, d, schema, topic, producer.sent,
                 "the daemon did not drain the measurement's backlog")
    log(f"soak: sustained {rate:,.0f} events/s over {t1 - t0:.0f} s (per minute: "
        + ", ".join(f"{m:,}" for m in minutes) + f"); {producer.sent:,} events sent, drained; "
        + f"after the warm-up {fmt_work(w)}; outbox at the end {outbox:,} rows")
    return {"rate": rate, "window": t1 - t0, "sent": producer.sent, "minutes": minutes,
            "backlog": SUSTAINED_BACKLOG, "seconds": seconds, "warmup": warmup, "work": w,
            "outbox_rows_at_end": outbox}


def wait_applied(env, d, schema, topic, count, failure, outbox=False):
    """Waits until `count` events of `topic` are committed (applied, stale or dead) and, with
    `outbox`, the relay has emptied the outbox; returns that moment. Raises BenchError
    ("soak: <failure> (...)") after 5 minutes or when the daemon exits."""
    deadline = time.time() + 300
    while True:
        done = positions_total(env, schema, topic)
        waiting = int(env.scalar(f'select count(*) from "{schema}".outbox')) if outbox else 0
        if done >= count and waiting == 0:
            return time.time()
        if time.time() > deadline or not d.alive():
            raise BenchError(f"soak: {failure} ({done:,}/{count:,} events"
                             + (f", {waiting} outbox rows" if outbox else "") + "):\n"
                             + d.log_text()[-3000:])
        time.sleep(0.2)


def cpu_seconds():
    t = os.times()
    return t.user + t.system


WORK_COUNTERS = {"batches": "denormd_batch_duration_seconds_count",
                 "batch_seconds": "denormd_batch_duration_seconds_sum",
                 "events": "denormd_events_applied_total",
                 "documents": "denormd_documents_written_total",
                 "round_trips": "denormd_store_round_trips_total"}


def work_counters(text):
    """The daemon's work so far, from a /metrics scrape (WORK_COUNTERS)."""
    return {k: metric_value(text, name) or 0 for k, name in WORK_COUNTERS.items()}


def work_between(before, after):
    """What a batch was between two work_counters: events, documents written per event,
    round trips and seconds (None without a batch)."""
    d = {k: after[k] - before[k] for k in WORK_COUNTERS}
    if not d["batches"]:
        return {"events_per_batch": None, "documents_per_event": None,
                "round_trips_per_batch": None, "seconds_per_batch": None}
    return {"events_per_batch": d["events"] / d["batches"],
            "documents_per_event": d["documents"] / d["events"] if d["events"] else None,
            "round_trips_per_batch": d["round_trips"] / d["batches"],
            "seconds_per_batch": d["batch_seconds"] / d["batches"]}


def fmt_work(w):
    if w["events_per_batch"] is None:
        return "no batch"
    return (f"{w['events_per_batch']:,.0f} events per batch, {w['seconds_per_batch'] * 1000:,.0f} ms "
            f"({w['seconds_per_batch'] * 1000 / w['events_per_batch']:.3f} ms per event), "
            f"{w['documents_per_event']:.2f} documents per event, "
            f"{w['round_trips_per_batch']:.1f} round trips per batch")


def sample(env, d, schema, topic, producer, start, before):
    committed = positions_total(env, schema, topic)  # before `sent`: behind is never < 0
    now = time.time()
    rss = vm_rss_kib(d.proc.pid)
    cpu = cpu_seconds()
    text = d.metrics()
    age = histogram(text, "denormd_event_age_seconds")
    delta = histogram_delta(age, before["age"])
    work = work_counters(text)
    batches = work["batches"] - before["work"]["batches"]
    s = {"t": now - start, "minute": (now - start) / 60, "rss_kib": rss,
         "events": delta[-1][1] if delta else 0,
         "p50": quantile(delta, 0.5), "p99": quantile(delta, 0.99),
         # more than 1 % beyond the last finite bound: p99 is at least that bound
         "p99_beyond": len(delta) > 1 and delta[-1][1] - delta[-2][1] > 0.01 * delta[-1][1],
         "batches": int(batches),
         "batch_mean": (work["batch_seconds"] - before["work"]["batch_seconds"]) / batches
         if batches else None,
         "sent": getattr(producer, "base", 0) + producer.sent, "committed": committed,
         "outbox_rows": int(metric_value(text, "denormd_feed_outbox_rows") or 0),
         # the machine's 1-minute load average, and this harness's CPU (the producer and its
         # stream) as a share of one core over the interval
         "loadavg": os.getloadavg()[0],
         "harness_cpu": (cpu - before["cpu"]) / max(1e-9, now - before.get("at", start)),
         # the oldest snapshot any session holds (transactions): what vacuum can clean
         "xmin_age": int(env.scalar("select coalesce(max(age(backend_xmin)), 0) "
                                    "from pg_stat_activity") or 0)}
    s["behind"] = s["sent"] - s["committed"]
    s["work"] = work_between(before["work"], work)
    s["groups"], s["tables"] = table_stats(env, schema)
    # entities' rows, and of them the tombstones (deleted entities, kept for
    # retention.tombstone_hours): exact counts, one scan
    row = env.query(f'select count(*), count(*) filter (where deleted) from "{schema}".entities')[0]
    s["entity_rows"], s["tombstones"] = int(row[0]), int(row[1])
    before.update({"age": age, "work": work, "cpu": cpu, "at": now})
    return s


# ----------------------------------------------------------------------------
# Verdicts, table, plot
# ----------------------------------------------------------------------------

def fmt_ms(v):
    return "—" if v is None else f"{v * 1000:,.0f} ms"


def fmt_p99(s):
    return ("≥ " if s.get("p99_beyond") else "") + fmt_ms(s["p99"])


def windows(minutes):
    """The issue's windows (minutes) scaled by minutes/60: (RSS reference point, p99
    early window (a, b), last window length, table-size reference point)."""
    f = minutes / 60
    return {"scale": f, "rss_at": 5 * f, "p99_early": (5 * f, 15 * f), "last": 10 * f,
            "size_at": 15 * f}


def _at(samples, minute):
    """The first sample at or after `minute`."""
    i = bisect.bisect_left([s["minute"] for s in samples], minute - 1e-9)
    return samples[i] if i < len(samples) else None


def verdicts(soak):
    """[(target, measured, verdict)] from the samples; see bench/README.md."""
    samples = [s for s in soak.get("samples", []) if s.get("rss_kib") is not None]
    out = []
    if len(samples) < 3:
        return [("soak", "fewer than 3 samples", "n/a")]
    w = windows(soak["minutes"])
    end = samples[-1]["minute"]
    if end < w["size_at"]:  # interrupted before the reference points
        return [("soak", f"ended at {end:g} min, before its reference points", "n/a")]
    # RSS after 5 minutes: the level it reached by then, its highest sample up to 5
    # minutes (one sample can fall in a dip: RSS falls by tens of MiB when the allocator
    # returns a large batch's memory), against the highest after.
    s5 = _at(samples, w["rss_at"])
    warm = max(s["rss_kib"] for s in samples if s["minute"] <= s5["minute"] + 1e-9)
    after = [s["rss_kib"] for s in samples if s["minute"] > s5["minute"]]
    if after:
        ratio = max(after) / warm
        out.append((f"RSS within 10 % of its value after {w['rss_at']:g} min (its highest up "
                    "to then)",
                    f"{warm / 1024:.0f} MiB up to {s5['minute']:.1f} min ({s5['rss_kib'] / 1024:.0f} "
                    f"at it), highest after {max(after) / 1024:.0f} MiB ({ratio - 1:+.1%})",
                    "MET" if ratio <= 1.10 else "NOT MET"))
    a, b = w["p99_early"]
    early = [s["p99"] for s in samples if a - 1e-9 <= s["minute"] <= b + 1e-9 and s["p99"] is not None]
    late = [s["p99"] for s in samples if s["minute"] >= end - w["last"] - 1e-9 and s["p99"] is not None]
    if early and late:
        e, l_ = statistics.median(early), statistics.median(late)
        out.append((f"freshness p99 without upward trend: median of the last {w['last']:g} min "
                    f"within 20 % of minutes {a:g}–{b:g}",
                    f"{e * 1000:,.0f} ms ({len(early)} samples) → {l_ * 1000:,.0f} ms "
                    f"({len(late)} samples) ({l_ / e - 1:+.0%})",
                    "MET" if l_ <= 1.2 * e else "NOT MET"))
    else:
        out.append(("freshness p99 without upward trend", "too few samples", "n/a"))
    s15 = _at(samples, w["size_at"])
    s_last = _at(samples, end - w["last"])
    growing = []
    cut = s_last["minute"]
    earlier = [s for s in samples if s15["minute"] - 1e-9 <= s["minute"] < cut - 1e-9] or [s15]
    last = [s for s in samples if s["minute"] >= cut - 1e-9]
    tombstones_only = None
    for g in GROUPS:
        v15, v_last, v_end = (x["groups"][g]["bytes"] for x in (s15, s_last, samples[-1]))
        high_before = max(s["groups"][g]["bytes"] for s in earlier)
        high_last = max(s["groups"][g]["bytes"] for s in last)
        grows = still_grows(high_before, high_last)
        verdict = "still grows" if grows else "flat"
        if grows and g == "entities" and "tombstones" in s15:
            tombstones_only = tombstone_growth(s15, samples[-1], earlier, last)
            if tombstones_only:
                verdict = "tombstones only"
        if grows and verdict == "still grows":
            growing.append(g)
        span = samples[-1]["minute"] - s_last["minute"]
        out.append((f"size of {GROUP_NAMES[g]}: at {w['size_at']:g} min → end; last "
                    f"{w['last']:g} min",
                    f"{mib(v15)} → {mib(v_end)} MiB; {mib(v_last)} → {mib(v_end)} MiB in the "
                    f"last {w['last']:g} min"
                    + (f" ({(v_end - v_last) / 2**20 / span:+,.1f} MiB/min)" if span else "")
                    + f"; highest {mib(high_before)} before it, {mib(high_last)} in it",
                    verdict))
    if tombstones_only:
        out.append(("entities: growth by tombstones only (kept for retention.tombstone_hours, "
                    "then pruned: bounded by the delete rate times that)", tombstones_only,
                    "bounded by retention"))
    out.append(("table sizes bounded (no group still growing, tombstones within their "
                "retention apart)",
                ", ".join(growing) + " still growing" if growing else "all flat"
                + (" but entities' tombstones" if tombstones_only else ""),
                "NOT MET" if growing else "MET"))
    return out


def tombstone_growth(s15, end, earlier, last):
    """When `entities` grows by tombstones only (its rows other than tombstones do not still
    grow: their highest count in the last window is at most 2 % above their highest before
    it), what they cost: a description with the tombstones per hour, bytes per tombstone and
    the size they reach at the default retention (168 h) at this rate; else None."""
    def others(s):
        return s["entity_rows"] - s["tombstones"]
    high_before, high_last = max(others(s) for s in earlier), max(others(s) for s in last)
    if high_last > 1.02 * high_before:
        return None
    added = end["tombstones"] - s15["tombstones"]
    minutes = end["minute"] - s15["minute"]
    if added <= 0 or minutes <= 0:
        return None
    per_hour = added / minutes * 60
    per_row = (end["groups"]["entities"]["bytes"] - s15["groups"]["entities"]["bytes"]) / added
    return (f"{s15['tombstones']:,} → {end['tombstones']:,} tombstones ({per_hour:,.0f}/h, "
            f"{per_row:,.0f} bytes each with their index entries); other rows "
            f"{others(s15):,} → {others(end):,}; at 168 h (the default) and this rate: "
            f"{per_hour * 168 * per_row / 2**30:,.1f} GiB")


def still_grows(before, after):
    """A group still grows when its highest size in the last window is above its highest
    between the size reference point and that window by more than 2 % and 1 MiB (a table
    vacuumed or pruned in time reuses its space: its size levels off, or saws up and down
    under a ceiling)."""
    return after - before > max(0.02 * before, 2**20)


def mib(b):
    return f"{b / 2**20:,.1f}"


def report(results):
    """The soak's section of the results file (markdown lines)."""
    soak = results.get("soak")
    if not soak:
        return []
    w = windows(soak["minutes"])
    out = ["", f"## Soak: {soak['minutes']:g} minutes at {soak['rate']:,.0f} events/s "
           f"({soak['how']})", ""]
    if soak["minutes"] < 60:
        out += [f"A SHORT soak: the issue's windows (5, 15 and the last 10 minutes of an "
                f"hour) are scaled by {soak['minutes']:g}/60: RSS reference at "
                f"{w['rss_at']:g} min, p99 early window minutes {w['p99_early'][0]:g}–"
                f"{w['p99_early'][1]:g}, last window {w['last']:g} min, sizes from "
                f"{w['size_at']:g} min.", ""]
    out.append("One `denormd run` with the change feed on (every collection to a 4-partition "
               "topic), the soak stream (bench/soak.py: SoakStream) produced into a "
               "4-partition topic; a row per sample, freshness and batch time over the "
               "interval since the previous sample, sizes in MiB (heap, TOAST and indexes), "
               "dead tuples from pg_stat_user_tables; events: applied in the interval "
               "(the histogram's count), behind: sent but not yet committed; p99 \"≥\": more "
               "than 1 % of the interval's events beyond the histogram's last bound; oldest "
               "xmin age: the oldest snapshot any session held (transactions), what vacuum "
               "cannot clean behind; load avg: the machine's 1-minute load average; harness "
               "CPU: this process (the producer and its stream) as a share of one core. "
               + (f"Settings: {'; '.join(soak['settings'])}. " if soak.get("settings") else
                  "PostgreSQL's and denormd's default settings. ")
               + f"Samples every {soak['sample_seconds']:g} s"
               + (f"; plot: `{os.path.basename(soak['plot'])}` beside this file" if soak.get("plot") else "")
               + ".")
    out.append("")
    head = ["minute", "RSS MiB", "events", "behind", "p50", "p99", "batches", "ms per batch",
            "outbox rows"]
    head += [f"{g} MiB" for g in GROUPS] + ["tombstones", "dead tuples: " + ", ".join(
        g for g in GROUPS if g != "other"), "oldest xmin age", "load avg", "harness CPU"]
    out.append("| " + " | ".join(head) + " |")
    out.append("| " + " | ".join("---:" for _ in head) + " |")
    for s in soak["samples"]:
        row = [f"{s['minute']:.1f}", f"{s['rss_kib'] / 1024:.0f}" if s["rss_kib"] else "—",
               f"{s['events']:,}", f"{s['behind']:,}", fmt_ms(s["p50"]), fmt_p99(s),
               f"{s['batches']:,}",
               "—" if s["batch_mean"] is None else f"{s['batch_mean'] * 1000:,.0f}",
               f"{s['outbox_rows']:,}"]
        row += [mib(s["groups"][g]["bytes"]) for g in GROUPS]
        row.append(f"{s['tombstones']:,}" if "tombstones" in s else "—")
        row.append(" / ".join(f"{s['groups'][g]['dead']:,}" for g in GROUPS if g != "other"))
        row += [f"{s['xmin_age']:,}", f"{s['loadavg']:.1f}", f"{s['harness_cpu']:.0%}"]
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    m = soak.get("sustained")
    if m:
        out.append(f"The rate: before the soak, the same daemon was sent the soak stream "
                   f"closed-loop for {m['seconds']:g} s, {m['backlog']:,} events kept ahead of "
                   f"what it had committed; it committed {m['rate']:,.0f} events/s over the "
                   f"{m['window']:.0f} s after the first {m['warmup']:g} (per minute from the "
                   f"start: " + ", ".join(f"{x:,}" for x in m["minutes"]) + f"); those "
                   f"{m['sent']:,} events were drained before the soak started.")
        out.append("")
    if soak.get("sent") is not None:
        p = soak.get("positions", {})
        out.append(f"Sent {soak['sent']:,} events in {soak['elapsed']:.0f} s "
                   f"({soak['sent'] / soak['elapsed']:,.0f}/s, producer at most "
                   f"{soak['producer_max_lag'] * 1000:,.0f} ms behind schedule); applied "
                   f"{p.get('applied', 0):,}"
                   + (f" (with the measurement's {soak['sent_before']:,})"
                      if soak.get("sent_before") else "") + f", stale {p.get('stale', 0):,}, dead {p.get('dead', 0):,}; "
                   f"caught up (topic applied, outbox empty) {soak.get('catch_up_seconds', 0):.1f} s "
                   f"after production stopped; {soak.get('feed_published', 0):,} document changes "
                   f"published; peak RSS {(soak.get('peak_rss_kib') or 0) // 1024} MiB.")
        out.append("")
    out += ["| soak target | measured | |", "| --- | --- | --- |"]
    out += [f"| {t} | {m} | {v} |" for t, m, v in verdicts(soak)]
    out.append("")
    return out


def svg(soak, title):
    """Three panels against time (minutes): RSS (MiB), freshness p99 (ms, log scale) and the
    table groups' sizes (MiB), in freshness_svg's style."""
    samples = [s for s in soak["samples"] if s.get("rss_kib")]
    W, L, R, T, B, PH, GAP = 720, 80, 170, 48, 48, 170, 40
    H = T + 3 * PH + 2 * GAP + B
    xmax = max(soak["minutes"], max(s["minute"] for s in samples))
    step = round_step(xmax, 6)
    xmax = math.ceil(xmax / step - 1e-9) * step
    px = lambda v: L + (W - L - R) * v / xmax  # noqa: E731
    o = svg_start(W, H, title)
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]

    def panel(i, label, series, log=False):
        top = T + i * (PH + GAP)
        bottom = top + PH
        vals = [v for _, pts in series for _, v in pts if v is not None and (v > 0 or not log)]
        if not vals:
            return
        if log:
            lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
            hi = max(hi, lo + 1)
            py = lambda v: bottom - PH * (math.log10(v) - lo) / (hi - lo)  # noqa: E731
            ticks = [10 ** e for e in range(lo, hi + 1)]
        else:
            vmax = max(vals) * 1.1 or 1
            st = round_step(vmax, 5)
            vmax = math.ceil(vmax / st) * st
            py = lambda v: bottom - PH * v / vmax  # noqa: E731
            ticks = [st * j for j in range(int(round(vmax / st)) + 1)]
        for v in ticks:
            y = py(v)
            o.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
            o.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{v:,.6g}</text>')
        o.append(f'<line x1="{L}" y1="{bottom}" x2="{W - R}" y2="{bottom}" stroke="black"/>')
        o.append(f'<line x1="{L}" y1="{top}" x2="{L}" y2="{bottom}" stroke="black"/>')
        o.append(f'<text transform="translate(20 {(top + bottom) / 2}) rotate(-90)" '
                 f'text-anchor="middle">{label}</text>')
        x_ticks(o, px, bottom, xmax, step, lambda v: f"{v:,.6g}")
        for j, (name, pts) in enumerate(series):
            color = colors[j % len(colors)]
            xy = [(px(m), py(v)) for m, v in pts if v is not None and (v > 0 or not log)]
            if not xy:
                continue
            o.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                     + " ".join(f"{a:.1f},{b:.1f}" for a, b in xy) + '"/>')
            for a, b in xy:
                o.append(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.5" fill="{color}"/>')
            ly = top + 10 + 16 * j
            o.append(f'<line x1="{W - R + 10}" y1="{ly}" x2="{W - R + 30}" y2="{ly}" '
                     f'stroke="{color}" stroke-width="2"/>')
            o.append(f'<text x="{W - R + 36}" y="{ly + 4}">{name}</text>')

    panel(0, "daemon RSS (MiB)", [("VmRSS", [(s["minute"], s["rss_kib"] / 1024) for s in samples])])
    panel(1, "freshness (ms, log)", [
        ("p99", [(s["minute"], s["p99"] * 1000 if s["p99"] else None) for s in samples]),
        ("p50", [(s["minute"], s["p50"] * 1000 if s["p50"] else None) for s in samples])], log=True)
    panel(2, "table sizes (MiB)", [(g, [(s["minute"], s["groups"][g]["bytes"] / 2**20)
                                        for s in samples]) for g in GROUPS])
    o.append(f'<text x="{(L + W - R) / 2}" y="{H - 10}" text-anchor="middle">minutes since '
             'production started</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


def write_plot(results, results_path):
    """The SVG beside the results file; its path, or None without samples."""
    soak = results.get("soak")
    if not soak or len([s for s in soak.get("samples", []) if s.get("rss_kib")]) < 2:
        return None
    path = os.path.splitext(results_path)[0] + "-soak.svg"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(svg(soak, f"denormd run + feed: soak at {soak['rate']:,.0f} events/s, "
                           f"{soak['minutes']:g} min"))
    soak["plot"] = path
    return path
