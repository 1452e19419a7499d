"""Requests to PostgreSQL: the round trips and statements a denormd sends, from replay's
summary line or from a daemon's /metrics."""

import re

from .daemon import metric_value

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
