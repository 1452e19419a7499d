"""Horizontal: `denormd run` with 1, 2 and 4 instances in one consumer group on one store
(--horizontal 1,2,4), each count on its own copy of denormd replay's loaded store and its own
4-partition topic; events/s, the share of the instances' batch time spent waiting for locks
or in attempts rolled back for a busy key, and the documents checked against denormd
replay's.

How each count runs: the instances start on the empty topic and the run waits until their
assignment is stable (each holds a share, together the 4 partitions, as their logs say);
then `denormd publish` writes the change stream into the topic (about 4x faster than the
instances apply it) and the clock runs from the publish's start to the last event committed
(denormd's positions). So every count, 1 included, pays the same publish beside it; the
1-instance rate is not `denormd run`'s (which starts on a pre-filled topic).

What the wait share is made of, measured on two sides that share no code:
  lock wait    PostgreSQL's side: pg_stat_activity sampled about every 10 ms on a psql
               session of its own (LockSampler) for the instances' connections (their
               application_name, PGAPPNAME): of the samples in which one is inside a
               transaction (state active or idle in transaction), the share waiting for a
               lock (wait_event_type Lock: the writers' locks, a lock row, a tuple).
  busy retries the daemon's side: denormd_batch_busy_seconds_total (attempts rolled back
               because another writer held a key past the brief wait) over
               denormd_batch_duration_seconds_sum, summed over the instances;
               denormd_batch_retries_total counts transient retries besides.
The wait share lies between the larger of the two and their sum (a lock wait inside a
rolled-back attempt counts in both), capped at 100 %; the report gives that range. This
machine has 2 cores: events/s will not scale; the wait share says whether the design
serializes instances beyond what PostgreSQL can do.
"""

import json
import os
import re
import signal
import subprocess
import time

import kafka_produce

from .daemon import Daemon, kafka_topic, metric_value, positions_total
from .services import BenchError, fmt_count, log
from .store import SCHEMAS, check, clone_schemas, create_denormd_schema, drop_schema, write_config

APP_NAME = "denormd-bench-horizontal"
SAMPLE_SECONDS = 0.01
PARTITIONS = 4
ASSIGNMENT = re.compile(r"event=partitions_(assigned|revoked) partitions=(\S*)")


def instance_counts(text):
    """--horizontal's value: instance counts, each 1..PARTITIONS."""
    counts = [int(x) for x in text.split(",") if x.strip()]
    for n in counts:
        if not 1 <= n <= PARTITIONS:
            raise ValueError(f"{n} instances: each count must be 1 to {PARTITIONS} (the topic's "
                             "partitions)")
    return counts


class LockSampler:
    """pg_stat_activity every SAMPLE_SECONDS (psql's \\watch) while it runs: for the
    connections named APP_NAME, how many are inside a transaction, how many of those wait
    for a lock, and how many of these for the writers' locks (the table's, and the
    advisory locks of the parts of the model, which a batch running alone in its parts
    holds exclusively: docs/architecture.md, "Several instances: the locking"; the rest
    wait for lock rows, i.e. keys); (samples, in transaction, waiting, waiting for the
    writers' locks) when stopped."""

    QUERY = ("select count(*) filter (where state in ('active', 'idle in transaction')), "
             "count(*) filter (where state in ('active', 'idle in transaction') "
             "and wait_event_type = 'Lock'), "
             "count(*) filter (where state in ('active', 'idle in transaction') "
             "and wait_event_type = 'Lock' and wait_event in ('relation', 'advisory')) "
             f"from pg_stat_activity where application_name = '{APP_NAME}'")

    def __init__(self, env, path):
        self.path = path
        self.out = open(path, "w")
        self.proc = subprocess.Popen(
            ["psql", "-X", "-q", "-tA", "-F", " ", "-d", env.pg_url],
            stdin=subprocess.PIPE, stdout=self.out, stderr=subprocess.STDOUT, text=True,
            env=env.env)
        self.proc.stdin.write(f"{self.QUERY} \\watch {SAMPLE_SECONDS}\n")
        self.proc.stdin.flush()

    def stop(self):
        # SIGINT ends \watch; closing stdin then ends psql, which flushes its output.
        self.proc.send_signal(signal.SIGINT)
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.out.close()
        with open(self.path) as fh:
            counts = tally(fh)
        if not counts[0]:
            raise BenchError(f"horizontal: the lock sampler took no sample (its output: "
                             f"{self.path})")
        return counts


def tally(lines):
    """(samples, in transaction, waiting, waiting for the writers' locks) of LockSampler's
    output lines ("<in> <waiting> <writers>"; anything else, e.g. an error psql printed, is
    not a sample)."""
    samples = in_transaction = waiting = writers = 0
    for line in lines:
        m = re.fullmatch(r"(\d+) (\d+) (\d+)", line.strip())
        if m:
            samples += 1
            in_transaction += int(m.group(1))
            waiting += int(m.group(2))
            writers += int(m.group(3))
    return samples, in_transaction, waiting, writers


def assignment(log_text):
    """The partitions an instance holds now, from its log (None before its first
    assignment or after a revocation)."""
    events = ASSIGNMENT.findall(log_text)
    if not events or events[-1][0] != "assigned":
        return None
    return {p.split("@")[0] for p in events[-1][1].split(",") if p}


def stable(held):
    """Whether the instances' assignments (assignment() each) give every instance a share
    and each partition to exactly one."""
    return all(held) and sum(len(h) for h in held) == PARTITIONS and \
        len(set().union(*held)) == PARTITIONS


def wait_for_stable_assignment(daemons, timeout=120):
    """Until every instance holds a share and together they hold each partition once."""
    deadline = time.time() + timeout
    while True:
        held = [assignment(d.log_text()) for d in daemons]
        if stable(held):
            return
        for d in daemons:
            if not d.alive():
                raise BenchError("horizontal: an instance exited:\n" + d.log_text()[-3000:])
        if time.time() > deadline:
            raise BenchError(f"horizontal: no stable assignment of {PARTITIONS} partitions to "
                             f"{len(daemons)} instances in {timeout} s: {held}")
        time.sleep(0.1)


# How the change stream's records are keyed (so partitioned) for the horizontal run.
KEYINGS = ("entity", "post")
KEYING_NAMES = {"entity": "by entity (type:id)",
                "post": "comments by their post (post:<postId>), the rest by entity"}


def keying_name(f):
    """How a run's records were keyed, for the report."""
    keying = f.get("keying", "entity")
    return KEYING_NAMES.get(keying, keying)


def keyings(text):
    """--horizontal-keys's value: keyings of KEYINGS."""
    out = [k.strip() for k in text.split(",") if k.strip()]
    for k in out:
        if k not in KEYINGS:
            raise ValueError(f"unknown keying {k!r}: one of {', '.join(KEYINGS)}")
    return out


def keyed_by_post(load_lines, change_lines):
    """[(key, line)] of the change stream with every event of a comment keyed by the post
    it first named (in the load or the stream): each comment's events stay on one
    partition, in order, and most of a post's comments share one. Other events keep
    type:id."""
    post_of = {}

    def remember(e):
        post = (e.get("data") or {}).get("postId")
        if e["type"] == "comment" and e["id"] not in post_of and post:
            post_of[e["id"]] = post

    for line in load_lines:
        remember(json.loads(line))
    out = []
    for line in change_lines:
        e = json.loads(line)
        remember(e)
        post = post_of.get(e["id"]) if e["type"] == "comment" else None
        key = f"post:{post}" if post is not None else f"{e['type']}:{e['id']}"
        out.append((key.encode(), line.rstrip("\n").encode()))
    return out


def publish_keyed(env, topic, records):
    """records [(key, value)] into the PARTITIONS-partition topic, in order, in requests
    of 500 (bench/kafka_produce.py, CRC32 partitioning like denormd publish)."""
    producer = kafka_produce.Producer(env.brokers, topic, PARTITIONS)
    try:
        for i in range(0, len(records), 500):
            now = int(time.time() * 1000)
            producer.send([(now, k, v) for k, v in records[i:i + 500]])
    finally:
        producer.close()


def wait_range(f):
    """(low, high) of the wait share: the larger of the lock wait and the busy retries'
    shares, and their sum capped at 1."""
    return max(f["lock_share"], f["busy_share"]), min(1.0, f["lock_share"] + f["busy_share"])


def fmt_range(low, high):
    return f"{low:.1%}" if f"{low:.1%}" == f"{high:.1%}" else f"{low:.1%}–{high:.1%}"


def run_count(env, results, w, run_id, n, keying, keyed):
    """One count: n instances on a fresh copy of the loaded store, the change stream keyed
    as `keying` says (`keyed`: its [(key, line)], or None for denormd publish's type:id);
    its figures."""
    args = env.args
    schema = SCHEMAS["horizontal"]
    create_denormd_schema(env, schema)
    clone_schemas(env, SCHEMAS["horizontal_base"], [schema])
    topic = f"bench.horizontal.{run_id}.{keying}.{n}"
    kafka_topic(env, topic, PARTITIONS)
    config = write_config(env, schema, topic=topic, group=f"denormd-bench-h{n}-{keying}-{run_id}")
    daemon_env = dict(env.env, PGAPPNAME=APP_NAME)
    label = f"{n} instance(s), keyed {keying}"
    files = os.path.join(env.work, f"horizontal-{run_id}-{keying}-{n}")  # + -<i>.log, ...
    log(f"horizontal: {label}: starting them on the empty topic {topic}")
    daemons = []
    try:
        for i in range(n):
            daemons.append(Daemon(env, config, args.metrics_port + 1 + i,
                                  f"{files}-{i}.log",
                                  process_env=daemon_env))
        wait_for_stable_assignment(daemons)
        sampler = LockSampler(env, f"{files}-locks.txt")
        start = time.time()
        if keyed is None:
            publish = subprocess.Popen([env.denormd, "publish", "-q", "-c", config, w.changes],
                                       env=env.env, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, text=True)
        else:
            publish = None
            publish_keyed(env, topic, keyed)
        def committed():
            for d in daemons:
                if not d.alive():
                    raise BenchError(f"horizontal, {label}: an instance exited:\n"
                                     + d.log_text()[-3000:])
            return positions_total(env, schema, topic)

        try:
            done = daemons[0].wait_for_count(committed, w.n_changes, f"horizontal, {label}",
                                             "events", args.stall_seconds)
        finally:
            samples, in_transaction, waiting, writers = sampler.stop()
            err = publish.communicate()[1] if publish is not None else ""
        if publish is not None and publish.returncode != 0:
            raise BenchError(f"horizontal: denormd publish failed: {err[-2000:]}")
        texts = [d.save_metrics(f"{files}-{i}.metrics")
                 for i, d in enumerate(daemons)]
    finally:
        codes = [d.stop() for d in daemons]
    if any(codes):
        raise BenchError(f"horizontal: exit codes {codes} after SIGTERM")

    def total(name):
        return sum(metric_value(t, name) or 0 for t in texts)

    batch_seconds = total("denormd_batch_duration_seconds_sum")
    busy_seconds = total("denormd_batch_busy_seconds_total")
    f = {"instances": n, "keying": keying, "events": w.n_changes, "seconds": done - start,
         "rate": w.n_changes / (done - start), "batches": int(total("denormd_batches_total")),
         "batch_seconds": batch_seconds,
         "busy_retries": int(total("denormd_batch_busy_retries_total")),
         "busy_seconds": busy_seconds,
         "transient_retries": int(total("denormd_batch_retries_total")),
         "samples": samples, "in_transaction": in_transaction, "lock_waiting": waiting,
         "lock_share": waiting / in_transaction if in_transaction else 0.0,
         "writers_share": writers / in_transaction if in_transaction else 0.0,
         "busy_share": busy_seconds / batch_seconds if batch_seconds else 0.0,
         "rss_kib": max(d.rss_kib or 0 for d in daemons)}
    f["wait_low"], f["wait_high"] = wait_range(f)
    f["differ"] = check(env, f"horizontal_{keying}_{n}", results, schema, SCHEMAS["replay"],
                        f"horizontal, {label}, after load + all changes")
    drop_schema(env, schema)
    log(f"horizontal: {label}: {f['seconds']:.1f} s, {f['rate']:,.0f} events/s, "
        f"{fmt_count(f['batches'])} batches; lock wait {f['lock_share']:.1%} of "
        f"{fmt_count(in_transaction)} in-transaction samples ({f['writers_share']:.1%} for the "
        f"writers' locks), busy retries {f['busy_retries']} "
        f"({f['busy_share']:.1%} of batch time), transient retries {f['transient_retries']}")
    return f


def measure(env, results, w, run_id):
    out = results.setdefault("horizontal", [])
    for keying in env.args.horizontal_keys:
        keyed = None
        if keying == "post":
            with open(w.load) as load, open(w.changes) as changes:
                keyed = keyed_by_post(load, changes)
        for n in env.args.horizontal:
            out.append(run_count(env, results, w, run_id, n, keying, keyed))
    drop_schema(env, SCHEMAS["horizontal_base"])


def report_lines(results):
    rows = results.get("horizontal")
    if not rows:
        return []
    out = ["Horizontal (`denormd run`, N instances in one consumer group on one store, a "
           f"{PARTITIONS}-partition topic the change stream is published into once they hold "
           "it; bench/harness/horizontal.py): lock wait is PostgreSQL's view (pg_stat_activity "
           "every 10 ms: of the samples in which an instance's connection is inside a "
           "transaction, the share waiting for a lock; in brackets, for the writers' locks, "
           "which a batch running alone holds exclusively; the rest wait for keys); busy "
           "retries the daemons' (denormd_batch_busy_seconds_total over "
           "denormd_batch_duration_seconds_sum); the wait share lies between the larger of "
           "the two and their sum (a lock wait inside a rolled-back attempt counts in both). "
           "This machine has 2 cores: events/s is not expected to scale.", "",
           "| records keyed | instances | events/s | batches | lock wait (writers' locks) "
           "| busy retries (share of batch time) | transient retries | wait share | documents |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for f in rows:
        docs = "identical" if f["differ"] == 0 else f"WRONG: {f['differ']} differ"
        out.append(f"| {keying_name(f)} | {f['instances']} | {f['rate']:,.0f} | {f['batches']:,} "
                   f"| {f['lock_share']:.1%} ({f.get('writers_share', 0):.1%}) "
                   f"| {f['busy_retries']:,} ({f['busy_share']:.1%}) "
                   f"| {f['transient_retries']:,} | {fmt_range(f['wait_low'], f['wait_high'])} "
                   f"| {docs} |")
    return out + [""]


def targets(results):
    """The issue's target: wait share < 5 % with 2 instances."""
    out = []
    for f in results.get("horizontal", []):
        if f["instances"] == 2:
            out.append(target(f))
    return out


def target(f):
    """(target, measured, verdict) of one 2-instance run."""
    if f["differ"] or f["wait_low"] >= 0.05:
        verdict = "NOT MET"
    elif f["wait_high"] < 0.05:
        verdict = "MET"
    else:
        verdict = "n/a (the range straddles 5 %)"
    return (f"horizontal: wait share < 5 % with 2 instances, records keyed {keying_name(f)} "
            "(documents identical)", fmt_range(f["wait_low"], f["wait_high"]), verdict)
