#!/usr/bin/env python3
"""denormd's benchmark: one command, one machine, the same events, the same PostgreSQL.

Contenders, each in a fresh schema of one database:

  ceiling            the source rows only, stored in bulk (COPY into a staging table,
                     one set-based INSERT ... ON CONFLICT), no projection work
  denormd replay     `denormd replay` of the JSON Lines logs
  denormd run        `denormd run` consuming a pre-filled 4-partition Kafka topic
  denormd run + feed the same with the change feed on (every document change to Kafka),
                     and the delay from the PostgreSQL commit to the topic (--skip-feed)
  relational path    `denormd run` on the same workload as Debezium change records of
                     relational tables with a join table (book_authors), one topic per
                     table, projections `through` the join table (bench/relational.py):
                     LOAD, CHANGES in change records/s and logical changes/s, its ratio to
                     denormd run, freshness at 20% of its rate (--skip-relational)
  triggers/event     PL/pgSQL triggers on the source tables (bench/triggers.sql), one
                     transaction per event (a sample of the change stream: slow)
  triggers/1000      the same triggers, transactions of 1,000 events
  Kafka Streams      bench/peers/kstreams: the same projections as a Kafka Streams 4.1
                     application (exactly_once_v2), LOAD and CHANGES from its own
                     4-partition topic, its output topics read back and checked, and its
                     freshness at denormd's freshness rate (--skip-kstreams: left out)
  write floor        not a contender but a bound (--skip-floor): per batch of denormd's
                     batch.max_events, the source rows as the ceiling writes them plus only
                     the documents that batch changed, in bulk, one transaction each

Two phases, measured separately: LOAD (load.jsonl, the initial state) and CHANGES
(changes.jsonl applied on top of the loaded store). CHANGES events/s is the headline.
Every contender's documents (collections authors, books, posts, post_comments) are
compared with denormd replay's at the same point of the stream; a contender whose
documents differ gets no number ("WRONG: N documents differ").

Then freshness: `denormd run` on a loaded store while the change stream is produced
into Kafka at a fixed rate (10%, 20% and 50% of denormd run's measured CHANGES rate, a
new daemon each); the time from produce to committed document, p50/p99/max, from the
daemon's denormd_event_age_seconds histogram, in a table and an SVG plot beside it. And
scaling: denormd replay's CHANGES rate on a store 10x smaller (--scale-small), same
change-stream length; and that small store's change stream again on the large store with
the small store's entities added (the same work on 11x the data).

The table goes to stdout and, with the command, date and machine, to an untracked file
(STATE_DIR/results/run-<date>.md, the raw figures beside it as .json); --record writes the
committed bench/results/latest.{md,json} instead. Progress goes to stderr. See
bench/README.md.

Safety: one run per state dir at a time (a lock file); a run whose ports are taken by
another process stops before starting or dropping anything; schemas are dropped only in the
server whose data directory is this state dir's, and only those the harness marked as its
own (a comment on the schema).

Soak mode (--soak-minutes M, bench/soak.py): the ceiling, denormd replay and denormd run
only, then one `denormd run` with the change feed on: first its sustained rate (5 minutes
with a backlog kept ahead of it), then M minutes at --soak-fraction of that rate (or
--soak-rate), fed an endless change stream of the workload's shape,
sampled every --soak-sample-seconds (RSS, freshness, batch time, table sizes and dead
tuples); a table, an SVG plot (-soak.svg) and three verdicts. See bench/README.md.

Examples:
  bench/run.py                                    # the default size (the issue's)
  bench/run.py --soak-minutes 60                  # the soak: an hour at 50% of the rate
  bench/run.py --authors 500 --books 5000 --posts 50 --comments 50000 --changes 10000
  bench/run.py --skip-kafka --no-build --keep-services
"""

import argparse
import fcntl
import hashlib
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import datetime, timezone

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.dont_write_bytecode = True  # no bench/__pycache__
import kafka_produce  # noqa: E402  (bench/kafka_produce.py)
import relational  # noqa: E402  (bench/relational.py)
import soak  # noqa: E402  (bench/soak.py)

COLLECTIONS = ["authors", "books", "posts", "post_comments"]
# The default run is a tenth of the issue's sizes, so that the whole benchmark
# fits in 10 minutes on 2 cores; the issue's sizes (10,000 authors, 100,000
# books, 1,000 posts, 1,000,000 comments, 200,000 changes) take about 15
# minutes (docs/benchmarks.md has both).
GEN_DEFAULTS = {"authors": 1_000, "books": 10_000, "posts": 100, "comments": 100_000}
SCHEMAS = {  # contender -> schema
    "ceiling": "bench_ceiling", "replay": "bench_replay", "run": "bench_run",
    "ref": "bench_ref", "triggers": "bench_triggers", "small": "bench_small",
    "kstreams": "bench_kstreams", "feed": "bench_feed",
    "floor": "bench_floor", "floor_writes": "bench_floor_writes",
    "relational": "bench_relational",
}
KSTREAMS_DIR = os.path.join(BENCH, "peers", "kstreams")

T0 = time.time()


def log(msg):
    m, s = divmod(int(time.time() - T0), 60)
    print(f"[bench {m:02d}:{s:02d}] {msg}", file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


def fmt_rate(x):
    return "—" if x is None else f"{x:,.0f}"


def fmt_count(n):
    return f"{n:,}"


# ----------------------------------------------------------------------------
# Processes, psql
# ----------------------------------------------------------------------------

class Env:
    def __init__(self, args):
        self.args = args
        self.state_dir = os.path.abspath(args.state_dir)
        self.work = os.path.join(self.state_dir, "run")
        self.pg_url = f"postgresql://postgres@127.0.0.1:{args.pg_port}/denorm"
        self.brokers = f"127.0.0.1:{args.kafka_port}"
        self.denormd = os.path.join(REPO, "build", "denormd")
        self.env = dict(os.environ)
        self.env.update({
            "DENORMD_STATE_DIR": self.state_dir,
            "DENORMD_PG_PORT": str(args.pg_port),
            "DENORMD_KAFKA_PORT": str(args.kafka_port),
            "DENORMD_POSTGRES": self.pg_url,
            "DENORMD_KAFKA_BROKERS": self.brokers,
            "PGOPTIONS": "",
        })
        self.env.pop("PGDATABASE", None)
        self.owned = False  # set by check_server_ownership: only then is anything dropped

    def run(self, cmd, what, capture=True, stdin=None, check=True):
        """Runs cmd; on failure raises BenchError with its stderr."""
        p = subprocess.run(cmd, env=self.env, stdin=stdin,
                           stdout=subprocess.PIPE if capture else None,
                           stderr=subprocess.PIPE, text=True, cwd=REPO)
        if check and p.returncode != 0:
            raise BenchError(f"{what} failed (exit {p.returncode}): {shlex.join(cmd)}\n"
                             + (p.stderr or "")[-3000:] + (p.stdout or "")[-2000:])
        return p

    def psql(self, sql=None, file=None, what="psql", variables=None, output=None):
        cmd = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", self.pg_url, "-tA"]
        for k, v in (variables or {}).items():
            cmd += ["-v", f"{k}={v}"]
        if sql is not None:
            cmd += ["-c", sql]
        if file is not None:
            cmd += ["-f", file]
        if output is not None:
            cmd += ["-o", output]
        return self.run(cmd, what).stdout

    def query(self, sql):
        out = self.psql(sql).strip()
        return [line.split("|") for line in out.splitlines()] if out else []

    def scalar(self, sql):
        rows = self.query(sql)
        return rows[0][0] if rows else None


def timed_process(env, cmd, what, stdout_path=None, stderr_path=None):
    """Runs cmd to completion. Returns (seconds, stdout text, peak RSS KiB of the child)."""
    out = open(stdout_path, "w") if stdout_path else subprocess.PIPE
    err = open(stderr_path, "w") if stderr_path else subprocess.PIPE
    start = time.time()
    p = subprocess.Popen(cmd, env=env.env, stdout=out, stderr=err, text=True, cwd=REPO)
    stdout_text, stderr_text = "", ""
    if not stdout_path or not stderr_path:
        # Drain pipes in threads so the child never blocks on a full pipe.
        bufs = {}

        def drain(name, stream):
            bufs[name] = stream.read()
        threads = []
        if not stdout_path:
            threads.append(threading.Thread(target=drain, args=("out", p.stdout)))
        if not stderr_path:
            threads.append(threading.Thread(target=drain, args=("err", p.stderr)))
        for t in threads:
            t.start()
    _, status, rusage = os.wait4(p.pid, 0)
    seconds = time.time() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    if not stdout_path or not stderr_path:
        for t in threads:
            t.join()
        stdout_text, stderr_text = bufs.get("out", ""), bufs.get("err", "")
    for f in (out, err):
        if f is not subprocess.PIPE:
            f.close()
    if stdout_path:
        stdout_text = open(stdout_path).read()
    if stderr_path:
        stderr_text = open(stderr_path).read()
    if p.returncode != 0:
        raise BenchError(f"{what} failed (exit {p.returncode}): {shlex.join(cmd)}\n"
                         + stderr_text[-3000:] + stdout_text[-1000:])
    return seconds, stdout_text, rusage.ru_maxrss


# ----------------------------------------------------------------------------
# Setup: dependencies, build, services, workload
# ----------------------------------------------------------------------------

def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def preflight(env, args):
    """Before anything is built, started or dropped: one run per state dir at a time, and
    every port either free or served by this state dir's own service. A second run whose
    ports are taken stops here with a message, touching nothing."""
    os.makedirs(env.state_dir, exist_ok=True)
    env.lock = open(os.path.join(env.state_dir, "bench.lock"), "w")
    try:
        fcntl.flock(env.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise BenchError(f"another bench/run.py is running with state dir {env.state_dir}; wait "
                         "for it or pass another --state-dir (and other ports)")
    busy = []
    services = [("postgres", [args.pg_port], "--pg-port")]
    if not args.skip_kafka:
        services.append(("kafka", [args.kafka_port, args.kafka_port + 1], "--kafka-port"))
    for name, ports, flag in services:
        script = os.path.join(REPO, "scripts", f"{name}.sh")
        if env.run([script, "status"], f"{name}.sh status", check=False).returncode == 0:
            continue  # this state dir's own server, left running by an earlier run: reused
        busy += [f"{p} ({name}, {flag})" for p in ports if port_open(p)]
    if not args.skip_kafka and port_open(args.metrics_port):
        busy.append(f"{args.metrics_port} (denormd run's metrics, --metrics-port)")
    if busy:
        raise BenchError("port(s) " + ", ".join(busy) + " already in use by another process "
                         "(another checkout's benchmark?). Nothing was started or dropped; pass "
                         "free ports (and a separate --state-dir) to run beside it.")


def setup(env, args, started):
    if not args.no_build:
        log("installing dependencies (scripts/install-deps.sh; nothing to do if present)")
        env.run([os.path.join(REPO, "scripts", "install-deps.sh")], "install-deps.sh")
        build_dir = os.path.join(REPO, "build")
        if not os.path.exists(os.path.join(build_dir, "build.ninja")):
            log("configuring the build (RelWithDebInfo)")
            env.run(["cmake", "-S", REPO, "-B", build_dir, "-G", "Ninja",
                     "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], "cmake configure")
        else:
            btype = ""
            cache = os.path.join(build_dir, "CMakeCache.txt")
            for line in open(cache):
                if line.startswith("CMAKE_BUILD_TYPE:"):
                    btype = line.split("=", 1)[1].strip()
            if btype not in ("RelWithDebInfo", "Release"):
                log(f"warning: build/ is configured as {btype or 'no build type'}; "
                    "figures need an optimized build (RelWithDebInfo)")
        log("building denormd")
        env.run(["cmake", "--build", build_dir, "--target", "denormd"], "build")
    if not os.access(env.denormd, os.X_OK):
        raise BenchError(f"{env.denormd} is missing; build it (drop --no-build)")
    if not args.skip_kafka and not args.skip_kstreams:
        kstreams_build(env, args)
    # Every command of the run uses one copy of the binary: a rebuild of build/ meanwhile
    # must not mix two versions (their stores may differ).
    os.makedirs(env.work, exist_ok=True)
    copy = os.path.join(env.work, "denormd")
    shutil.copy2(env.denormd, copy)
    env.denormd = copy

    log(f"starting PostgreSQL on port {args.pg_port} (state in {env.state_dir})")
    start_service(env, "postgres", started)
    check_server_ownership(env)
    if not args.skip_kafka:
        log(f"starting Kafka on port {args.kafka_port}")
        start_service(env, "kafka", started)


def start_service(env, name, started):
    """Starts scripts/NAME.sh; records NAME in `started` unless it was already running
    (a service the run did not start is left running at the end)."""
    script = os.path.join(REPO, "scripts", f"{name}.sh")
    was_running = env.run([script, "status"], f"{name}.sh status", check=False).returncode == 0
    env.run([script, "start"], f"{name}.sh start")
    if not was_running:
        started.append(name)


def stop_services(env, started):
    for name in reversed(started):
        script = os.path.join(REPO, "scripts", f"{name}.sh")
        log(f"stopping {name}")
        env.run([script, "stop"], f"{name} stop", check=False)


def workload(env, sizes, changes, seed, label, id_prefix=""):
    """Generates (or reuses) a workload; returns its directory. id_prefix: prepended to every
    entity id, so that the workload's entities can be added to another workload's store."""
    gen = os.path.join(BENCH, "generate_workload.py")
    gen_hash = hashlib.sha256(open(gen, "rb").read()).hexdigest()[:16]
    params = dict(sizes, changes=changes, seed=seed)
    name = "a{authors}-b{books}-p{posts}-c{comments}-ch{changes}-s{seed}".format(**params)
    if id_prefix:
        params["id_prefix"] = id_prefix
        name += "-id" + re.sub(r"[^A-Za-z0-9]", "_", id_prefix)
    d = os.path.join(os.path.abspath(env.args.out), name)
    manifest_path = os.path.join(d, "manifest.json")
    manifest = dict(params, generator_sha256=gen_hash)
    try:
        if json.load(open(manifest_path)) == manifest and all(
                os.path.exists(os.path.join(d, f)) for f in ("load.jsonl", "changes.jsonl")):
            log(f"workload ({label}): reusing {d}")
            return d
    except (OSError, ValueError):
        pass
    log(f"workload ({label}): generating {d}")
    if os.path.exists(manifest_path):
        os.remove(manifest_path)
    cmd = [sys.executable, gen, "--out", d, "--changes", str(changes), "--seed", str(seed),
           "--id-prefix", id_prefix]
    for k in ("authors", "books", "posts", "comments"):
        cmd += [f"--{k}", str(sizes[k])]
    env.run(cmd, "generate_workload.py")
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)
    return d


def count_lines(path):
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


def slice_lines(src, dst, start, end):
    """Writes lines [start, end) of src to dst."""
    with open(src, "rb") as f, open(dst, "wb") as out:
        for i, line in enumerate(f):
            if i >= end:
                break
            if i >= start:
                out.write(line)
    return dst


# ----------------------------------------------------------------------------
# Shared measurements
# ----------------------------------------------------------------------------

SCHEMA_MARK_PREFIX = "created by denormd bench/run.py, state dir "


def schema_mark(env):
    return SCHEMA_MARK_PREFIX + env.state_dir


def mark_schema(env, schema):
    """Marks a schema the run created, so that only such schemas are ever dropped."""
    env.psql(f"comment on schema \"{schema}\" is '{schema_mark(env)}'")


def check_server_ownership(env):
    """The PostgreSQL on --pg-port must be the benchmark's own cluster, in --state-dir: the
    harness drops schemas only there (another checkout's server on a shared port is never
    touched). Sets env.owned."""
    want = os.path.realpath(os.path.join(env.state_dir, "postgres"))
    got = env.scalar("show data_directory")
    if not got or os.path.realpath(got) != want:
        raise BenchError(f"the PostgreSQL on port {env.args.pg_port} serves {got}, not this run's "
                         f"cluster ({want}); it belongs to someone else: not touching it. "
                         "Pass another --pg-port (and --state-dir).")
    env.owned = True


def drop_schema(env, schema):
    """Drops a schema this harness created (marked) in its own server; refuses anything else."""
    if not env.owned:
        raise BenchError(f"refusing to drop schema {schema}: the server was not verified as this "
                         "run's own")
    comment = env.scalar("select coalesce(obj_description(oid, 'pg_namespace'), '') from pg_namespace "
                         f"where nspname = '{schema}'")
    if comment is None:
        return  # no such schema
    if comment != schema_mark(env):
        raise BenchError(f"schema {schema} exists but was not created by this benchmark's state dir "
                         f"({comment!r}); drop it yourself if it is to go")
    env.psql(f'drop schema if exists "{schema}" cascade')


def vacuum_analyze(env, schema):
    """Untimed, after each LOAD: every contender starts CHANGES with fresh statistics."""
    tables = [r[0] for r in env.query(
        f"select tablename from pg_tables where schemaname = '{schema}'")]
    if tables:
        env.psql("vacuum analyze " + ", ".join(f'"{schema}"."{t}"' for t in tables))


def checkpoint(env):
    env.psql("checkpoint")


def row_writes(env, schema):
    """n_tup_ins + n_tup_upd + n_tup_del of the collection tables (stable reading).

    Backends report their counters when they exit, a moment after the client does:
    read until two readings agree."""
    names = ", ".join(f"'{c}'" for c in COLLECTIONS)
    sql = (f"select coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) from pg_stat_user_tables "
           f"where schemaname = '{schema}' and relname in ({names})")
    last = None
    for _ in range(40):
        v = int(env.scalar(sql))
        if v == last:
            return v
        last = v
        time.sleep(0.3)
    return last


# Bucket collections (bench/config.yaml's `buckets`): collection -> (group field, items field).
# Which member sits in which bucket may depend on batching (DESIGN.md, "Buckets (revised
# contract)"), so they are compared by content: per group, the items of its documents
# concatenated in ascending `seq` order (the id's numeric suffix, "p1:3", where a document has
# no `seq`). The other collections are compared document by document.
BUCKETS = {"post_comments": ("postId", "comments")}


def bucket_groups_sql(schema, collection):
    by, field = BUCKETS[collection]
    return (f"select g, jsonb_agg(item order by seq, ord) as items from ("
            f"select d.doc->>'{by}' as g, coalesce((d.doc->>'seq')::numeric, "
            f"substring(d.id from ':([0-9]+)$')::numeric) as seq, e.item, e.ord "
            f"from \"{schema}\".\"{collection}\" d, "
            f"jsonb_array_elements(d.doc->'{field}') with ordinality e(item, ord)) m group by g")


def compare_documents(env, schema, reference):
    """Documents that differ between schema and reference (full outer join on id); for a
    bucket collection, the groups whose content differs."""
    parts = []
    for c in COLLECTIONS:
        if c in BUCKETS:
            parts.append(
                f"select count(*) from ({bucket_groups_sql(schema, c)}) x full outer join "
                f"({bucket_groups_sql(reference, c)}) y on x.g = y.g "
                f"where x.g is null or y.g is null or x.items is distinct from y.items")
            continue
        parts.append(
            f"select count(*) from (select id, doc from \"{schema}\".\"{c}\") x "
            f"full outer join (select id, doc from \"{reference}\".\"{c}\") y on x.id = y.id "
            f"where x.id is null or y.id is null or x.doc is distinct from y.doc")
    rows = env.query("select " + ", ".join(f"({p})" for p in parts))
    diffs = dict(zip(COLLECTIONS, (int(v) for v in rows[0])))
    total = sum(diffs.values())
    docs = int(env.scalar("select " + " + ".join(
        f"(select count(*) from \"{reference}\".\"{c}\")" for c in COLLECTIONS)))
    return total, diffs, docs


def check(env, result_key, results, schema, reference, label):
    total, diffs, docs = compare_documents(env, schema, reference)
    if total == 0:
        log(f"check {label}: identical to denormd's {fmt_count(docs)} documents")
    else:
        detail = ", ".join(f"{c} {n}" + (" groups (by content)" if c in BUCKETS else "")
                           for c, n in diffs.items() if n)
        log(f"check {label}: WRONG: {total} documents differ ({detail})")
    results.setdefault("checks", []).append(
        {"contender": result_key, "label": label, "differ": total, "documents": docs,
         "detail": diffs})
    if total:
        results["contenders"].setdefault(result_key, {})["wrong"] = total
    return total


def write_config(env, schema, topic=None, group=None):
    src = open(os.path.join(BENCH, "config.yaml")).read()
    text, n = re.subn(r"(?m)^(\s*schema:\s*)\S+", lambda m: m.group(1) + schema, src, count=1)
    if n != 1:
        raise BenchError("bench/config.yaml: no store.schema line to set")
    if topic:
        text, n = re.subn(r"topics:\s*\[[^\]]*\]", f"topics: [{topic}]", text, count=1)
        if n != 1:
            raise BenchError("bench/config.yaml: no source.kafka.topics to set")
    if group:
        text, n = re.subn(r"group:\s*[\w.-]+", f"group: {group}", text, count=1)
        if n != 1:
            raise BenchError("bench/config.yaml: no source.kafka.group to set")
    path = os.path.join(env.work, f"config-{schema}" + (f"-{topic}" if topic else "") + ".yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


REPLAY_SUMMARY = re.compile(
    r"([\d,]+) events?.* in ([\d,]+) transactions?, ([\d.]+) s: .*?([\d,]+) documents? written"
    r"(?:, ([\d,]+) deleted)?(?:; peak RSS (\d+) MiB)?")
REPLAY_REQUESTS = re.compile(r"([\d,]+) round trips to PostgreSQL \(([\d,]+) statements\)")


def store_requests(events, batches, round_trips, statements):
    """Round trips to PostgreSQL and SQL statements sent (retries included), in all, per batch
    and per event; None when the daemon did not report them."""
    if round_trips is None or statements is None or not batches or not events:
        return None
    r = {"events": events, "batches": int(batches), "round_trips": int(round_trips),
         "statements": int(statements)}
    for k in ("round_trips", "statements"):
        r[k + "_per_batch"] = r[k] / r["batches"]
        r[k + "_per_event"] = r[k] / events
    return r


def metrics_requests(text, events):
    """store_requests from a daemon's /metrics (denormd_store_*_total, denormd_batches_total)."""
    return store_requests(events, metric_value(text, "denormd_batches_total"),
                          metric_value(text, "denormd_store_round_trips_total"),
                          metric_value(text, "denormd_store_statements_total"))


def denormd_replay(env, schema, config, path, what):
    """Replays one log; returns a dict: events, seconds, rss_kib, documents (pg_stat)."""
    before = row_writes(env, schema)
    out_path = os.path.join(env.work, f"replay-{schema}-{os.path.basename(path)}.out")
    seconds, stdout, rss = timed_process(
        env, [env.denormd, "replay", "-q", "-c", config, path], what, stdout_path=out_path)
    m = REPLAY_SUMMARY.search(stdout)
    if not m:
        raise BenchError(f"{what}: no summary line in denormd replay's output:\n{stdout[-2000:]}")
    events = int(m.group(1).replace(",", ""))
    r = {"events": events, "seconds": seconds, "denormd_seconds": float(m.group(3)),
         "transactions": int(m.group(2).replace(",", "")),
         "denormd_documents_written": int(m.group(4).replace(",", "")),
         "rss_kib": rss, "summary": stdout.strip()}
    # denormd's own peak (VmHWM): wait4's ru_maxrss is kept across exec, so it
    # starts at this harness's size.
    own = re.search(r"peak RSS (\d+) MiB", stdout)
    if own:
        r["rss_kib"] = int(own.group(1)) * 1024
    q = REPLAY_REQUESTS.search(stdout)
    r["requests"] = store_requests(events, r["transactions"],
                                   *(int(v.replace(",", "")) for v in q.groups())) if q else None
    r["documents"] = row_writes(env, schema) - before
    return r


def create_denormd_schema(env, schema):
    """An empty store, created by denormd itself (verify on an empty schema does nothing else)."""
    drop_schema(env, schema)
    config = write_config(env, schema)
    env.run([env.denormd, "verify", "-q", "-c", config], f"create schema {schema}")
    mark_schema(env, schema)
    return config


def clone_schemas(env, src, dsts, exclude=("positions", "dead_letters")):
    """Copies every table's rows from src into each of dsts (which denormd created empty),
    the copies running side by side (untimed), then VACUUM ANALYZE."""
    tables = [r[0] for r in env.query(
        f"select tablename from pg_tables where schemaname = '{src}' order by tablename")]
    procs = []
    for dst in dsts:
        stmts = ["begin;", "set local session_replication_role = replica;"]
        for t in tables:
            if t in exclude:
                continue
            cols = [r[0] for r in env.query(
                f"select column_name from information_schema.columns where table_schema = '{src}' "
                f"and table_name = '{t}' and is_generated = 'NEVER' order by ordinal_position")]
            collist = ", ".join(f'"{c}"' for c in cols)
            stmts.append(f'delete from "{dst}"."{t}";')  # e.g. what denormd wrote on creating it
            stmts.append(f'insert into "{dst}"."{t}" ({collist}) select {collist} from "{src}"."{t}";')
        stmts.append("commit;")
        path = os.path.join(env.work, f"clone-{dst}.sql")
        with open(path, "w") as f:
            f.write("\n".join(stmts) + "\n")
        cmd = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", env.pg_url, "-f", path]
        procs.append((dst, cmd, subprocess.Popen(cmd, env=env.env, stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE, text=True)))
    for dst, cmd, p in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            raise BenchError(f"clone {src} into {dst} failed: {shlex.join(cmd)}\n{err[-3000:]}")
    for dst in dsts:
        vacuum_analyze(env, dst)


# ----------------------------------------------------------------------------
# Contenders
# ----------------------------------------------------------------------------

COPY_OPTS = "with (format csv, quote e'\\x01', delimiter e'\\x02')"  # each line one text value

# Source rows in bulk, the ceiling's way (and the write floor's): the lines of a JSON Lines
# file copied into a staging table, then one set-based upsert of the newest version of each
# entity into `table` (type, id, version, deleted, data).
SOURCE_ROWS_SQL = """create temp table source_lines (line text) on commit drop;
\\copy source_lines from '{sources}' {copy}
insert into {table} as s (type, id, version, deleted, data)
select distinct on (e->>'type', e->>'id') e->>'type', e->>'id', (e->>'version')::numeric,
       e->>'op' = 'delete', e->'data'
from (select line::jsonb as e from source_lines) x
order by e->>'type', e->>'id', (e->>'version')::numeric desc
on conflict (type, id) do update set version = excluded.version, deleted = excluded.deleted,
  data = excluded.data
where excluded.version > s.version;
"""


def ceiling(env, results, load, changes, n_load, n_changes):
    schema = SCHEMAS["ceiling"]
    drop_schema(env, schema)
    env.psql(f'create schema "{schema}"; create table "{schema}".entities (type text collate "C", '
             f'id text collate "C", version numeric, deleted boolean not null default false, '
             f'data jsonb, primary key (type, id))')
    mark_schema(env, schema)
    r = results["contenders"].setdefault("ceiling", {})
    for phase, path, n in (("load", load, n_load), ("changes", changes, n_changes)):
        sql = os.path.join(env.work, f"ceiling-{phase}.sql")
        with open(sql, "w") as f:
            f.write("begin;\n" + SOURCE_ROWS_SQL.format(sources=path, table=f'"{schema}".entities',
                                                          copy=COPY_OPTS) + "commit;\n")
        checkpoint(env)
        log(f"ceiling: {phase} ({fmt_count(n)} events)")
        seconds, _, _ = timed_process(env, ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d",
                                            env.pg_url, "-f", sql], f"ceiling {phase}")
        r[phase] = {"events": n, "seconds": seconds, "rate": n / seconds}
        log(f"ceiling: {phase}: {seconds:.1f} s, {n / seconds:,.0f} events/s")
        if phase == "load":
            vacuum_analyze(env, schema)


def replay_contender(env, results, load, changes, n_changes, clones):
    """denormd replay: LOAD, then the clones (untimed), then CHANGES."""
    schema = SCHEMAS["replay"]
    config = create_denormd_schema(env, schema)
    r = results["contenders"].setdefault("replay", {})
    checkpoint(env)
    log(f"denormd replay: load ({os.path.basename(load)})")
    r["load"] = denormd_replay(env, schema, config, load, "denormd replay (load)")
    r["load"]["rate"] = r["load"]["events"] / r["load"]["seconds"]
    log(f"denormd replay: load: {r['load']['seconds']:.1f} s, {r['load']['rate']:,.0f} events/s, "
        f"peak RSS {r['load']['rss_kib'] // 1024} MiB")
    vacuum_analyze(env, schema)
    configs = {}
    if clones:
        log(f"copying the loaded store into {', '.join(clones)} (untimed)")
        for clone in clones:
            configs[clone] = create_denormd_schema(env, clone)
        clone_schemas(env, schema, clones)
    checkpoint(env)
    log(f"denormd replay: changes ({fmt_count(n_changes)} events)")
    r["changes"] = denormd_replay(env, schema, config, changes, "denormd replay (changes)")
    c = r["changes"]
    c["rate"] = c["events"] / c["seconds"]
    r["rss_kib"] = max(r["load"]["rss_kib"], c["rss_kib"])
    r["entities"] = int(env.scalar(f'select count(*) from "{schema}".entities'))
    log(f"denormd replay: changes: {c['seconds']:.1f} s, {c['rate']:,.0f} events/s, "
        f"{c['documents'] / c['events']:.2f} documents written per event, "
        f"peak RSS {c['rss_kib'] // 1024} MiB")
    return configs


def config_batch_events():
    """bench/config.yaml's batch.max_events: the events in each of replay's transactions."""
    m = re.search(r"max_events:\s*(\d+)", open(os.path.join(BENCH, "config.yaml")).read())
    if not m:
        raise BenchError("bench/config.yaml: no batch.max_events")
    return int(m.group(1))


# The write floor's statement for the documents one batch changed: upserted (or deleted) in
# one statement. (Its source rows: SOURCE_ROWS_SQL, as the ceiling writes them.)
FLOOR_DOCUMENTS_SQL = """create temp table document_lines (line text) on commit drop;
\\copy document_lines from '{documents}' {copy}
with x as (select line::jsonb as e from document_lines),
gone as (delete from {table} d using x
         where (x.e->>'deleted')::boolean and d.collection = x.e->>'c' and d.id = x.e->>'id')
insert into {table} (collection, id, pk, seq, doc)
select e->>'c', e->>'id', e->>'pk', (e->>'seq')::bigint, e->'doc' from x
where not (e->>'deleted')::boolean
on conflict (collection, id) do update set pk = excluded.pk, seq = excluded.seq, doc = excluded.doc;
"""


def write_floor(env, results, changes, n_changes, config):
    """The write floor: what writing only the rows that change costs PostgreSQL, committed
    every `batch.max_events` events as denormd commits.

    Untimed, per batch: denormd replay applies it to a copy of the loaded store (schema
    "floor"), and the documents it wrote whose content or seq differs from before, and those
    it deleted, are exported. Timed: one psql that runs one transaction per batch, each
    writing the batch's source rows as the ceiling does and those documents in one upsert,
    into bare tables (schema "floor_writes": primary keys and the bucket paging index only).
    No reads, no reference index, no counters: a floor under any maintainer of these
    documents that commits as often. Its rate against the ceiling bounds the throughput
    target."""
    store, w = SCHEMAS["floor"], SCHEMAS["floor_writes"]
    batch = config_batch_events()
    drop_schema(env, w)
    union = " union all ".join(f"select '{c}' as collection, id, pk, seq, doc, xmin from "
                               f'"{store}"."{c}"' for c in COLLECTIONS)
    documents_table = (f'(collection text collate "C", id text collate "C", pk text collate "C", '
                       "seq bigint, doc jsonb not null, primary key (collection, id))")
    env.psql(f'create schema "{w}"; '
             f'create table "{w}".sources (type text collate "C", id text collate "C", '
             f"version numeric, deleted boolean not null default false, data jsonb, "
             f"primary key (type, id)); "
             f'insert into "{w}".sources select type, id, version, deleted, data from "{store}".entities; '
             f'create table "{w}".documents {documents_table}; '
             f'insert into "{w}".documents select collection, id, pk, seq, doc from ({union}) d; '
             f'create index on "{w}".documents (collection, pk, seq) where seq is not null; '
             # what the store's documents were before each batch (untimed bookkeeping)
             f'create table "{w}".before {documents_table}; '
             f'insert into "{w}".before select * from "{w}".documents')
    mark_schema(env, w)
    f = results["floor"] = {"batch": batch, "events": 0, "transactions": 0, "documents": 0,
                            "deleted": 0}
    log(f"write floor: the documents each batch of {fmt_count(batch)} changes (denormd replay, "
        "untimed)")
    # Documents are compressed as denormd's session compresses them (lz4 where the server
    # has it: about twice as fast as the default pglz).
    script = ["\\set ON_ERROR_STOP on",
              "select set_config('default_toast_compression', 'lz4', false) from pg_settings "
              "where name = 'default_toast_compression' and 'lz4' = any(enumvals) \\g /dev/null"]
    for start in range(0, n_changes, batch):
        end = min(n_changes, start + batch)
        part = slice_lines(changes, os.path.join(env.work, f"floor-{start}.jsonl"), start, end)
        xid = int(env.scalar("select txid_current() % 4294967296"))
        denormd_replay(env, store, config, part, "write floor: denormd replay")
        documents = os.path.join(env.work, f"floor-{start}-documents.jsonl")
        changed = (f"select collection, id, pk, seq, doc, false as deleted from ({union}) a "
                   f"where a.xmin::text::bigint >= {xid} and not exists (select 1 from "
                   f'"{w}".before d where d.collection = a.collection and d.id = a.id '
                   f"and d.doc = a.doc and d.seq is not distinct from a.seq)")
        gone = (f'select collection, id, null, null::bigint, null::jsonb, true from "{w}".before d '
                f"where not exists (select 1 from ({union}) a where a.collection = d.collection "
                f"and a.id = d.id)")
        env.psql(f"\\copy (select json_build_object('c', collection, 'id', id, 'pk', pk, "
                 f"'seq', seq, 'doc', doc, 'deleted', deleted)::text from ({changed} union all "
                 f"{gone}) x) to '{documents}' {COPY_OPTS}")
        bookkeeping = os.path.join(env.work, "floor-before.sql")
        with open(bookkeeping, "w") as fh:
            fh.write("begin;\n" + FLOOR_DOCUMENTS_SQL.format(
                documents=documents, table=f'"{w}".before', copy=COPY_OPTS) + "commit;\n")
        env.psql(file=bookkeeping, what="write floor: bookkeeping")
        with open(documents) as fh:
            for line in fh:
                f["deleted" if json.loads(line)["deleted"] else "documents"] += 1
        f["events"] += end - start
        f["transactions"] += 1
        script += ["begin;", SOURCE_ROWS_SQL.format(sources=part, table=f'"{w}".sources',
                                                    copy=COPY_OPTS),
                   FLOOR_DOCUMENTS_SQL.format(documents=documents, table=f'"{w}".documents',
                                              copy=COPY_OPTS), "commit;"]
    vacuum_analyze(env, w)
    sql = os.path.join(env.work, "floor.sql")
    with open(sql, "w") as fh:
        fh.write("\n".join(script) + "\n")
    checkpoint(env)
    log(f"write floor: {f['transactions']} transactions, {f['documents']:,} documents written and "
        f"{f['deleted']:,} deleted, with the batches' source rows")
    f["seconds"], _, _ = timed_process(env, ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d",
                                             env.pg_url, "-f", sql], "write floor")
    f["rate"] = f["events"] / f["seconds"]
    log(f"write floor: {f['seconds']:.2f} s, {f['rate']:,.0f} events/s")
    drop_schema(env, w)


class Daemon:
    """denormd run in the background, its log in a file, its RSS from wait4."""

    def __init__(self, env, config, metrics_port, log_path):
        self.env, self.metrics_port, self.log_path = env, metrics_port, log_path
        self.log_file = open(log_path, "w")
        self.started = time.time()
        self.proc = subprocess.Popen(
            [env.denormd, "run", "-c", config, "--metrics-port", str(metrics_port)],
            env=env.env, stdout=self.log_file, stderr=subprocess.STDOUT, cwd=REPO)
        self.rss_kib = None

    def log_text(self):
        return open(self.log_path).read()

    def alive(self):
        return self.proc.poll() is None

    def wait_for(self, pattern, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(pattern, self.log_text())
            if m:
                return time.time()
            if not self.alive():
                raise BenchError(f"denormd run exited ({self.proc.returncode}):\n"
                                 + self.log_text()[-3000:])
            time.sleep(0.05)
        raise BenchError(f"denormd run: no '{pattern}' in {timeout} s:\n" + self.log_text()[-3000:])

    def wait_for_count(self, count, total, what, unit, stall_seconds):
        """Polls count() every 0.1 s until it reaches total and returns that moment; a
        BenchError when it stays unchanged for stall_seconds or the daemon exits."""
        last, last_change = 0, time.time()
        while True:
            n = count()
            now = time.time()
            if n >= total:
                return time.time()
            if n != last:
                last, last_change = n, now
            elif now - last_change > stall_seconds:
                raise BenchError(f"{what}: no progress for {stall_seconds} s at {n}/{total} {unit}:\n"
                                 + self.log_text()[-3000:])
            if not self.alive():
                raise BenchError(f"{what}: denormd run exited ({self.proc.returncode}):\n"
                                 + self.log_text()[-3000:])
            time.sleep(0.1)

    def metrics(self):
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.read().decode()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                _, status, rusage = os.wait4(self.proc.pid, 0)
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                self.rss_kib = rusage.ru_maxrss
            except ChildProcessError:
                self.proc.wait()
        self.log_file.close()
        m = re.findall(r"daemon_stopped.*?peak_rss_kib=(\d+)", self.log_text())
        if m:
            self.rss_kib = int(m[-1])
        return self.proc.returncode


def metric_value(text, name):
    m = re.search(rf"(?m)^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.eE+-]+|NaN)$", text)
    return float(m.group(1)) if m else None


def histogram(text, name):
    """[(upper bound, cumulative count)], +Inf last, of a Prometheus histogram."""
    out = []
    for m in re.finditer(rf'(?m)^{re.escape(name)}_bucket{{le="([^"]+)"}} (\d+)$', text):
        le = float("inf") if m.group(1) == "+Inf" else float(m.group(1))
        out.append((le, int(m.group(2))))
    return out


def quantile(buckets, q):
    """histogram_quantile: linear interpolation within the bucket holding rank q."""
    if not buckets or buckets[-1][1] == 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0
    for le, c in buckets:
        if c >= rank:
            if le == float("inf"):
                return prev_le  # beyond the last finite bound
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return prev_le


def kafka_topic(env, name, partitions):
    env.run([os.path.join(REPO, "scripts", "kafka.sh"), "topic-create", name, str(partitions)],
            f"create topic {name}")


def positions_total(env, schema, topic):
    """Events committed from `topic` (applied, stale or dead), from denormd's positions."""
    return int(env.scalar(f'select coalesce(sum(applied + stale + dead), 0) from "{schema}".positions '
                          f"where source like 'kafka:%:' || '{topic}'"))


def run_contender(env, results, config_schema, changes, n_changes, run_id):
    """denormd run from a pre-filled 4-partition topic, on a copy of replay's loaded store."""
    args = env.args
    schema = SCHEMAS["run"]
    topic = f"bench.changes.{run_id}"
    r = results["contenders"].setdefault("run", {})
    kafka_topic(env, topic, 4)
    config = write_config(env, schema, topic=topic, group=f"denormd-bench-{run_id}")
    log(f"denormd run: pre-filling topic {topic} with {fmt_count(n_changes)} events (denormd publish)")
    seconds, _, _ = timed_process(env, [env.denormd, "publish", "-q", "-c", config, changes],
                                  "denormd publish")
    r["publish_seconds"] = seconds
    log(f"denormd run: published in {seconds:.1f} s ({n_changes / seconds:,.0f} events/s)")
    before = row_writes(env, schema)
    checkpoint(env)
    log("denormd run: consuming the topic")
    d = Daemon(env, config, args.metrics_port, os.path.join(env.work, f"run-{run_id}.log"))
    try:
        assigned = d.wait_for(r"partitions_assigned", 60)
        done = d.wait_for_count(lambda: positions_total(env, schema, topic), n_changes,
                                "denormd run", "events", args.stall_seconds)
        text = d.metrics()
        with open(os.path.join(env.work, f"run-{run_id}.metrics"), "w") as fh:
            fh.write(text)
    finally:
        code = d.stop()
    if code != 0:
        raise BenchError(f"denormd run: exit {code} after SIGTERM:\n" + d.log_text()[-3000:])
    r["changes"] = {"events": n_changes, "seconds": done - assigned, "rate": n_changes / (done - assigned),
                    "startup_seconds": assigned - d.started,
                    "denormd_documents_written": int(metric_value(text, "denormd_documents_written_total") or 0),
                    "requests": metrics_requests(text, n_changes), "rss_kib": d.rss_kib}
    r["changes"]["documents"] = row_writes(env, schema) - before
    r["rss_kib"] = d.rss_kib
    c = r["changes"]
    log(f"denormd run: changes: {c['seconds']:.1f} s from partition assignment "
        f"(+{c['startup_seconds']:.1f} s start-up), {c['rate']:,.0f} events/s, "
        f"peak RSS {(d.rss_kib or 0) // 1024} MiB")


def feed_contender(env, results, changes, n_changes, sizes, run_id):
    """denormd run with the change feed on: the run contender's input (its pre-filled topic,
    another group) on another copy of the loaded store, every collection published to a
    4-partition topic. Measured: CHANGES events/s until the last event is committed (publishing
    on, to compare with the run contender's, publishing off), until the last change is on the
    topic, and the delay from the PostgreSQL commit to the topic (denormd_feed_delay_seconds:
    capture in the outbox, inside the batch just before its commit, to the Kafka commit), under
    that full load and then, in a second daemon, at the freshness rate on new events."""
    args = env.args
    schema = SCHEMAS["feed"]
    topic = f"bench.changes.{run_id}"  # filled by run_contender
    feed_topic = f"bench.feed.{run_id}"
    kafka_topic(env, feed_topic, 4)
    config = write_config(env, schema, topic=topic, group=f"denormd-feed-{run_id}")
    with open(config, "a") as fh:
        fh.write(f"feed:\n  topic: {feed_topic}\n  transactional_id: denormd-bench-feed-{run_id}\n")
    r = results["contenders"].setdefault("feed", {})
    outbox = lambda: int(env.scalar(f'select count(*) from "{schema}".outbox'))  # noqa: E731
    before = row_writes(env, schema)
    checkpoint(env)
    log("denormd run + change feed: consuming the same topic, publishing every document change")
    d = Daemon(env, config, args.metrics_port, os.path.join(env.work, f"feed-{run_id}.log"))
    try:
        assigned = d.wait_for(r"partitions_assigned", 60)
        applied = published = None
        last, last_change = (0, 0), time.time()
        while published is None:
            n, waiting = positions_total(env, schema, topic), outbox()
            now = time.time()
            if applied is None and n >= n_changes:
                applied = now
            if applied is not None and waiting == 0:
                published = now
                break
            if (n, waiting) != last:
                last, last_change = (n, waiting), now
            elif now - last_change > args.stall_seconds:
                raise BenchError(f"denormd run + feed: no progress for {args.stall_seconds} s at "
                                 f"{n}/{n_changes} events, {waiting} changes waiting:\n"
                                 + d.log_text()[-3000:])
            if not d.alive():
                raise BenchError(f"denormd run + feed exited ({d.proc.returncode}):\n"
                                 + d.log_text()[-3000:])
            time.sleep(0.1)
        text = d.metrics()
        with open(os.path.join(env.work, f"feed-{run_id}.metrics"), "w") as fh:
            fh.write(text)
    finally:
        code = d.stop()
    if code != 0:
        raise BenchError(f"denormd run + feed: exit {code} after SIGTERM:\n" + d.log_text()[-3000:])
    r["rss_kib"] = d.rss_kib
    r["changes"] = {
        "events": n_changes, "seconds": applied - assigned, "rate": n_changes / (applied - assigned),
        "published_seconds": published - assigned,
        "published_rate": n_changes / (published - assigned),
        "startup_seconds": assigned - d.started,
        "messages": int(metric_value(text, "denormd_feed_published_total") or 0),
        "transactions": int(metric_value(text, "denormd_feed_transactions_total") or 0),
        "documents": row_writes(env, schema) - before, "rss_kib": d.rss_kib}
    b = histogram(text, "denormd_feed_delay_seconds")
    r["load_delay"] = {"count": b[-1][1] if b else 0, "p50": quantile(b, 0.5), "p99": quantile(b, 0.99)}
    c = r["changes"]
    log(f"denormd run + feed: changes: {c['seconds']:.1f} s, {c['rate']:,.0f} events/s applied; "
        f"all on the topic after {c['published_seconds']:.1f} s ({c['published_rate']:,.0f} events/s), "
        f"{c['messages']:,} document changes in {c['transactions']:,} Kafka transactions")
    check(env, "feed", results, schema, SCHEMAS["replay"], "denormd run + feed after load + all changes")

    rate = default_freshness_rate(env, results)
    if not rate:
        log("denormd run + feed: no denormd run rate and no --freshness-rate: delay not measured")
        return
    want = max(1, int(rate * args.freshness_seconds))
    lines = change_lines(env, sizes, changes, n_changes, n_changes, want, "feed delay")
    checkpoint(env)
    d = Daemon(env, config, args.metrics_port, os.path.join(env.work, f"feed-delay-{run_id}.log"))
    try:
        d.wait_for(r"partitions_assigned", 60)
        d.wait_for(r"feed_relay_started", 60)
        time.sleep(1.0)
        log(f"denormd run + feed: delay to the topic: producing at {rate:,.0f} events/s for "
            f"{args.freshness_seconds:g} s (the freshness rate)")
        producer = kafka_produce.Producer(env.brokers, topic, 4)
        sent, elapsed, _ = kafka_produce.produce_at_rate(
            producer, lines, rate, args.freshness_seconds, stop=lambda: not d.alive())
        producer.close()
        deadline = time.time() + 120
        while positions_total(env, schema, topic) < n_changes + sent or outbox() > 0:
            if time.time() > deadline or not d.alive():
                raise BenchError("denormd run + feed: the delay phase did not catch up:\n"
                                 + d.log_text()[-3000:])
            time.sleep(0.1)
        text = d.metrics()
        with open(os.path.join(env.work, f"feed-delay-{run_id}.metrics"), "w") as fh:
            fh.write(text)
    finally:
        d.stop()
    b = histogram(text, "denormd_feed_delay_seconds")
    r["delay"] = {"rate": rate, "sent": sent, "elapsed": elapsed, "count": b[-1][1] if b else 0,
                  "p50": quantile(b, 0.5), "p99": quantile(b, 0.99),
                  "transactions": int(metric_value(text, "denormd_feed_transactions_total") or 0)}
    fd = r["delay"]
    if fd["p99"] is not None:
        log(f"denormd run + feed: {sent} events at {sent / elapsed:,.0f}/s: {fd['count']:,} changes "
            f"published in {fd['transactions']:,} Kafka transactions, delay p50 "
            f"{fd['p50'] * 1000:.1f} ms, p99 {fd['p99'] * 1000:.1f} ms")


def write_apply_file(path, lines, per_statement):
    """A psql script: `select apply_event(...)` per event, or apply_events per chunk."""
    with open(path, "w") as out:
        if per_statement == 1:
            for line in lines:
                out.write("select apply_event('" + line.replace("'", "''") + "'::jsonb);\n")
        else:
            for i in range(0, len(lines), per_statement):
                chunk = "[" + ",".join(lines[i:i + per_statement]) + "]"
                out.write("select apply_events('" + chunk.replace("'", "''") + "'::jsonb);\n")
    return path


def read_lines(path, start=0, end=None):
    out = []
    with open(path) as f:
        for i, line in enumerate(f):
            if end is not None and i >= end:
                break
            if i >= start and line.strip():
                out.append(line.rstrip("\n"))
    return out


def change_lines(env, sizes, changes, n_changes, start, count, label):
    """Lines [start, start + count) of the change stream, as bytes: changes.jsonl, continued
    past its end by the generator when needed (the generator is sequential: a longer stream of
    the same seed starts with changes.jsonl, checked on its last line)."""
    end = start + count
    if end <= n_changes:
        return [line.encode() for line in read_lines(changes, start, end)]
    extra = -(-(end - n_changes) // 10_000) * 10_000
    longer = os.path.join(workload(env, sizes, n_changes + extra, env.args.seed, label),
                          "changes.jsonl")
    if read_lines(longer, n_changes - 1, n_changes) != read_lines(changes, n_changes - 1, n_changes):
        raise BenchError("the continued change stream does not extend changes.jsonl (generator?)")
    return [line.encode() for line in read_lines(longer, start, end)]


def run_apply(env, schema, script, what):
    """Runs an apply script in autocommit (one transaction per statement)."""
    out_path = script + ".out"
    cmd = ["psql", "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", "-d", env.pg_url,
           "-c", f'set search_path = "{schema}"', "-f", script, "-o", out_path]
    seconds, _, _ = timed_process(env, cmd, what)
    text = open(out_path).read()
    counts = {"applied": 0, "stale": 0, "invalid": 0}
    for line in text.split("\n"):
        line = line.strip()
        if line in counts:
            counts[line] += 1
        elif line.startswith("{"):
            for k, v in json.loads(line).items():
                counts[k] = counts.get(k, 0) + v
    return seconds, counts


def apply_bounded(env, schema, lines, per_statement, budget, tag):
    """Applies lines through the triggers, per_statement events per transaction, in
    chunks of statements (one psql each, sized to last about 3 s) until all are done or
    `budget` seconds have passed; a transaction is never cut. Returns (events applied,
    seconds, status counts)."""
    done, seconds, chunk_no = 0, 0.0, 0
    counts = {"applied": 0, "stale": 0, "invalid": 0}
    statements = 5 if per_statement == 1 else 1
    while done < len(lines) and seconds < budget:
        take = lines[done:done + statements * per_statement]
        chunk_no += 1
        script = write_apply_file(os.path.join(env.work, f"{tag}-{chunk_no}.sql"), take,
                                  per_statement)
        t, c = run_apply(env, schema, script, tag)
        os.remove(script)
        seconds += t
        done += len(take)
        for k, v in c.items():
            counts[k] = counts.get(k, 0) + v
        per_second = (len(take) / per_statement) / t if t > 0 else statements
        statements = max(1, min(int(per_second * 3), 100_000))
    return done, seconds, counts


def trigger_load(env, schema, load, mode):
    if mode == "events":
        script = write_apply_file(os.path.join(env.work, "triggers-load.sql"),
                                  read_lines(load), 1000)
        seconds, counts = run_apply(env, schema, script, "triggers load (apply_events)")
        return seconds
    # backfill: the final source rows in bulk with the triggers off, then each
    # projection recomputed set-based over everything (how a team seeds its tables).
    sql = os.path.join(env.work, "triggers-backfill.sql")
    inserts = []
    for t in ("author", "book", "post", "comment"):
        inserts.append(f"""insert into {t} (id, version, deleted, data)
select distinct on (e->>'id') e->>'id', (e->>'version')::numeric, e->>'op' = 'delete',
       case when e->>'op' = 'delete' then null else e->'data' end
from ev where e->>'type' = '{t}' order by e->>'id', (e->>'version')::numeric desc;""")
    with open(sql, "w") as f:
        f.write(f"""begin;
set local search_path = "{schema}";
create temp table staging (line text) on commit drop;
\\copy staging from '{load}' {COPY_OPTS}
create temp table ev on commit drop as select line::jsonb as e from staging;
set local session_replication_role = replica;
{chr(10).join(inserts)}
set local session_replication_role = origin;
select refresh_authors(array(select id from author where not deleted));
select refresh_books(array(select id from book where not deleted));
select refresh_posts(array(select id from post where not deleted));
select refresh_post_comments(array(select distinct (data->>'postId') collate "C" from comment
  where not deleted and jsonb_typeof(data->'postId') = 'string'));
commit;
""")
    seconds, _, _ = timed_process(env, ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d",
                                        env.pg_url, "-o", "/dev/null", "-f", sql],
                                  "triggers load (backfill)")
    return seconds


def ref_advance(env, state, changes, upto):
    """Advances the reference store (denormd, untimed) to line `upto` of the change stream."""
    if upto <= state["at"]:
        return
    path = slice_lines(changes, os.path.join(env.work, f"changes-{state['at']}-{upto}.jsonl"),
                       state["at"], upto)
    log(f"reference: denormd replay of changes [{state['at']}, {upto}) into {SCHEMAS['ref']} (untimed)")
    denormd_replay(env, SCHEMAS["ref"], state["config"], path, "reference replay")
    state["at"] = upto


def trigger_contenders(env, results, load, changes, n_load, n_changes, ref):
    args = env.args
    schema = SCHEMAS["triggers"]
    triggers_sql = os.path.join(BENCH, "triggers.sql")
    if not os.path.exists(triggers_sql):
        log("triggers: bench/triggers.sql does not exist: the trigger contenders are skipped")
        results["notes"].append("bench/triggers.sql missing: no trigger contenders")
        return
    drop_schema(env, schema)
    env.psql(file=triggers_sql, variables={"schema": schema}, what="bench/triggers.sql")
    mark_schema(env, schema)
    ev = results["contenders"].setdefault("triggers_event", {})
    ba = results["contenders"].setdefault("triggers_batched", {})

    checkpoint(env)
    log(f"triggers: load ({fmt_count(n_load)} events, mode {args.trigger_load})")
    seconds = trigger_load(env, schema, load, args.trigger_load)
    load_r = {"events": n_load, "seconds": seconds, "rate": n_load / seconds, "mode": args.trigger_load}
    ev["load"] = ba["load"] = load_r
    log(f"triggers: load: {seconds:.1f} s, {n_load / seconds:,.0f} events/s")
    vacuum_analyze(env, schema)
    total = check(env, "triggers_load", results, schema, SCHEMAS["ref"], "triggers after load")
    if total:
        ev["wrong"] = ba["wrong"] = total

    budget = args.trigger_seconds
    n1 = 0
    if args.trigger_sample > 0:
        lines = read_lines(changes, 0, min(args.trigger_sample, n_changes))
        before = row_writes(env, schema)
        checkpoint(env)
        log(f"triggers/event: up to {fmt_count(len(lines))} change events (or {budget:g} s), "
            "one transaction each")
        n1, seconds, counts = apply_bounded(env, schema, lines, 1, budget, "triggers-event")
        ev["changes"] = {"events": n1, "seconds": seconds, "rate": n1 / seconds, "sample": True,
                         "range": [0, n1], "counts": counts,
                         "documents": row_writes(env, schema) - before}
        log(f"triggers/event: {fmt_count(n1)} events in {seconds:.1f} s, "
            f"{n1 / seconds:,.1f} events/s ({counts})")
        ref_advance(env, ref, changes, n1)
        check(env, "triggers_event", results, schema, SCHEMAS["ref"],
              f"triggers/event after load + {fmt_count(n1)} changes")

    end = n_changes if args.trigger_batched_sample <= 0 else min(n_changes, n1 + args.trigger_batched_sample)
    if end <= n1:
        return
    per_event = ev.get("changes", {}).get("rate")
    if per_event and 1000 / per_event > 3 * budget:
        note = (f"triggers/1000 not measured: one 1,000-event transaction would take about "
                f"{1000 / per_event:,.0f} s at the per-event rate, over 3x --trigger-seconds "
                f"({budget:g} s)")
        log(note)
        results["notes"].append(note)
        ba["skipped"] = note
        return
    lines = read_lines(changes, n1, end)
    before = row_writes(env, schema)
    checkpoint(env)
    log(f"triggers/1000: change events from {fmt_count(n1)}, up to {fmt_count(len(lines))} "
        f"(or {budget:g} s), transactions of 1,000")
    n, seconds, counts = apply_bounded(env, schema, lines, 1000, budget, "triggers-batched")
    n2 = n1 + n
    ba["changes"] = {"events": n, "seconds": seconds, "rate": n / seconds,
                     "sample": n2 < n_changes or n1 > 0, "range": [n1, n2],
                     "counts": counts, "documents": row_writes(env, schema) - before}
    log(f"triggers/1000: {fmt_count(n)} events in {seconds:.1f} s, {n / seconds:,.1f} events/s "
        f"({counts})")
    if n2 == n_changes:
        check(env, "triggers_batched", results, schema, SCHEMAS["replay"],
              "triggers/1000 after load + all changes")
    else:
        ref_advance(env, ref, changes, n2)
        check(env, "triggers_batched", results, schema, SCHEMAS["ref"],
              f"triggers/1000 after load + {fmt_count(n2)} changes")


DEFAULT_FRESHNESS_FRACTION = 0.2  # "the default rate": the target's, the peer's, the feed's


def run_rate(results):
    """denormd run's measured CHANGES events/s, or None (not measured, or wrong)."""
    run = results["contenders"].get("run", {})
    return run["changes"]["rate"] if run.get("changes") and not run.get("wrong") else None


def default_freshness_rate(env, results):
    """The one freshness rate of the feed's delay and the Kafka Streams peer's freshness:
    --freshness-rate, or 20% of denormd run's CHANGES rate."""
    if env.args.freshness_rate:
        return env.args.freshness_rate
    base = run_rate(results)
    return max(1.0, DEFAULT_FRESHNESS_FRACTION * base) if base else None


def freshness_rates(env, results):
    """[(rate, fraction of denormd run's rate or None, how)]: --freshness-rate alone, or each
    of --freshness-fractions of denormd run's measured CHANGES rate."""
    args = env.args
    if args.freshness_rate:
        return [(args.freshness_rate, None, "--freshness-rate")]
    base = run_rate(results)
    return [(max(1.0, fr * base), fr, f"{fr:.0%} of denormd run's CHANGES rate")
            for fr in args.freshness_fractions] if base else []


def default_freshness(results):
    """The freshness run at the default rate (the targets compare it), or None."""
    for f in results.get("freshness", []):
        if f.get("p99") is not None and f["fraction"] in (None, DEFAULT_FRESHNESS_FRACTION):
            return f
    return None


def freshness(env, results, changes, n_changes, sizes, ref, run_id):
    """denormd run on the reference store at each freshness rate, lowest first; the change
    stream goes on from where the reference store is (continued past changes.jsonl).

    The reference store first applies the whole change stream (untimed), as every CHANGES
    contender has: freshness is measured in the steady state. Right after a load, the first
    insert into the middle of each group re-spaces its bucket seqs once (the packed seqs
    that appends give, docs/architecture.md), up to half of the group's buckets in one
    batch: a one-time cost of the load, which the CHANGES runs include."""
    rates = sorted(freshness_rates(env, results), key=lambda r: r[0])
    if not rates:
        log("freshness: no measured denormd run rate and no --freshness-rate: skipped")
        return
    ref_advance(env, ref, changes, n_changes)
    wants = [max(1, int(rate * env.args.freshness_seconds)) for rate, _, _ in rates]
    lines = change_lines(env, sizes, changes, n_changes, ref["at"], sum(wants), "freshness")
    results["freshness"] = []
    for i, (rate, fraction, how) in enumerate(rates):
        f = freshness_at(env, lines[:wants[i]], rate, how, ref, f"{run_id}-{i + 1}")
        f["fraction"], f["first_line"] = fraction, ref["at"]
        results["freshness"].append(f)
        lines = lines[f["sent"]:]
        ref["at"] += f["sent"]  # the reference store has applied them
        if f["count"] != f["sent"]:
            results["notes"].append(f"freshness at {rate:,.0f} events/s: the histogram holds "
                                    f"{f['count']} events for {f['sent']} produced")


def freshness_at(env, lines, rate, how, ref, tag):
    """One freshness run: a new denormd run on the reference store and a new topic (so it
    starts caught up), `lines` produced at `rate` for --freshness-seconds; the run's figures."""
    args = env.args
    schema = SCHEMAS["ref"]
    topic = f"bench.fresh.{tag}"
    kafka_topic(env, topic, 4)
    config = write_config(env, schema, topic=topic, group=f"denormd-fresh-{tag}")
    checkpoint(env)
    d = Daemon(env, config, args.metrics_port, os.path.join(env.work, f"fresh-{tag}.log"))
    f = {"rate": rate, "how": how, "seconds": args.freshness_seconds}
    try:
        d.wait_for(r"partitions_assigned", 60)
        time.sleep(1.0)
        log(f"freshness: producing at {rate:,.0f} events/s ({how}) for {args.freshness_seconds:g} s")
        producer = kafka_produce.Producer(env.brokers, topic, 4)
        sent, elapsed, lag = kafka_produce.produce_at_rate(
            producer, lines, rate, args.freshness_seconds, stop=lambda: not d.alive())
        producer.close()
        f.update({"sent": sent, "elapsed": elapsed, "producer_max_lag": lag})
        deadline = time.time() + 120
        while positions_total(env, schema, topic) < sent:
            if time.time() > deadline or not d.alive():
                raise BenchError("freshness: the daemon did not catch up:\n" + d.log_text()[-3000:])
            time.sleep(0.1)
        text = d.metrics()
        with open(os.path.join(env.work, f"fresh-{tag}.metrics"), "w") as fh:
            fh.write(text)
    finally:
        d.stop()
    b = histogram(text, "denormd_event_age_seconds")
    f["count"] = b[-1][1] if b else 0
    if not f["count"]:
        raise BenchError("freshness: denormd_event_age_seconds is empty (a daemon without the "
                         "freshness metrics?)")
    f["p50"], f["p99"] = quantile(b, 0.50), quantile(b, 0.99)
    f["max"] = metric_value(text, "denormd_event_age_max_seconds")
    if f["max"] is not None:  # interpolation within a bucket may overshoot the true maximum
        f["p50"], f["p99"] = (min(q, f["max"]) if q is not None else None for q in (f["p50"], f["p99"]))
    f["rss_kib"] = d.rss_kib
    batches = metric_value(text, "denormd_batch_duration_seconds_count") or 0
    f["batches"] = int(batches)
    f["batch_seconds_mean"] = (metric_value(text, "denormd_batch_duration_seconds_sum") or 0) / batches \
        if batches else None
    f["documents_per_event"] = (metric_value(text, "denormd_documents_written_total") or 0) / sent \
        if sent else None
    f["requests"] = metrics_requests(text, sent)
    log(f"freshness: {sent} events at {sent / elapsed:,.0f}/s: p50 {f['p50'] * 1000:.1f} ms, "
        f"p99 {f['p99'] * 1000:.1f} ms, max {f['max'] * 1000:.1f} ms")
    return f


# ----------------------------------------------------------------------------
# The Kafka Streams peer (bench/peers/kstreams)
# ----------------------------------------------------------------------------

def kstreams_build(env, args):
    """mvn package of the peer: offline once its dependencies are in the local Maven
    repository, online the first time."""
    jar = os.path.join(KSTREAMS_DIR, "target", "denormd-kstreams.jar")
    if args.no_build and os.path.exists(jar):
        return
    pom = os.path.join(KSTREAMS_DIR, "pom.xml")
    log("building the Kafka Streams peer (mvn -o -q package)")
    p = env.run(["mvn", "-B", "-o", "-q", "-f", pom, "package"], "mvn -o package", check=False)
    if p.returncode != 0:
        log("not all of the peer's dependencies are in the local Maven repository: "
            "mvn -q package (online, once)")
        env.run(["mvn", "-B", "-q", "-f", pom, "package"], "mvn package (Kafka Streams peer)")


def kstreams_java(env, main, *args, heap=("-Xmx256m",)):
    cp = os.path.join(KSTREAMS_DIR, "target", "denormd-kstreams.jar") + os.pathsep + \
        os.path.join(KSTREAMS_DIR, "target", "lib", "*")
    return ["java", *heap, "-cp", cp, f"denormd.kstreams.{main}", *args]


def kstreams_tool(env, *args):
    return env.run(kstreams_java(env, "Tools", *args, heap=("-Xmx256m", "-XX:+UseSerialGC",
                                                            "-XX:TieredStopAtLevel=1")),
                   f"kstreams Tools {args[0]}").stdout


def dir_bytes(path):
    """(allocated on disk, apparent) bytes of the files under path."""
    disk = apparent = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            disk += st.st_blocks * 512
            apparent += st.st_size
    return disk, apparent


class KStreamsApp:
    """The peer application in the background: paused and resumed through its standard
    input, its RSS and CPU time from the kernel."""

    def __init__(self, env, ks, tag):
        args = env.args
        self.env, self.ks = env, ks
        self.out_path = os.path.join(env.work, f"kstreams-{tag}.out")
        self.err_path = os.path.join(env.work, f"kstreams-{tag}.err")
        self.out, self.err = open(self.out_path, "w"), open(self.err_path, "w")
        cmd = kstreams_java(env, "App", "--bootstrap", env.brokers, "--input", ks["topic"],
                            "--output-prefix", ks["prefix"], "--application-id", ks["app_id"],
                            "--state-dir", ks["state_dir"], "--threads", str(args.kstreams_threads),
                            "--commit-interval-ms", str(args.kstreams_commit_ms),
                            "--cache-mib", str(args.kstreams_cache_mib),
                            "--rocksdb-mib", str(args.kstreams_rocksdb_mib),
                            heap=shlex.split(args.kstreams_heap))
        ks["command"] = shlex.join(cmd)
        self.started = time.time()
        self.proc = subprocess.Popen(cmd, env=env.env, stdin=subprocess.PIPE, stdout=self.out,
                                     stderr=self.err, cwd=REPO, text=True)
        self.rss_kib = None
        self.cpu_seconds = None

    def tail(self):
        return (open(self.out_path).read()[-1500:] + open(self.err_path).read()[-3000:])

    def wait_line(self, pattern, timeout, after=0):
        """Epoch seconds (its at_ms=) of the (after+1)-th output line matching pattern."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            found = re.findall(pattern + r" at_ms=(\d+)", open(self.out_path).read())
            if len(found) > after:
                return int(found[after]) / 1000
            if self.proc.poll() is not None:
                raise BenchError(f"Kafka Streams peer exited ({self.proc.returncode}):\n" + self.tail())
            time.sleep(0.05)
        raise BenchError(f"Kafka Streams peer: no {pattern} after {timeout} s:\n" + self.tail())

    def wait_running(self, timeout=180):
        """Epoch seconds of the first RUNNING state."""
        return self.wait_line("kstreams_state RUNNING", timeout)

    def command(self, what):
        """pause / resume; returns when the application has done it (epoch seconds)."""
        n = len(re.findall(f"kstreams_{what}d at_ms=", open(self.out_path).read()))
        self.proc.stdin.write(what + "\n")
        self.proc.stdin.flush()
        return self.wait_line(f"kstreams_{what}d", 60, after=n)

    def cpu(self):
        """CPU seconds used so far (user + system), from /proc."""
        try:
            fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                _, status, rusage = os.wait4(self.proc.pid, 0)
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                self.rss_kib = rusage.ru_maxrss
                self.cpu_seconds = rusage.ru_utime + rusage.ru_stime
            except ChildProcessError:
                self.proc.wait()
        for f in (self.proc.stdin, self.out, self.err):
            try:
                f.close()
            except OSError:
                pass
        # 143: the JVM's exit status after SIGTERM; the line says the close completed.
        if self.proc.returncode not in (0, 143) or \
                "kstreams_stopped exit=0" not in open(self.out_path).read():
            raise BenchError(f"Kafka Streams peer did not stop cleanly (exit {self.proc.returncode}):\n"
                             + self.tail())
        return self.rss_kib


def kstreams_wait_caught_up(env, app):
    """Runs Tools lag until the application's committed offsets reach the end offsets of its
    input and of every internal topic it consumes; returns that moment (epoch seconds)."""
    args = env.args
    cmd = kstreams_java(env, "Tools", "lag", "--bootstrap", env.brokers, "--group", app.ks["app_id"],
                        "--input", app.ks["topic"], "--poll-ms", "50",
                        "--stall-ms", str(int(args.stall_seconds * 1000)),
                        heap=("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"))
    lag = subprocess.Popen(cmd, env=env.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, cwd=REPO)
    try:
        while lag.poll() is None:
            if app.proc.poll() is not None:
                raise BenchError(f"Kafka Streams peer exited ({app.proc.returncode}):\n" + app.tail())
            time.sleep(0.1)
        out, err = lag.communicate()
    finally:
        if lag.poll() is None:
            lag.kill()
            lag.wait()
    m = re.search(r"caught_up at_ms=(\d+)", out)
    if lag.returncode != 0 or not m:
        raise BenchError(f"Kafka Streams peer: {out.strip()} {err[-2000:]}\n" + app.tail())
    return int(m.group(1)) / 1000


def kstreams_fill(env, ks, phase, path, n):
    log(f"Kafka Streams: {phase}: filling {ks['topic']} with {fmt_count(n)} events (untimed)")
    out = kstreams_tool(env, "fill", "--bootstrap", env.brokers, "--topic", ks["topic"], path)
    log(f"Kafka Streams: {phase}: {out.strip()}")


def kstreams_phase_result(app, phase, n, start, done, cpu0):
    cpu = app.cpu()
    r = {"events": n, "seconds": done - start, "rate": n / (done - start),
         "cpu_seconds": cpu - cpu0 if cpu is not None and cpu0 is not None else None}
    log(f"Kafka Streams: {phase}: {r['seconds']:.1f} s, {r['rate']:,.0f} events/s, "
        f"{r['cpu_seconds'] or 0:.1f} s CPU")
    return r


def kstreams_check(env, results, ks, reference, label):
    """Reads every output key's final value back (Tools dump) into a schema, and compares it
    with denormd's documents like every contender's."""
    d = os.path.join(env.work, f"kstreams-dump-{ks['app_id']}")
    shutil.rmtree(d, ignore_errors=True)
    log("Kafka Streams: reading the output topics back (read_committed, last value per key)")
    kstreams_tool(env, "dump", "--bootstrap", env.brokers, "--output-prefix", ks["prefix"], "--dir", d)
    schema = SCHEMAS["kstreams"]
    drop_schema(env, schema)
    env.psql(f'create schema "{schema}"')
    mark_schema(env, schema)
    stmts = []
    for c in COLLECTIONS:
        stmts.append(f'create table "{schema}"."{c}" (id text collate "C" primary key, doc jsonb not null);')
        stmts.append(f"\\copy \"{schema}\".\"{c}\" from '{os.path.join(d, c + '.tsv')}' {COPY_OPTS}")
    sql = os.path.join(env.work, "kstreams-load-dump.sql")
    with open(sql, "w") as f:
        f.write("\n".join(stmts) + "\n")
    env.psql(file=sql, what="load the Kafka Streams documents")
    total = check(env, "kstreams", results, schema, reference, label)
    drop_schema(env, schema)
    shutil.rmtree(d, ignore_errors=True)
    return total


def kstreams_contender(env, results, load, changes, n_load, n_changes, sizes, run_id):
    """The Kafka Streams peer, one JVM through three phases on one 4-partition topic:
    LOAD (topic pre-filled, timed from RUNNING), CHANGES (filled while paused, timed from
    resume), each until every input and internal offset is committed; its documents read
    back and checked; then freshness at denormd's freshness rate on new events."""
    args = env.args
    ks = {"topic": f"bench.kstreams.{run_id}", "prefix": f"bench.kstreams.{run_id}.out",
          "app_id": f"denormd-bench-kstreams-{run_id}",
          "state_dir": os.path.join(env.work, f"kstreams-state-{run_id}")}
    r = results["contenders"].setdefault("kstreams", {})
    r["settings"] = {"threads": args.kstreams_threads, "commit_interval_ms": args.kstreams_commit_ms,
                     "cache_mib": args.kstreams_cache_mib, "rocksdb_mib": args.kstreams_rocksdb_mib,
                     "heap": args.kstreams_heap}
    shutil.rmtree(ks["state_dir"], ignore_errors=True)
    kstreams_tool(env, "setup", "--bootstrap", env.brokers, "--input", ks["topic"], "--partitions", "4",
                  "--output-prefix", ks["prefix"])
    kstreams_fill(env, ks, "load", load, n_load)
    checkpoint(env)
    app = KStreamsApp(env, ks, run_id)
    try:
        running = app.wait_running()
        r["startup_seconds"] = running - app.started
        log(f"Kafka Streams: load: RUNNING {r['startup_seconds']:.1f} s after start; consuming")
        cpu0 = app.cpu()
        r["load"] = kstreams_phase_result(app, "load", n_load, running,
                                          kstreams_wait_caught_up(env, app), cpu0)
        app.command("pause")
        kstreams_fill(env, ks, "changes", changes, n_changes)
        checkpoint(env)
        cpu0 = app.cpu()
        resumed = app.command("resume")
        r["changes"] = kstreams_phase_result(app, "changes", n_changes, resumed,
                                             kstreams_wait_caught_up(env, app), cpu0)
        app.command("pause")
        kstreams_check(env, results, ks, SCHEMAS["replay"], "Kafka Streams after load + all changes")
        if not r.get("wrong"):
            kstreams_freshness(env, results, app, sizes, changes, n_changes)
    finally:
        rss = app.stop()
    r["rss_kib"] = rss
    r["cpu_seconds"] = app.cpu_seconds
    r["state_disk_bytes"], r["state_apparent_bytes"] = dir_bytes(ks["state_dir"])
    r["command"] = ks.get("command")
    log(f"Kafka Streams: peak RSS {(rss or 0) // 1024} MiB, state stores "
        f"{r['state_disk_bytes'] / 2**20:,.0f} MiB on disk")
    if not args.keep_services:
        shutil.rmtree(ks["state_dir"], ignore_errors=True)
        # Its ~30 topics (input, outputs, repartition, subscription, changelogs: 4 partitions
        # each) would otherwise pile up run after run and slow the broker's start-up.
        out = kstreams_tool(env, "cleanup", "--bootstrap", env.brokers, "--group", ks["app_id"],
                            "--prefix", ks["topic"])
        log(f"Kafka Streams: {out.strip()} of this run")


def kstreams_freshness(env, results, app, sizes, changes, n_changes):
    """The peer at denormd's freshness rate for --freshness-seconds, on new events: the
    generator's stream continued past changes.jsonl (the peer has applied all of it)."""
    args = env.args
    ks, r = app.ks, results["contenders"]["kstreams"]
    rate = default_freshness_rate(env, results)
    if not rate:
        log("Kafka Streams freshness: no denormd run rate and no --freshness-rate: skipped")
        return
    want = max(1, int(rate * args.freshness_seconds))
    lines = change_lines(env, sizes, changes, n_changes, n_changes, want, "Kafka Streams freshness")
    fr = r["freshness"] = {"rate": rate, "seconds": args.freshness_seconds}
    fresh = subprocess.Popen(
        kstreams_java(env, "Tools", "fresh", "--bootstrap", env.brokers, "--output-prefix", ks["prefix"],
                      heap=("-Xmx256m", "-XX:+UseSerialGC")),
        env=env.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=REPO)
    try:
        if fresh.stdout.readline().strip() != "ready":
            raise BenchError("Kafka Streams freshness: the output reader did not start:\n"
                             + fresh.stderr.read()[-2000:])
        app.command("resume")
        time.sleep(1.0)
        log(f"Kafka Streams freshness: producing at {rate:,.0f} events/s (denormd's freshness rate) "
            f"for {args.freshness_seconds:g} s, murmur2-partitioned like the peer's topic")
        cpu0 = app.cpu()
        producer = kafka_produce.Producer(env.brokers, ks["topic"], 4, partitioner="murmur2")
        sent, elapsed, lag = kafka_produce.produce_at_rate(
            producer, lines, rate, args.freshness_seconds, stop=lambda: app.proc.poll() is not None)
        producer.close()
        produced = time.time()
        fr.update({"sent": sent, "elapsed": elapsed, "producer_max_lag": lag})
        fr["caught_up_after_seconds"] = kstreams_wait_caught_up(env, app) - produced
        cpu = app.cpu()
        fr["cpu_seconds"] = cpu - cpu0 if cpu is not None and cpu0 is not None else None
        time.sleep(0.5)  # the reader's last poll
        out, err = fresh.communicate(input="", timeout=60)
        fr.update(json.loads(out.strip().splitlines()[-1]))
        fresh = None
    finally:
        if fresh is not None:
            fresh.kill()
            fresh.wait()
    if fr.get("p99_ms") is not None:
        log(f"Kafka Streams freshness: {sent} events at {sent / elapsed:,.0f}/s: "
            f"{fr['count']:,} output records, p50 {fr['p50_ms']} ms, p99 {fr['p99_ms']} ms, "
            f"max {fr['max_ms']} ms; caught up {fr['caught_up_after_seconds']:.1f} s after the last")


SMALL_ID_PREFIX = "s."  # the scaling workload's ids: apart from the main workload's


def scaling(env, results, small_dir, n_large_changes):
    """The small store's CHANGES rate; then the same change stream on the large store
    (denormd replay's, after its CHANGES) with the small store's entities added to it: the
    same work on about 12x the data, so that the rates differ only by what the data's size
    costs."""
    schema = SCHEMAS["small"]
    config = create_denormd_schema(env, schema)
    load, changes = (os.path.join(small_dir, f) for f in ("load.jsonl", "changes.jsonl"))
    s = results["scaling"] = {}
    checkpoint(env)
    log(f"scaling: denormd replay of the small store's load ({fmt_count(count_lines(load))} events)")
    s["load"] = denormd_replay(env, schema, config, load, "scaling replay (load)")
    s["entities"] = int(env.scalar(f'select count(*) from "{schema}".entities'))
    vacuum_analyze(env, schema)
    checkpoint(env)
    log("scaling: changes on the small store")
    s["changes"] = denormd_replay(env, schema, config, changes, "scaling replay (changes)")
    s["changes"]["rate"] = s["changes"]["events"] / s["changes"]["seconds"]
    log(f"scaling: small store: {s['changes']['rate']:,.0f} events/s")
    drop_schema(env, schema)
    large = SCHEMAS["replay"]
    config = write_config(env, large)
    log("scaling: the small store's load added to denormd replay's store (untimed)")
    denormd_replay(env, large, config, load, "scaling replay (load into the large store)")
    vacuum_analyze(env, large)
    entities = int(env.scalar(f'select count(*) from "{large}".entities'))
    checkpoint(env)
    log("scaling: the small store's changes on the large store")
    same = s["same_stream"] = denormd_replay(env, large, config, changes,
                                             "scaling replay (changes on the large store)")
    same["rate"] = same["events"] / same["seconds"]
    same["entities"] = entities  # like s["entities"]: before the changes
    log(f"scaling: the same changes on {fmt_count(same['entities'])} entities: "
        f"{same['rate']:,.0f} events/s")


# ----------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------

def machine():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "memory": mem, "cpu": cpu, "kernel": platform.release()}


def report(env, results, args, sizes, n_load, n_changes):
    C = results["contenders"]
    lines = []

    def rate_of(key, phase):
        r = C.get(key, {})
        if r.get("wrong"):
            return None
        p = r.get(phase)
        return p["rate"] if p else None

    def cell_rate(key, phase):
        r = C.get(key, {})
        if r.get("wrong"):
            return f"WRONG: {r['wrong']} documents differ"
        p = r.get(phase)
        if not p:
            return "not measured (see notes)" if r.get("skipped") and phase == "changes" else "—"
        s = fmt_rate(p["rate"]) if p["rate"] >= 100 else f"{p['rate']:.1f}"
        if phase == "changes" and p.get("sample"):
            a, b = p.get("range", [0, p["events"]])
            s += f" (events {fmt_count(a)}–{fmt_count(b)})"
        if phase == "load" and p.get("mode") == "backfill":
            s += " (bulk + backfill)"
        return s

    def cell_docs(key):
        r = C.get(key, {})
        p = r.get("changes")
        if r.get("wrong") or not p or p.get("documents") is None:
            return "—"
        return f"{p['documents'] / p['events']:.2f}"

    def cell_rss(key):
        r = C.get(key, {})
        return f"{r['rss_kib'] / 1024:.0f} MiB" if r.get("rss_kib") else "—"

    headline_key = "run" if rate_of("run", "changes") else "replay"
    d = rate_of(headline_key, "changes")
    names = [("ceiling", "ceiling (source rows only, bulk)"),
             ("replay", "denormd replay"),
             ("run", "denormd run (Kafka, 4 partitions)"),
             ("feed", "denormd run + change feed (publishing every document change)"),
             ("triggers_event", "triggers, 1 event per transaction"),
             ("triggers_batched", "triggers, 1,000 events per transaction"),
             ("kstreams", "Kafka Streams 4.1 (exactly_once_v2, 4 partitions)")]

    def ratio(a, b):
        return f"{a / b:.2f}x" if a and b else "—"

    lines.append(f"Workload: {fmt_count(n_load)} load events ({sizes['authors']:,} authors, "
                 f"{sizes['books']:,} books, {sizes['posts']:,} posts, {sizes['comments']:,} "
                 f"comments), {fmt_count(n_changes)} change events, seed {args.seed}.")
    lines.append("")
    lines.append("| contender | load events/s | changes events/s | documents written per change event "
                 "| peak RSS | vs ceiling | vs triggers/event | vs triggers/1000 "
                 "| denormd / Kafka Streams |")
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    ks_changes = rate_of("kstreams", "changes")
    for key, label in names:
        if key not in C:
            continue
        mine = rate_of(key, "changes")
        is_denormd = key in ("replay", "run", "feed")
        vs_ks = "—"
        if is_denormd:
            vs_ks = ratio(mine, ks_changes)
            if key == "feed":
                vs_ks = "—"
            if key == "replay" and rate_of("kstreams", "load"):
                vs_ks += f" (load {ratio(rate_of('replay', 'load'), rate_of('kstreams', 'load'))})"
        lines.append(
            f"| {label} | {cell_rate(key, 'load')} | {cell_rate(key, 'changes')} | {cell_docs(key)} "
            f"| {cell_rss(key) if is_denormd or key == 'kstreams' else '—'} "
            f"| {ratio(mine, rate_of('ceiling', 'changes')) if key != 'ceiling' else '1.00x'} "
            f"| {ratio(mine, rate_of('triggers_event', 'changes')) if is_denormd else '—'} "
            f"| {ratio(mine, rate_of('triggers_batched', 'changes')) if is_denormd else '—'} "
            f"| {vs_ks} |")
    lines.append("")
    notes = []
    if "run" in C and C["run"].get("changes"):
        rc = C["run"]["changes"]
        notes.append(f"denormd run: events/s from partition assignment to the last event committed "
                     f"(start-up {rc['startup_seconds']:.1f} s excluded); its LOAD is denormd "
                     "replay's, copied (untimed) into its schema; topic pre-filled by `denormd "
                     f"publish` in {C['run']['publish_seconds']:.1f} s.")
    fc = C.get("feed", {}).get("changes")
    if fc:
        off = rate_of("run", "changes")
        notes.append(
            f"denormd run + change feed: the run contender's topic (another group) on another copy "
            f"of the loaded store, every collection published (feed.topic, 4 partitions); events/s "
            f"until the last event is committed, {ratio(fc['rate'], off)} of publishing off (the "
            f"denormd run row); everything on the topic {fc['published_seconds']:.1f} s after the "
            f"assignment ({fmt_rate(fc['published_rate'])} events/s through to the topic), "
            f"{fc['messages']:,} document changes in {fc['transactions']:,} Kafka transactions.")
    te = C.get("triggers_event", {}).get("changes")
    if te:
        notes.append(f"triggers/event: measured on the first {fmt_count(te['events'])} change events "
                     f"(--trigger-sample {args.trigger_sample:,}, --trigger-seconds "
                     f"{args.trigger_seconds:g}): too slow for the whole stream.")
    tb = C.get("triggers_batched", {}).get("changes")
    if tb and tb.get("sample"):
        a, b = tb["range"]
        notes.append(f"triggers/1000: measured on change events {fmt_count(a)}–{fmt_count(b)} "
                     "(after triggers/event's sample, on the same store; --trigger-seconds "
                     f"{args.trigger_seconds:g}).")
    tl = C.get("triggers_batched", {}).get("load")
    if tl and tl.get("mode") == "backfill":
        notes.append("triggers LOAD: source rows in bulk with the triggers off, then every document "
                     "recomputed set-based by the triggers' own refresh functions "
                     "(--trigger-load events applies it through the triggers instead).")
    ks = C.get("kstreams", {})
    if ks.get("changes"):
        st = ks["settings"]
        cpu = "; CPU " + ", ".join(f"{ks[ph]['cpu_seconds'] / ks[ph]['events'] * 1000:.2f} ms per "
                                   f"{ph.upper()} event" for ph in ("load", "changes")
                                   if ks[ph].get("cpu_seconds")) if ks["load"].get("cpu_seconds") else ""
        notes.append(
            "Kafka Streams: bench/peers/kstreams, one JVM through LOAD (its own 4-partition topic, "
            "pre-filled with the same events, murmur2-partitioned by the Java producer; timed from "
            f"RUNNING, start-up {ks['startup_seconds']:.1f} s excluded) and CHANGES (filled while "
            "the application is paused, timed from resume), each until the group's committed "
            "offsets reach the end of the input and of every internal topic; exactly_once_v2, "
            f"commit.interval.ms {st['commit_interval_ms']}, statestore.cache.max.bytes "
            f"{st['cache_mib']} MiB, RocksDB bounded to {st['rocksdb_mib']} MiB, "
            f"{st['threads']} stream thread(s), JVM {st['heap']}; peak RSS of the JVM over the "
            "three phases (freshness included); state stores "
            f"{ks['state_disk_bytes'] / 2**20:,.0f} MiB on disk at the end "
            f"({ks['state_apparent_bytes'] / 2**20:,.0f} MiB apparent){cpu}. Its documents (four "
            "compacted topics, read back) are checked like every contender's; post_comments is "
            "packed (content compared). Documents written: not comparable (Kafka records, not rows). "
            "What it does not do (stable buckets, one transaction per batch, dead letters, `via` "
            "through arrays): docs/benchmarks.md, \"The Kafka Streams peer\".")
    notes.append("documents written: n_tup_ins + n_tup_upd + n_tup_del of the four collection tables "
                 "(pg_stat_user_tables), the same count for every contender.")
    notes.append("ceiling: patches stored as upserts of the patch (storage cost only).")
    fl = results.get("floor")
    if fl and fl.get("rate"):
        notes.append(
            f"write floor: {fl['events']:,} change events in {fl['transactions']} transactions of "
            f"{fl['batch']:,} (denormd's batch.max_events), each writing the batch's source rows as "
            f"the ceiling does and only the {fl['documents'] / fl['transactions']:,.0f} documents "
            f"(average) the batch changed, in one upsert into bare tables; {fl['seconds']:.2f} s, "
            f"{fmt_rate(fl['rate'])} events/s, {ratio(fl['rate'], rate_of('ceiling', 'changes'))} "
            "of the ceiling. No reads, no reference index, no counters: no maintainer of these "
            "documents committing as often writes less.")
    for n in results["notes"]:
        notes.append(n)
    lines += [f"- {n}" for n in notes]
    lines.append("")
    lines += relational.report_lines(results)

    lines += requests_table(results)
    fresh = [x for x in results.get("freshness", []) if x.get("p99") is not None]
    f = default_freshness(results)
    lines += freshness_table(fresh, results.get("freshness_plot"))
    if not fresh:
        lines.append("Freshness: not measured" + (" (--skip-kafka)." if args.skip_kafka else "."))
    fe = C.get("feed", {})
    if fe.get("delay", {}).get("p99") is not None:
        fd, ld = fe["delay"], fe.get("load_delay", {})
        line = (f"Change feed delay (PostgreSQL commit → document on the topic: capture in the outbox, "
                f"just before the batch's commit, to the relay's Kafka commit; "
                f"denormd_feed_delay_seconds), {fd['sent']:,} new events at "
                f"{fd['sent'] / fd['elapsed']:,.0f} events/s (the freshness rate), "
                f"{fd['count']:,} document changes in {fd['transactions']:,} Kafka transactions: "
                f"p50 {fd['p50'] * 1000:.1f} ms, "
                f"p99 {fd['p99'] * 1000:.1f} ms")
        if ld.get("p99") is not None:
            line += (f"; during the full-speed CHANGES run (a backlog queueing behind the relay): "
                     f"p50 {ld['p50'] * 1000:,.0f} ms, p99 {ld['p99'] * 1000:,.0f} ms")
        lines.append(line + " (quantiles interpolated within histogram buckets).")
    kf = ks.get("freshness")
    if kf and kf.get("p99_ms") is not None and not ks.get("wrong"):
        lines.append(f"Kafka Streams freshness (produce → output record readable by a read_committed "
                     f"consumer), {kf['sent']:,} new events at {kf['sent'] / kf['elapsed']:,.0f} events/s "
                     f"(denormd's freshness rate): p50 {kf['p50_ms']:,} ms, p99 {kf['p99_ms']:,} ms, "
                     f"max {kf['max_ms']:,} ms over {kf['count']:,} output records (each measured from "
                     "its timestamp, the produce time of the newest event it reflects)."
                     + (f" That rate is above the peer's own CHANGES rate ({ks['changes']['rate']:,.0f} "
                        "events/s): it falls behind for the whole run."
                        if ks.get("changes") and kf["sent"] / kf["elapsed"] > ks["changes"]["rate"] else ""))
    s = results.get("scaling")
    large = rate_of("replay", "changes")
    if s and large:
        sc, lc = s["changes"], C["replay"]["changes"]
        lines.append(f"Scaling (denormd replay, {fmt_count(n_changes)} change events): store of "
                     f"{fmt_count(s['entities'])} entities: {sc['rate']:,.0f} events/s, "
                     f"{sc['documents'] / sc['events']:.2f} documents written per event; "
                     f"store of {fmt_count(C['replay']['entities'])} entities: {large:,.0f} events/s, "
                     f"{lc['documents'] / lc['events']:.2f} documents written per event "
                     f"(events/s ratio {large / sc['rate']:.2f}).")
        ss = s.get("same_stream")
        if ss:
            lines.append(f"The small store's change stream again on the large store with the small "
                         f"store's entities added ({fmt_count(ss['entities'])} entities, "
                         f"{ss['entities'] / s['entities']:.0f}x), the same work on more data: "
                         f"{ss['rate']:,.0f} events/s, {ss['documents'] / ss['events']:.2f} documents "
                         f"written per event (events/s ratio {ss['rate'] / sc['rate']:.2f}).")
    lines.append("")

    # Targets: reported, not asserted.
    def verdict(ok):
        return "n/a" if ok is None else ("MET" if ok else "NOT MET")
    targets = []
    ceil = rate_of("ceiling", "changes")
    hl = {"run": "denormd run", "replay": "denormd replay"}[headline_key]
    share, p99_target, size_name = size_targets(results)
    targets.append((f"{hl} throughput >= {share:.0%} of the source-only ceiling ({size_name})",
                    f"{d / ceil:.0%}" if d and ceil else "—",
                    verdict(d / ceil >= share if d and ceil else None)))
    tev = rate_of("triggers_event", "changes")
    targets.append(("\\>= 10x the per-event trigger baseline", ratio(d, tev),
                    verdict(d / tev >= 10 if d and tev else None)))
    tba = rate_of("triggers_batched", "changes")
    targets.append(("\\>= 2x the batched trigger baseline", ratio(d, tba),
                    verdict(d / tba >= 2 if d and tba else None)))
    p99_name = f"freshness p99 <= {p99_target * 1000:.0f} ms ({size_name}) at "
    if f and f.get("p99") is not None:
        targets.append((p99_name + ("the default rate" if not args.freshness_rate
                                    else f"{f['rate']:,.0f} events/s"),
                        f"{f['p99'] * 1000:.1f} ms", verdict(f["p99"] <= p99_target)))
    else:
        targets.append((p99_name + "the default rate", "—", "n/a"))
    rss = [C[k]["rss_kib"] for k in ("replay", "run") if C.get(k, {}).get("rss_kib")]
    rss += [x["rss_kib"] for x in fresh if x.get("rss_kib")]
    entities = C.get("replay", {}).get("entities", 0)
    if rss:
        mib = max(rss) / 1024
        if entities >= 1_000_000:
            targets.append((f"daemon RSS < 256 MiB with {fmt_count(entities)} entities stored",
                            f"{mib:.0f} MiB", verdict(mib < 256)))
        else:
            targets.append(("daemon RSS < 256 MiB with 1,000,000+ entities stored",
                            f"{mib:.0f} MiB with {fmt_count(entities)} entities", "n/a (store too small)"))
    if s and large:
        r = large / s["changes"]["rate"]
        targets.append((f"events/s within 20% at two store sizes 10x apart",
                        f"{r:.2f}", verdict(r >= 0.8)))
    else:
        targets.append(("events/s within 20% at two store sizes 10x apart", "—", "n/a"))
    if s and s.get("same_stream"):
        ss = s["same_stream"]
        r = ss["rate"] / s["changes"]["rate"]
        targets.append((f"the same: one change stream on both stores ({ss['entities'] / s['entities']:.0f}x "
                        "the data, the same work)", f"{r:.2f}", verdict(r >= 0.8)))
    fl = results.get("floor")
    if fl and fl.get("rate") and ceil:
        targets.append((f"bound: the write floor at {fl['batch']:,} events per transaction "
                        "(throughput no maintainer committing as often exceeds)",
                        f"{fl['rate'] / ceil:.0%}", "bound"))
    if ks.get("changes") or ks.get("wrong"):
        dr, kr = d, rate_of("kstreams", "changes")
        targets.append((f"{hl} events/s ahead of Kafka Streams (CHANGES)", ratio(dr, kr),
                        verdict(dr > kr if dr and kr else None)))
        lr, klr = rate_of("replay", "load"), rate_of("kstreams", "load")
        targets.append(("denormd replay events/s ahead of Kafka Streams (LOAD)", ratio(lr, klr),
                        verdict(lr > klr if lr and klr else None)))
        if f and f.get("p99") is not None and kf and kf.get("p99_ms") is not None and not ks.get("wrong"):
            targets.append(("freshness p99 below Kafka Streams' at the same rate",
                            f"{f['p99'] * 1000:,.0f} ms vs {kf['p99_ms']:,} ms",
                            verdict(f["p99"] * 1000 < kf["p99_ms"])))
        else:
            targets.append(("freshness p99 below Kafka Streams' at the same rate", "—", "n/a"))
        if rss and ks.get("rss_kib") and not ks.get("wrong"):
            kmib = ks["rss_kib"] / 1024
            targets.append(("several times less memory than Kafka Streams (peak RSS, >= 3x)",
                            f"{max(rss) / 1024:.0f} MiB vs {kmib:.0f} MiB ({kmib / (max(rss) / 1024):.1f}x)",
                            verdict(kmib >= 3 * max(rss) / 1024)))
    targets += relational.targets(results)
    lines.append("| target | measured | |")
    lines.append("| --- | ---: | --- |")
    for t, m, v in targets:
        lines.append(f"| {t} | {m} | {v} |")
    lines.append("")
    lines.append("Documents check (each against denormd replay's documents at the same point): "
                 + "; ".join(f"{c['label']}: " + ("identical" if not c["differ"]
                                                   else f"{c['differ']} differ")
                             for c in results.get("checks", [])) + ".")
    return "\n".join(lines)


def requests_table(results):
    """The table of round trips and statements to PostgreSQL per batch and per event."""
    C = results["contenders"]
    rows = [(f"denormd replay, {ph.upper()}", C.get("replay", {}).get(ph, {}).get("requests"))
            for ph in ("load", "changes")]
    rows.append(("denormd run, CHANGES", C.get("run", {}).get("changes", {}).get("requests")))
    rows += [(f"denormd run, freshness at {x['sent'] / x['elapsed']:,.0f} events/s", x.get("requests"))
             for x in results.get("freshness", []) if x.get("elapsed")]
    rows = [(label, q) for label, q in rows if q]
    if not rows:
        return []
    out = ["Requests to PostgreSQL (round trips: begin, statements, commit, lock-row provisioning; "
           "statements: SQL statements they sent; retries included; replay from its summary line, "
           "run from denormd_store_round_trips_total and denormd_store_statements_total):", "",
           "| denormd | events | batches | round trips / batch | statements / batch "
           "| round trips / event | statements / event |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for label, q in rows:
        out.append(f"| {label} | {q['events']:,} | {q['batches']:,} | {q['round_trips_per_batch']:,.1f} "
                   f"| {q['statements_per_batch']:,.1f} | {q['round_trips_per_event']:.3f} "
                   f"| {q['statements_per_event']:.3f} |")
    return out + [""]


def freshness_table(fresh, plot):
    """The freshness runs, one row per rate, and where their plot is."""
    if not fresh:
        return []
    out = ["Freshness (produce → committed document; denormd_event_age_seconds, quantiles "
           "interpolated within histogram buckets): each rate a new `denormd run` on the "
           "reference store (after the whole change stream) and a new topic, caught up when "
           "production starts"
           + (f"; plot: `{os.path.basename(plot)}` beside this file" if plot else "") + ".", "",
           "| rate | events/s produced | events | p50 | p99 | max | batches | ms per batch "
           "| documents written / event |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for x in fresh:
        out.append(f"| {x['rate']:,.0f} ({x['how']}) | {x['sent'] / x['elapsed']:,.0f} | {x['sent']:,} "
                   f"| {x['p50'] * 1000:,.1f} ms | {x['p99'] * 1000:,.1f} ms | {x['max'] * 1000:,.1f} ms "
                   f"| {x['batches']:,} | {x['batch_seconds_mean'] * 1000:,.0f} "
                   f"| {x['documents_per_event']:.2f} |")
    return out + [""]


def size_targets(results):
    """The targets that depend on the store's size (issue 9): (share of the ceiling,
    freshness p99 in seconds, which size). The issue's full size (1.2 M entities) may
    reach 20% of the ceiling and a p99 of 250 ms; smaller stores 25% and 100 ms."""
    if results["contenders"].get("replay", {}).get("entities", 0) >= 1_000_000:
        return 0.20, 0.25, "at 1,000,000+ entities"
    return 0.25, 0.1, "below 1,000,000 entities"


def freshness_svg(fresh, title, target_ms=100):
    """A hand-written SVG plot: p50 and p99 (ms, log scale) against the produced rate
    (events/s), with the p99 target as a dashed line."""
    W, H, L, R, T, B = 640, 400, 80, 24, 48, 56  # size and margins
    pts = [(x["sent"] / x["elapsed"], x["p50"] * 1000, x["p99"] * 1000) for x in fresh]
    ys = [v for _, a, b in pts for v in (a, b) if v > 0] + [float(target_ms)]
    lo, hi = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    hi = max(hi, lo + 1)
    xmax = max(p[0] for p in pts) * 1.1
    step = 10 ** math.floor(math.log10(xmax / 5))
    step *= next(m for m in (1, 2, 5, 10) if xmax / (step * m) <= 6)
    xmax = math.ceil(xmax / step) * step
    px = lambda v: L + (W - L - R) * v / xmax  # noqa: E731
    py = lambda v: H - B - (H - T - B) * (math.log10(v) - lo) / (hi - lo)  # noqa: E731
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
         f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>']
    for e in range(lo, hi + 1):  # decades: grid and labels
        y = py(10 ** e)
        o.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{10 ** e:,}</text>')
    v = 0
    while v <= xmax + 1e-9:
        x = px(v)
        o.append(f'<line x1="{x:.1f}" y1="{H - B}" x2="{x:.1f}" y2="{H - B + 5}" stroke="black"/>')
        o.append(f'<text x="{x:.1f}" y="{H - B + 18}" text-anchor="middle">{v:,.0f}</text>')
        v += step
    o.append(f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>')
    o.append(f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>')
    o.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">input rate (events/s)</text>')
    o.append(f'<text transform="translate(20 {(T + H - B) / 2}) rotate(-90)" text-anchor="middle">'
             'event age at commit (ms, log scale)</text>')
    y, ly = py(target_ms), T + 10 + 18 * 2
    for x1, y1, x2 in ((L, y, W - R), (L + 12, ly, L + 36)):  # the target, and its legend entry
        o.append(f'<line x1="{x1}" y1="{y1:.1f}" x2="{x2}" y2="{y1:.1f}" stroke="#888" '
                 'stroke-dasharray="6 4"/>')
    o.append(f'<text x="{L + 42}" y="{ly + 4}">target: p99 &lt;= {target_ms:,.0f} ms</text>')
    for i, (name, color) in enumerate((("p50", "#1f77b4"), ("p99", "#d62728"))):
        xy = [(px(p[0]), py(p[1 + i])) for p in pts]
        o.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                 + " ".join(f"{a:.1f},{b:.1f}" for a, b in xy) + '"/>')
        for (a, b), p in zip(xy, pts):
            o.append(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="4" fill="{color}"/>')
            o.append(f'<text x="{a + 7:.1f}" y="{b - 7:.1f}" fill="{color}">{p[1 + i]:,.0f}</text>')
        ly = T + 10 + 18 * i
        o.append(f'<line x1="{L + 12}" y1="{ly}" x2="{L + 36}" y2="{ly}" stroke="{color}" stroke-width="2"/>')
        o.append(f'<text x="{L + 42}" y="{ly + 4}">{name}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


def pg_version(env):
    try:
        return env.scalar("select version()")
    except BenchError:
        return "?"


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("workload (passed to bench/generate_workload.py)")
    for k, v in GEN_DEFAULTS.items():
        g.add_argument(f"--{k}", type=int, default=v, help=f"default {v:,}")
    g.add_argument("--changes", type=int, default=20_000,
                   help="events in the change stream (default 20,000)")
    g.add_argument("--seed", type=int, default=20261125)
    g.add_argument("--out", default=os.path.join(REPO, ".local", "bench", "workload"),
                   help="workload cache: one folder per size; reused when a manifest matches "
                        "(default .local/bench/workload)")
    g = p.add_argument_group("contenders")
    g.add_argument("--trigger-sample", type=int, default=5000, metavar="N",
                   help="change events for the one-transaction-per-event trigger baseline, "
                        "measured on the first N events of the stream (default 5,000, fewer "
                        "if --trigger-seconds runs out; 0: skip)")
    g.add_argument("--trigger-batched-sample", type=int, default=0, metavar="N",
                   help="change events for the 1,000-per-transaction trigger baseline, after "
                        "the per-event sample (default 0: the rest of the stream)")
    g.add_argument("--trigger-seconds", type=float, default=60, metavar="S",
                   help="time budget of each trigger baseline: it stops at the first "
                        "transaction boundary after S seconds (default 60), and its rate is "
                        "measured on the events it applied")
    g.add_argument("--trigger-load", choices=["backfill", "events"], default="backfill",
                   help="how the trigger contenders load: backfill (source rows in bulk with "
                        "the triggers off, then a set-based recompute of every document; "
                        "default) or events (apply_events, transactions of 1,000: "
                        "quadratic on hot posts, for small sizes only)")
    g.add_argument("--skip-kafka", action="store_true",
                   help="no Kafka: skip denormd run, the relational path, freshness and the Kafka Streams peer")
    g.add_argument("--skip-kstreams", action="store_true",
                   help="skip the Kafka Streams peer (bench/peers/kstreams)")
    g.add_argument("--skip-feed", action="store_true",
                   help="skip denormd run with the change feed (publishing on)")
    g.add_argument("--skip-relational", action="store_true",
                   help="skip the relational path (Debezium records of tables with a join "
                        "table, bench/relational.py)")
    g.add_argument("--skip-triggers", action="store_true",
                   help="skip the trigger contenders")
    g.add_argument("--skip-floor", action="store_true",
                   help="skip the write floor (the bulk writes of only what changes)")
    g.add_argument("--kstreams-threads", type=int, default=1, metavar="N",
                   help="the peer's num.stream.threads (default 1)")
    g.add_argument("--kstreams-commit-ms", type=int, default=100, metavar="MS",
                   help="the peer's commit.interval.ms (default 100, exactly-once's default)")
    g.add_argument("--kstreams-cache-mib", type=int, default=16, metavar="MIB",
                   help="the peer's statestore.cache.max.bytes in MiB (default 16)")
    g.add_argument("--kstreams-rocksdb-mib", type=int, default=64, metavar="MIB",
                   help="the peer's RocksDB memory, all stores together (block cache with "
                        "the memtables charged to it; default 64)")
    g.add_argument("--kstreams-heap", default="-Xms64m -Xmx256m", metavar="JVM_OPTIONS",
                   help="the peer's JVM heap options (default '-Xms64m -Xmx256m')")
    g = p.add_argument_group("freshness and scaling")
    g.add_argument("--freshness-rate", type=float, default=0, metavar="EVENTS_PER_S",
                   help="one fixed input rate into Kafka, instead of --freshness-fractions (also "
                        "the rate of the change feed's delay and the Kafka Streams peer's "
                        "freshness; default: 20%% of denormd run's measured CHANGES events/s)")
    g.add_argument("--freshness-fractions", default="0.1,0.2,0.5", metavar="F,F,...",
                   type=lambda v: [float(x) for x in v.split(",") if x.strip()],
                   help="freshness is measured at each of these fractions of denormd run's "
                        "measured CHANGES events/s, a new daemon each (default 0.1,0.2,0.5)")
    g.add_argument("--freshness-seconds", type=float, default=30,
                   help="how long to produce at that rate (default 30)")
    g.add_argument("--scale-small", type=float, default=0.1, metavar="F",
                   help="the scaling run's store: F x the entity counts, same change-stream "
                        "length (default 0.1; 0: skip)")
    g = p.add_argument_group("soak mode (bench/soak.py)")
    g.add_argument("--soak-minutes", type=float, default=0, metavar="M",
                   help="run the soak instead of the other contenders: one denormd run with "
                        "the change feed on, fed for M minutes (the issue's: 60); windows of "
                        "the verdicts scale by M/60 (default 0: no soak)")
    g.add_argument("--soak-rate", type=float, default=0, metavar="EVENTS_PER_S",
                   help="the soak's input rate (default: --soak-fraction of the rate "
                        "--soak-base names)")
    g.add_argument("--soak-fraction", type=float, default=0.5, metavar="F",
                   help="the soak's rate as a fraction of the measured rate (default 0.5)")
    g.add_argument("--soak-base", choices=["sustained", "run", "feed"], default="sustained",
                   help="which measured rate --soak-fraction applies to: sustained (default): "
                        "what the soak's daemon (feed on) commits over minutes with a backlog "
                        "kept ahead of it, measured before the soak; run or feed: denormd "
                        "run's or denormd run + feed's CHANGES rate (a 4-second burst, which "
                        "overstates what a daemon sustains for an hour; the feed contender is "
                        "then run first)")
    g.add_argument("--soak-measure-seconds", type=float, default=300, metavar="S",
                   help="length of the sustained-rate measurement (default 300)")
    g.add_argument("--soak-measure-warmup", type=float, default=60, metavar="S",
                   help="its first S seconds are not counted (default 60)")
    g.add_argument("--soak-sample-seconds", type=float, default=30, metavar="S",
                   help="sampling interval of the soak (default 30)")
    g.add_argument("--soak-retention-interval", type=int, default=0, metavar="S",
                   help="the soak daemon's retention.interval_s (how often it prunes lock "
                        "rows, zero counters and old tombstones; default: denormd's, 300)")
    g.add_argument("--soak-autovacuum", action="store_true",
                   help="per-table autovacuum settings on all the soak store's tables (after "
                        "1%% dead rows, unthrottled; bench/soak.py AUTOVACUUM; default: "
                        "denormd's, which sets them on its churning tables only)")
    g = p.add_argument_group("services and output")
    g.add_argument("--state-dir", default=os.path.join(REPO, ".local", "bench"),
                   help="DENORMD_STATE_DIR of the benchmark's own PostgreSQL and Kafka "
                        "(default .local/bench)")
    g.add_argument("--pg-port", type=int, default=15440,
                   help="default 15440 (below Linux's ephemeral ports: scripts/README.md)")
    g.add_argument("--kafka-port", type=int, default=19240,
                   help="default 19240 (the controller takes the next port too)")
    g.add_argument("--metrics-port", type=int, default=19464,
                   help="denormd run's /metrics during the run (default 19464)")
    g.add_argument("--stall-seconds", type=float, default=300,
                   help="give up on denormd run after this long without progress (default 300)")
    g.add_argument("--no-build", action="store_true",
                   help="skip install-deps.sh and the build; use build/denormd as it is")
    g.add_argument("--keep-services", action="store_true",
                   help="leave PostgreSQL and Kafka running and the bench schemas in place")
    g.add_argument("--record", action="store_true",
                   help="write the results to the committed bench/results/latest.{md,json} "
                        "(default: an untracked file per run, see --results)")
    g.add_argument("--results", default=None,
                   help="where the table, command, date and machine go (default "
                        "STATE_DIR/results/run-<date>.md, the raw figures beside it as .json; "
                        "with --record bench/results/latest.md)")
    args = p.parse_args()
    if args.soak_minutes:
        if args.skip_kafka:
            p.error("--soak-minutes needs Kafka (drop --skip-kafka)")
        # The soak needs the loaded store and denormd run's rate only.
        args.skip_kstreams = args.skip_triggers = args.skip_relational = True
        args.skip_floor = True
        args.skip_feed = args.soak_rate > 0 or args.soak_base != "feed"
        args.scale_small = 0
    run_stamp = datetime.now().strftime("%Y%m%d%H%M%S")
    if args.results is None:
        args.results = (os.path.join(BENCH, "results", "latest.md") if args.record else
                        os.path.join(os.path.abspath(args.state_dir), "results", f"run-{run_stamp}.md"))

    env = Env(args)
    started = []
    results = {"contenders": {}, "notes": []}
    sizes = {k: getattr(args, k) for k in GEN_DEFAULTS}
    run_id = run_stamp
    code = 0
    try:
        preflight(env, args)
        setup(env, args, started)
        results["pg_version"] = pg_version(env)
        wdir = workload(env, sizes, args.changes, args.seed, "main")
        load, changes = os.path.join(wdir, "load.jsonl"), os.path.join(wdir, "changes.jsonl")
        n_load, n_changes = count_lines(load), count_lines(changes)
        small_dir = None
        if args.scale_small > 0:
            small = {k: max(1, round(v * args.scale_small)) for k, v in sizes.items()}
            small_dir = workload(env, small, args.changes, args.seed, "scaling", SMALL_ID_PREFIX)
        for s in SCHEMAS.values():
            drop_schema(env, s)

        ceiling(env, results, load, changes, n_load, n_changes)
        clones = [SCHEMAS["ref"]] + ([] if args.skip_kafka else [SCHEMAS["run"]]) + \
            ([] if args.skip_kafka or args.skip_feed else [SCHEMAS["feed"]]) + \
            ([] if args.skip_floor else [SCHEMAS["floor"]])
        configs = replay_contender(env, results, load, changes, n_changes, clones)
        ref = {"at": 0, "config": configs[SCHEMAS["ref"]]}
        if not args.skip_kafka:
            run_contender(env, results, SCHEMAS["run"], changes, n_changes, run_id)
            check(env, "run", results, SCHEMAS["run"], SCHEMAS["replay"],
                  "denormd run after load + all changes")
            drop_schema(env, SCHEMAS["run"])
        if not args.skip_kafka and not args.skip_relational:
            relational.contender(sys.modules[__name__], env, results, load, changes, n_load,
                                 n_changes, sizes, ref, run_id)
            drop_schema(env, SCHEMAS["relational"])
        if not args.skip_kafka and not args.skip_feed:
            feed_contender(env, results, changes, n_changes, sizes, run_id)
            drop_schema(env, SCHEMAS["feed"])
        if not args.skip_kafka and not args.skip_kstreams:
            try:
                kstreams_contender(env, results, load, changes, n_load, n_changes, sizes, run_id)
            except BenchError as e:  # the peer's failure is reported; the others still run
                log(f"Kafka Streams: failed: {e}")
                results["contenders"].setdefault("kstreams", {})["failed"] = str(e)[:2000]
                results["notes"].append("Kafka Streams peer failed (its output and state are in "
                                        f"{os.path.relpath(env.work, REPO)}): " + str(e).splitlines()[0])
        if not args.skip_triggers:
            trigger_contenders(env, results, load, changes, n_load, n_changes, ref)
        if not args.skip_kafka and not args.soak_minutes:
            freshness(env, results, changes, n_changes, sizes, ref, run_id)
        if small_dir:
            scaling(env, results, small_dir, n_changes)
        if not args.skip_floor:  # last: its writes and WAL come after every timed daemon run
            write_floor(env, results, changes, n_changes, configs[SCHEMAS["floor"]])
            drop_schema(env, SCHEMAS["floor"])
        if args.soak_minutes:
            soak.run(sys.modules[__name__], env, results, changes, n_changes, sizes, ref, run_id,
                     wdir)
    except BenchError as e:
        print(f"bench: error: {e}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        code = 130
    finally:
        if not args.keep_services:
            if env.owned:  # only in the server this run verified as its own
                try:
                    for s in SCHEMAS.values():
                        drop_schema(env, s)
                except BenchError as e:
                    log(f"cleanup: {e}")
            stop_services(env, started)
    if code == 0 or results["contenders"]:
        elapsed = time.time() - T0
        fresh = [x for x in results.get("freshness", []) if x.get("p99") is not None]
        if fresh:
            results["freshness_plot"] = os.path.splitext(args.results)[0] + "-freshness.svg"
            os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
            with open(results["freshness_plot"], "w") as fh:
                fh.write(freshness_svg(fresh, "denormd run: freshness against input rate",
                                       size_targets(results)[1] * 1000))
        table = report(env, results, args, sizes, locals().get("n_load", 0),
                       locals().get("n_changes", 0)) if "n_load" in locals() else ""
        soak.write_plot(results, args.results)
        table += "\n".join(soak.report(results))
        print(table)
        header = [
            "# denormd benchmark: latest results", "",
            f"- command: `{shlex.join(['bench/run.py'] + sys.argv[1:])}`",
            f"- date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        ]
        mach = machine()
        header.append(f"- machine: {mach['cpus']} CPUs ({mach['cpu']}), {mach['memory']} RAM, "
                      f"Linux {mach['kernel']}")
        header.append(f"- PostgreSQL: {results.get('pg_version', '?')}")
        header.append(f"- total runtime: {elapsed / 60:.1f} min" + ("" if code == 0 else
                                                                     f" (FAILED, exit {code})"))
        header += ["", ""]
        os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
        with open(args.results, "w") as fh:
            fh.write("\n".join(header) + table + "\n")
        with open(os.path.splitext(args.results)[0] + ".json", "w") as fh:
            json.dump(results, fh, indent=1, default=str)
        log(f"done in {elapsed / 60:.1f} min; results in {os.path.relpath(args.results, REPO)}")
    return code


if __name__ == "__main__":
    sys.exit(main())
