"""The report: the table of contenders, their notes, the relational path's and the horizontal
run's rows, the requests
and freshness tables, the targets and their verdicts, the documents' checks; the freshness
plot (SVG); and the results file (.md, with the command, date and machine, and .json)."""

import json
import math
import os
import shlex
import sys
import time
from datetime import datetime, timezone

import relational
import soak

from . import horizontal
from .freshness import default_freshness
from .services import REPO, T0, fmt_count, fmt_rate, log, machine
from .svg import round_step, svg_start, x_ticks


def report(results, args, sizes, n_load, n_changes):
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
    lines += horizontal.report_lines(results)

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
        if fd.get("relay_seconds") is not None:
            line += (f"; the relay was busy {fd['relay_seconds']:.1f} s "
                     f"({fd['relay_seconds'] / fd['elapsed']:.0%} of the {fd['elapsed']:.0f} s of "
                     "production, denormd_feed_relay_seconds_total: near 100 %, changes queue "
                     "behind it)")
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
    targets += horizontal.targets(results)
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
    out = ["Requests to PostgreSQL (round trips: begin, statements, commit; "
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
           "| rate | events/s produced | events | p50 | p99 | max | batches | events per batch "
           "| ms per batch | applying (batch time / elapsed) | documents written / event |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for x in fresh:
        per_batch, applying = batch_shape(x)
        out.append(f"| {x['rate']:,.0f} ({x['how']}) | {x['sent'] / x['elapsed']:,.0f} | {x['sent']:,} "
                   f"| {x['p50'] * 1000:,.1f} ms | {x['p99'] * 1000:,.1f} ms | {x['max'] * 1000:,.1f} ms "
                   f"| {x['batches']:,} | {per_batch:,.1f} | {x['batch_seconds_mean'] * 1000:,.0f} "
                   f"| {applying:.0%} | {x['documents_per_event']:.2f} |")
    return out + [""]


def batch_shape(x):
    """(events per batch, share of the run the daemon spent applying batches) of a
    freshness run: how batching followed the input rate (the Kafka source takes what is
    already fetched once a batch has a record, so batches grow with the rate), and how
    close the daemon was to saturation."""
    batches = x.get("batches") or 0
    per_batch = x["sent"] / batches if batches else 0.0
    applying = (batches * (x.get("batch_seconds_mean") or 0) / x["elapsed"]
                if x.get("elapsed") else 0.0)
    return per_batch, applying


def size_targets(results):
    """The targets that depend on the store's size (issue 9): (share of the ceiling,
    freshness p99 in seconds, which size). The issue's full size (1.2 M entities) may
    reach 20% of the ceiling and a p99 of 250 ms; smaller stores 25% and 100 ms."""
    if results["contenders"].get("replay", {}).get("entities", 0) >= 1_000_000:
        return 0.20, 0.25, "at 1,000,000+ entities"
    return 0.25, 0.1, "below 1,000,000 entities"


def freshness_svg(fresh, title, target_ms=100):
    """A hand-written SVG plot: p50 and p99 (ms, log scale) against the produced rate
    (events/s), with the p99 target as a dashed line, and the events per batch of each
    run above the axis."""
    W, H, L, R, T, B = 640, 400, 80, 24, 48, 56  # size and margins
    pts = [(x["sent"] / x["elapsed"], x["p50"] * 1000, x["p99"] * 1000) for x in fresh]
    ys = [v for _, a, b in pts for v in (a, b) if v > 0] + [float(target_ms)]
    lo, hi = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    hi = max(hi, lo + 1)
    xmax = max(p[0] for p in pts) * 1.1
    step = round_step(xmax, 6)
    xmax = math.ceil(xmax / step) * step
    px = lambda v: L + (W - L - R) * v / xmax  # noqa: E731
    py = lambda v: H - B - (H - T - B) * (math.log10(v) - lo) / (hi - lo)  # noqa: E731
    o = svg_start(W, H, title)
    for e in range(lo, hi + 1):  # decades: grid and labels
        y = py(10 ** e)
        o.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{10 ** e:,}</text>')
    x_ticks(o, px, H - B, xmax, step, lambda v: f"{v:,.0f}")
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
    for x in fresh:  # how batching followed the rate: events per batch, under each point
        per_batch, _ = batch_shape(x)
        o.append(f'<text x="{px(x["sent"] / x["elapsed"]):.1f}" y="{H - B - 8}" '
                 f'text-anchor="middle" fill="#555">{per_batch:,.0f}/batch</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


def write(results, args, w, code):
    """The freshness plot, the table (stdout) and the results file: args.results (.md) and the
    raw figures beside it (.json). w: the workload, None when the run failed before it."""
    elapsed = time.time() - T0
    fresh = [x for x in results.get("freshness", []) if x.get("p99") is not None]
    if fresh:
        results["freshness_plot"] = os.path.splitext(args.results)[0] + "-freshness.svg"
        os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
        with open(results["freshness_plot"], "w") as fh:
            fh.write(freshness_svg(fresh, "denormd run: freshness against input rate",
                                   size_targets(results)[1] * 1000))
    table = report(results, args, w.sizes, w.n_load, w.n_changes) if w else ""
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
