"""Freshness: `denormd run` on the reference store (after the whole change stream) while the
stream goes on into Kafka at a fixed rate, a new daemon and topic per rate; the time from
produce to committed document (denormd_event_age_seconds). And the one default rate the
feed's delay and the Kafka Streams peer's freshness use."""

import os
import time

from .contenders.denormd_run import run_rate
from .daemon import Daemon, event_age, kafka_topic, metric_value, positions_total, produce
from .requests import metrics_requests
from .services import log
from .store import SCHEMAS, checkpoint, ref_advance, write_config
from .workload import change_lines

DEFAULT_FRESHNESS_FRACTION = 0.2  # "the default rate": the target's, the peer's, the feed's


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


def new_events(env, w, rate, label):
    """The events that --freshness-seconds at `rate` takes, after changes.jsonl (the stream
    continued by the generator): for a store that has applied all of it."""
    want = max(1, int(rate * env.args.freshness_seconds))
    return change_lines(env, w.sizes, w.changes, w.n_changes, w.n_changes, want, label)


def default_freshness(results):
    """The freshness run at the default rate (the targets compare it), or None."""
    for f in results.get("freshness", []):
        if f.get("p99") is not None and f["fraction"] in (None, DEFAULT_FRESHNESS_FRACTION):
            return f
    return None


def measure(env, results, changes, n_changes, sizes, ref, run_id):
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
        sent, elapsed, lag = produce(env, topic, lines, rate, args.freshness_seconds,
                                     lambda: not d.alive())
        f.update({"sent": sent, "elapsed": elapsed, "producer_max_lag": lag})
        d.wait_until(lambda: not positions_total(env, schema, topic) < sent,
                     "freshness: the daemon did not catch up")
        text = d.save_metrics(os.path.join(env.work, f"fresh-{tag}.metrics"))
    finally:
        d.stop()
    f.update(event_age(text, "freshness: denormd_event_age_seconds is empty (a daemon without the "
                             "freshness metrics?)"))
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
