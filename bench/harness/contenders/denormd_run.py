"""denormd run: `denormd run` consuming a pre-filled 4-partition topic, on a copy of denormd
replay's loaded store; its CHANGES rate is the base of the freshness rates."""

import os

from . import Contender
from ..daemon import Daemon, kafka_topic, metric_value, positions_total
from ..requests import metrics_requests
from ..services import BenchError, fmt_count, log, timed_process
from ..store import SCHEMAS, check, checkpoint, row_writes, write_config


def run_rate(results):
    """denormd run's measured CHANGES events/s, or None (not measured, or wrong)."""
    run = results["contenders"].get("run", {})
    return run["changes"]["rate"] if run.get("changes") and not run.get("wrong") else None


class DenormdRun(Contender):
    """denormd run from a pre-filled 4-partition topic (bench.changes.RUN_ID, which the feed
    contender consumes too), on a copy of replay's loaded store: no LOAD of its own."""

    key = "run"

    def __init__(self, env, results, w, run_id):
        super().__init__(env, results, w)
        self.run_id = run_id

    def changes(self):
        env, changes, n_changes, run_id = self.env, self.w.changes, self.w.n_changes, self.run_id
        args = env.args
        schema = SCHEMAS["run"]
        topic = f"bench.changes.{run_id}"
        r = self.result()
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
            text = d.save_metrics(os.path.join(env.work, f"run-{run_id}.metrics"))
        finally:
            code = d.stop()
        if code != 0:
            raise BenchError(f"denormd run: exit {code} after SIGTERM:\n" + d.log_text()[-3000:])
        r["changes"] = {
            "events": n_changes, "seconds": done - assigned, "rate": n_changes / (done - assigned),
            "startup_seconds": assigned - d.started,
            "denormd_documents_written": int(metric_value(text, "denormd_documents_written_total") or 0),
            "requests": metrics_requests(text, n_changes), "rss_kib": d.rss_kib}
        r["changes"]["documents"] = row_writes(env, schema) - before
        r["rss_kib"] = d.rss_kib
        c = r["changes"]
        log(f"denormd run: changes: {c['seconds']:.1f} s from partition assignment "
            f"(+{c['startup_seconds']:.1f} s start-up), {c['rate']:,.0f} events/s, "
            f"peak RSS {(d.rss_kib or 0) // 1024} MiB")

    def documents(self):
        return check(self.env, "run", self.results, SCHEMAS["run"], SCHEMAS["replay"],
                     "denormd run after load + all changes")
