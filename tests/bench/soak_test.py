#!/usr/bin/env python3
"""bench/soak.py without services: the soak stream continues a workload validly (each
event one version above its entity's last, patches and deletes of live entities only,
upserts of new ids only, the same event shapes as changes.jsonl, the live store keeping
its size), the producer sends what became due in one request per send interval, and the
verdicts, table and plot follow from samples.

Usage: soak_test.py REPO
"""

import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

REPO = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.dont_write_bytecode = True
import soak  # noqa: E402


def shape(e):
    return (e["type"], e["op"], tuple(sorted((e.get("data") or {}).keys())))


def check_stream(tmp):
    wl = os.path.join(tmp, "wl")
    subprocess.run([sys.executable, os.path.join(REPO, "bench", "generate_workload.py"),
                    "--out", wl, "--authors", "100", "--books", "1000", "--posts", "10",
                    "--comments", "5000", "--changes", "3000"], check=True,
                   stderr=subprocess.DEVNULL)
    state, shapes = {}, set()
    for name in ("load.jsonl", "changes.jsonl"):
        for line in open(os.path.join(wl, name)):
            e = json.loads(line)
            state[(e["type"], e["id"])] = (e["version"], e["op"] != "delete")
            if name == "changes.jsonl":
                shapes.add(shape(e))
    live = lambda t: sum(1 for (k, _), (_, alive) in state.items() if k == t and alive)  # noqa: E731
    books0, comments0 = live("book"), live("comment")
    stream = soak.SoakStream(os.path.join(wl, "load.jsonl"), os.path.join(wl, "changes.jsonl"),
                             100, 10, 1)
    assert (len(stream.books), len(stream.comments)) == (books0, comments0)
    seen = set()
    for _ in range(50_000):
        key, line = stream.next()
        e = json.loads(line)
        k = (e["type"], e["id"])
        assert key.decode() == f"{e['type']}:{e['id']}", (key, line)
        version, alive = state.get(k, (0, False))
        assert e["version"] == version + 1, (line, version)
        if e["op"] == "upsert":
            assert k not in state, f"an upsert of a known id: {line}"
        else:
            assert alive, f"a {e['op']} of an entity not live: {line}"
        state[k] = (e["version"], e["op"] != "delete")
        seen.add(shape(e))
    assert seen == shapes, f"shapes differ: {seen ^ shapes}"
    assert (len(stream.books), len(stream.comments)) == (live("book"), live("comment"))
    # creates balance deletes: the live store stays near its size (a random walk)
    assert abs(live("comment") - comments0) < 0.2 * comments0, (live("comment"), comments0)
    assert abs(live("book") - books0) < 0.2 * books0, (live("book"), books0)


def fake_sample(k, rss_mib, p99, sizes, entity_rows=100_000, tombstones=0):
    groups = {g: {"bytes": int(sizes.get(g, 1) * 2**20), "index_bytes": 0, "live": 1,
                  "dead": 0, "autovacuums": 0} for g in soak.GROUPS}
    return {"t": k * 30.0, "minute": k / 2, "rss_kib": rss_mib * 1024, "events": 1000,
            "behind": 0, "p50": p99 / 2, "p99": p99, "p99_beyond": False, "batches": 10,
            "batch_mean": 0.2, "sent": 1000 * k, "committed": 1000 * k, "outbox_rows": 0,
            "loadavg": 1.0, "harness_cpu": 0.1, "xmin_age": 0, "groups": groups,
            "entity_rows": entity_rows, "tombstones": tombstones}


def bounded(v):
    return next(x for t, x in v.items() if t.startswith("table sizes bounded"))


def check_verdicts():
    # an hour, sampled every 30 s: flat RSS and p99, collections flat, locks growing
    samples = [fake_sample(k, 100 + (k > 10) * 5, 0.05, {"collections": 100, "locks": 10 + k})
               for k in range(1, 121)]
    v = {t: (m, verdict) for t, m, verdict in soak.verdicts({"minutes": 60, "samples": samples})}
    assert v["RSS within 10 % of its value after 5 min (its highest up to then)"][1] == "MET", v
    p99 = [x for t, x in v.items() if t.startswith("freshness p99")]
    assert p99 and p99[0][1] == "MET", v
    sizes = {t: x[1] for t, x in v.items() if t.startswith("size of")}
    assert sizes["size of collections: at 15 min → end; last 10 min"] == "flat", sizes
    assert sizes["size of lock table: at 15 min → end; last 10 min"] == "still grows", sizes
    assert bounded(v)[1] == "NOT MET", v
    # entities growing by 1 MiB per sample: by tombstones only (the other rows flat) it is
    # bounded by retention; with the other rows growing too it still grows
    for others_grow, expect, overall in ((False, "tombstones only", "MET"),
                                         (True, "still grows", "NOT MET")):
        samples = [fake_sample(k, 100, 0.05, {"entities": 40 + k},
                               entity_rows=100_000 + 5_000 * k + (1_000 * k if others_grow else 0),
                               tombstones=5_000 * k) for k in range(1, 121)]
        v = {t: (m, verdict) for t, m, verdict in soak.verdicts({"minutes": 60, "samples": samples})}
        entities = v["size of entities (source rows): at 15 min → end; last 10 min"]
        assert entities[1] == expect, v
        assert bounded(v)[1] == overall, v
        growth = [x for t, x in v.items() if t.startswith("entities: growth by tombstones")]
        if others_grow:
            assert not growth, v
        else:
            # 5,000 tombstones per sample = 600,000/h; 1 MiB per 5,000 = 210 bytes each
            assert "600,000/h" in growth[0][0] and "210 bytes" in growth[0][0], growth
    # a dip at 5 minutes (the allocator returning a batch's memory) is not the reference
    samples = [fake_sample(k, 70 if k == 10 else 100, 0.05, {}) for k in range(1, 121)]
    v = {t: verdict for t, _, verdict in soak.verdicts({"minutes": 60, "samples": samples})}
    assert v["RSS within 10 % of its value after 5 min (its highest up to then)"] == "MET", v
    # RSS growing, p99 rising: both NOT MET
    samples = [fake_sample(k, 100 + k, 0.05 * (1 + k / 20), {}) for k in range(1, 121)]
    v = {t: verdict for t, _, verdict in soak.verdicts({"minutes": 60, "samples": samples})}
    assert v["RSS within 10 % of its value after 5 min (its highest up to then)"] == "NOT MET", v
    assert [x for t, x in v.items() if t.startswith("freshness p99")] == ["NOT MET"], v
    # interrupted before 15 minutes: no verdict, no crash
    assert soak.verdicts({"minutes": 60, "samples": samples[:3]})[0][2] == "n/a"
    # a 6-minute trial: the windows scale by 6/60
    samples = [fake_sample(k, 100, 0.05, {}) for k in range(1, 13)]
    v = soak.verdicts({"minutes": 6, "samples": samples})
    assert any(t.startswith("RSS within 10 % of its value after 0.5 min") for t, _, _ in v), v
    return samples


def check_report_and_plot(tmp, samples):
    results = {"soak": {"minutes": 6, "rate": 1000.0, "how": "--soak-rate", "sample_seconds": 30,
                        "samples": samples, "settings": []}}
    path = soak.write_plot(results, os.path.join(tmp, "run-x.md"))
    assert path and path.endswith("run-x-soak.svg")
    ET.parse(path)  # well-formed XML
    text = "\n".join(soak.report(results))
    assert "A SHORT soak" in text and "| 6.0 | 100 |" in text, text


class RecordingProducer:
    """kafka_produce.Producer's interface, keeping each request's records."""

    def __init__(self, brokers, topic, partitions):
        self.requests = []

    def send(self, records):
        self.requests.append(list(records))

    def close(self):
        pass


class CountingStream:
    def __init__(self):
        self.n = 0

    def next(self):
        self.n += 1
        return (b"k%d" % self.n, b"{}")


def check_producer():
    """At 2,000 events/s for a second with a 50 ms send interval: every record sent once,
    stamped with the moment it became due, in requests at least 50 ms apart (a loop that
    sleeps the interval after each send cannot send more often), so no more than 21 and of
    about 100 records; the producer that sent whenever a record became due made one of
    a record or two."""
    real = soak.kafka_produce.Producer
    soak.kafka_produce.Producer = RecordingProducer
    try:
        p = soak.Producer("broker:1", "topic", CountingStream(), 2000.0, 1.0, send_ms=50)
        p.run()  # in this thread: returns after its second
    finally:
        soak.kafka_produce.Producer = real
    assert p.error is None, p.error
    requests = p.producer.requests
    records = [r for request in requests for r in request]
    assert len(records) == p.sent and 1000 <= p.sent <= 2001, (p.sent, len(records))
    assert [r[1] for r in records] == [b"k%d" % (i + 1) for i in range(len(records))]
    start_ms = records[0][0]
    for i, r in enumerate(records):  # due at start + i / rate
        assert abs(r[0] - (start_ms + i / 2.0)) <= 1, (i, r[0], start_ms)
    assert len(requests) <= 21, f"{len(requests)} requests for {len(records)} records"


def main():
    check_producer()
    with tempfile.TemporaryDirectory() as tmp:
        check_stream(tmp)
        samples = check_verdicts()
        check_report_and_plot(tmp, samples)
    print("soak_test: ok")


if __name__ == "__main__":
    main()
