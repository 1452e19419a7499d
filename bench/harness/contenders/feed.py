"""denormd run + change feed: `denormd run` with the change feed on (every document change
published to Kafka), and the feed's delay from the PostgreSQL commit to the topic."""

import os
import time

from . import Contender
from ..daemon import Daemon, histogram, kafka_topic, metric_value, positions_total, produce, quantile
from ..freshness import default_freshness_rate, new_events
from ..services import BenchError, log
from ..store import SCHEMAS, check, checkpoint, row_writes, write_config


class Feed(Contender):
    """denormd run with the change feed on: the run contender's input (its pre-filled topic,
    another group) on another copy of the loaded store, every collection published to a
    4-partition topic. Measured: CHANGES events/s until the last event is committed (publishing
    on, to compare with the run contender's, publishing off), until the last change is on the
    topic, and the delay from the PostgreSQL commit to the topic (denormd_feed_delay_seconds:
    capture in the outbox, inside the batch just before its commit, to the Kafka commit), under
    that full load and then, in a second daemon, at the freshness rate on new events."""

    key = "feed"

    def __init__(self, env, results, w, run_id):
        super().__init__(env, results, w)
        self.run_id = run_id
        self.schema = SCHEMAS["feed"]
        self.topic = f"bench.changes.{run_id}"  # filled by the run contender
        self.config = None  # written by changes()

    def outbox(self):
        """Document changes captured and not yet published."""
        return int(self.env.poll_scalar(f'select count(*) from "{self.schema}".outbox'))

    def changes(self):
        env, n_changes, run_id = self.env, self.w.n_changes, self.run_id
        args, schema, topic, outbox = env.args, self.schema, self.topic, self.outbox
        feed_topic = f"bench.feed.{run_id}"
        kafka_topic(env, feed_topic, 4)
        self.config = config = write_config(env, schema, topic=topic, group=f"denormd-feed-{run_id}")
        with open(config, "a") as fh:
            fh.write(f"feed:\n  topic: {feed_topic}\n  transactional_id: denormd-bench-feed-{run_id}\n")
        r = self.result()
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
            text = d.save_metrics(os.path.join(env.work, f"feed-{run_id}.metrics"))
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

    def documents(self):
        return check(self.env, "feed", self.results, self.schema, SCHEMAS["replay"],
                     "denormd run + feed after load + all changes")

    def freshness(self):
        """The delay at the freshness rate, on new events, in a second daemon."""
        env, results, run_id = self.env, self.results, self.run_id
        n_changes = self.w.n_changes
        args, schema, topic, config, outbox = env.args, self.schema, self.topic, self.config, self.outbox
        r = self.result()
        rate = default_freshness_rate(env, results)
        if not rate:
            log("denormd run + feed: no denormd run rate and no --freshness-rate: delay not measured")
            return
        lines = new_events(env, self.w, rate, "feed delay")
        checkpoint(env)
        d = Daemon(env, config, args.metrics_port, os.path.join(env.work, f"feed-delay-{run_id}.log"))
        try:
            d.wait_for(r"partitions_assigned", 60)
            d.wait_for(r"feed_relay_started", 60)
            time.sleep(1.0)
            log(f"denormd run + feed: delay to the topic: producing at {rate:,.0f} events/s for "
                f"{args.freshness_seconds:g} s (the freshness rate)")
            sent, elapsed, _ = produce(env, topic, lines, rate, args.freshness_seconds,
                                       lambda: not d.alive())
            d.wait_until(lambda: not (positions_total(env, schema, topic) < n_changes + sent
                                      or outbox() > 0),
                         "denormd run + feed: the delay phase did not catch up")
            text = d.save_metrics(os.path.join(env.work, f"feed-delay-{run_id}.metrics"))
        finally:
            d.stop()
        b = histogram(text, "denormd_feed_delay_seconds")
        r["delay"] = {"rate": rate, "sent": sent, "elapsed": elapsed, "count": b[-1][1] if b else 0,
                      "p50": quantile(b, 0.5), "p99": quantile(b, 0.99),
                      "transactions": int(metric_value(text, "denormd_feed_transactions_total") or 0),
                      "relay_seconds": metric_value(text, "denormd_feed_relay_seconds_total")}
        fd = r["delay"]
        if fd["p99"] is not None:
            log(f"denormd run + feed: {sent} events at {sent / elapsed:,.0f}/s: {fd['count']:,} changes "
                f"published in {fd['transactions']:,} Kafka transactions, delay p50 "
                f"{fd['p50'] * 1000:.1f} ms, p99 {fd['p99'] * 1000:.1f} ms"
                + (f"; the relay was busy {fd['relay_seconds']:.1f} s of {elapsed:.1f} s"
                   if fd["relay_seconds"] is not None else ""))

    def measure(self):
        self.changes()
        self.documents()
        self.freshness()
