#!/usr/bin/env python3
"""bench/harness/report.py's freshness table and plot without services: each run's events
per batch and the share of it spent applying batches, in the table and under the plot's
points (how batching followed the input rate).

Usage: freshness_report_test.py REPO
"""

import os
import sys

REPO = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.dont_write_bytecode = True
from harness import report  # noqa: E402


def run(rate, sent, batches, batch_ms, seconds=30.0):
    return {"rate": rate, "how": "test", "sent": sent, "elapsed": seconds, "p50": 0.02,
            "p99": 0.09, "max": 0.2, "batches": batches, "batch_seconds_mean": batch_ms / 1000,
            "documents_per_event": 3.5}


low, high = run(400, 12_000, 3_000, 8), run(2_000, 60_000, 600, 25)
assert report.batch_shape(low) == (4.0, 0.8), report.batch_shape(low)
assert report.batch_shape(high) == (100.0, 0.5), report.batch_shape(high)
assert report.batch_shape(run(1, 0, 0, 0)) == (0.0, 0.0), "no batch: nothing to divide by"
table = "\n".join(report.freshness_table([low, high], None))
assert "| 3,000 | 4.0 | 8 | 80% | 3.50 |" in table, table
assert "| 600 | 100.0 | 25 | 50% | 3.50 |" in table, table
svg = report.freshness_svg([low, high], "t")
assert ">4/batch</text>" in svg and ">100/batch</text>" in svg, svg
print("freshness_report_test: ok")
