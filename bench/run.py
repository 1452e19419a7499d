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
  horizontal         `denormd run` with 1, 2 and 4 instances in one consumer group on one store
                     (--horizontal): events/s, the share of batch time spent waiting for locks
                     (PostgreSQL's pg_stat_activity, sampled) or in busy retries (the daemons'
                     metrics), documents checked; target: < 5% with 2 instances
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
import os
import signal
import sys
from datetime import datetime

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.dont_write_bytecode = True  # no bench/__pycache__
import relational  # noqa: E402  (bench/relational.py)
import soak  # noqa: E402  (bench/soak.py)
from harness import floor, freshness, horizontal, report, scaling, services  # noqa: E402
from harness.contenders import ceiling, denormd_run, feed, kstreams, replay, triggers  # noqa: E402
from harness.services import BenchError, log  # noqa: E402
from harness.store import SCHEMAS, drop_schema  # noqa: E402
from harness.workload import GEN_DEFAULTS, Workload, workload  # noqa: E402


def stop_on_sigterm(signum, frame):
    """SIGTERM (and SIGINT where the shell started the run with it ignored, as a background
    job's) ends the run as Ctrl-C does: every daemon, producer and service it started is
    stopped by the `finally` blocks on the way out, not left running."""
    raise KeyboardInterrupt


def main():
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, stop_on_sigterm)
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
    g.add_argument("--max-lanes", type=int, default=0, metavar="N",
                   help="batch.max_lanes of every denormd (default: bench/config.yaml's, none "
                        "there: denormd's default, 4; 1: one batch at a time, as before lanes)")
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
    g.add_argument("--relational-batch-events", type=int, metavar="N",
                   help="the relational path's batch.max_events (default: bench/config.yaml's, "
                        "as the native contenders): a batch counts change records, and a "
                        "logical change is 1.28 of them on average, so N = 6400 gives its "
                        "batches the native batches' logical changes; shown in the results")
    g.add_argument("--horizontal", default="1,2,4", metavar="N,N,...",
                   type=horizontal.instance_counts,
                   help="`denormd run` with N instances in one consumer group on one store, for "
                        "each N (1 to 4, the topic's partitions): events/s, the share of batch "
                        "time waiting for locks or in busy retries, documents checked "
                        "(bench/harness/horizontal.py; default 1,2,4; '' or --skip-kafka: skip)")
    g.add_argument("--horizontal-keys", default="entity", metavar="K,K,...",
                   type=horizontal.keyings,
                   help="how the horizontal run's records are keyed, each a run of every "
                        "count: entity (type:id, as denormd publish does; the default) and "
                        "post (a comment by its post, so that one instance gets most of a "
                        "post's comments; on 2026-11-28 it did not lower the wait share)")
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
    g.add_argument("--freshness-send-ms", type=float, default=5, metavar="MS",
                   help="the rate producers (freshness, the feed's delay, the Kafka Streams "
                        "peer's freshness) send what has become due every MS milliseconds, "
                        "each record stamped with the moment it became due (default 5, "
                        "librdkafka's linger.ms; 0: a request whenever a record becomes due, "
                        "as before 2026-11-28)")
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
    g.add_argument("--soak-send-ms", type=float, default=soak.SEND_MS, metavar="MS",
                   help="the soak's producer sends what has become due every MS milliseconds, "
                        "each record stamped with the moment it became due (default %(default)s; the "
                        "broker shares this machine's cores: a request whenever a record became "
                        "due, as before 2026-11-28, took it half a core)")
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
        args.horizontal = []
    run_stamp = datetime.now().strftime("%Y%m%d%H%M%S")
    if args.results is None:
        args.results = (os.path.join(BENCH, "results", "latest.md") if args.record else
                        os.path.join(os.path.abspath(args.state_dir), "results", f"run-{run_stamp}.md"))

    env = services.Env(args)
    started = []
    results = {"contenders": {}, "notes": []}
    sizes = {k: getattr(args, k) for k in GEN_DEFAULTS}
    run_id = run_stamp
    code = 0
    w = None  # the workload, once generated
    try:
        services.preflight(env, args)
        services.build(env, args)
        if not args.skip_kafka and not args.skip_kstreams:
            kstreams.build(env, args)
        services.start(env, args, started)
        results["pg_version"] = services.pg_version(env)
        w = Workload(workload(env, sizes, args.changes, args.seed, "main"), sizes)
        small_dir = None
        if args.scale_small > 0:
            small = {k: max(1, round(v * args.scale_small)) for k, v in sizes.items()}
            small_dir = workload(env, small, args.changes, args.seed, "scaling", scaling.SMALL_ID_PREFIX)
        for s in SCHEMAS.values():
            drop_schema(env, s)

        ceiling.Ceiling(env, results, w).measure()
        clones = [SCHEMAS["ref"]] + ([] if args.skip_kafka else [SCHEMAS["run"]]) + \
            ([] if args.skip_kafka or args.skip_feed else [SCHEMAS["feed"]]) + \
            ([] if args.skip_kafka or not args.horizontal else [SCHEMAS["horizontal_base"]]) + \
            ([] if args.skip_floor else [SCHEMAS["floor"]])
        reference = replay.Replay(env, results, w, clones)
        reference.measure()
        configs = reference.configs
        ref = {"at": 0, "config": configs[SCHEMAS["ref"]]}
        if not args.skip_kafka:
            denormd_run.DenormdRun(env, results, w, run_id).measure()
            drop_schema(env, SCHEMAS["run"])
        if not args.skip_kafka and args.horizontal:
            horizontal.measure(env, results, w, run_id)
        if not args.skip_kafka and not args.skip_relational:
            relational.Relational(env, results, w, ref, run_id).measure()
            drop_schema(env, SCHEMAS["relational"])
        if not args.skip_kafka and not args.skip_feed:
            feed.Feed(env, results, w, run_id).measure()
            drop_schema(env, SCHEMAS["feed"])
        if not args.skip_kafka and not args.skip_kstreams:
            kstreams.KafkaStreams(env, results, w, run_id).measure()  # a failure is reported
        if not args.skip_triggers:
            triggers.measure(env, results, w, ref)
        if not args.skip_kafka and not args.soak_minutes:
            freshness.measure(env, results, w.changes, w.n_changes, sizes, ref, run_id)
        if small_dir:
            scaling.measure(env, results, small_dir, w.n_changes)
        if not args.skip_floor:  # last: its writes and WAL come after every timed daemon run
            floor.measure(env, results, w.changes, w.n_changes, configs[SCHEMAS["floor"]])
            drop_schema(env, SCHEMAS["floor"])
        if args.soak_minutes:
            soak.run(env, results, w.changes, w.n_changes, sizes, ref, run_id, w.dir)
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
            services.stop_services(env, started)
    if code == 0 or results["contenders"]:
        report.write(results, args, w, code)
    return code


if __name__ == "__main__":
    sys.exit(main())
