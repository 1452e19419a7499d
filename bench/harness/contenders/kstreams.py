"""The Kafka Streams peer (bench/peers/kstreams): the same projections as a Kafka Streams 4.1
application, built with Maven, run as one JVM through LOAD, CHANGES and its freshness on its
own 4-partition topic; its output topics read back into a schema and checked."""

import json
import os
import re
import shlex
import shutil
import subprocess
import time

from . import Contender
from ..daemon import produce
from ..freshness import default_freshness_rate, new_events
from ..services import BENCH, REPO, BenchError, fmt_count, log, terminate
from ..store import COLLECTIONS, COPY_OPTS, SCHEMAS, check, checkpoint, drop_schema, mark_schema

KSTREAMS_DIR = os.path.join(BENCH, "peers", "kstreams")


def build(env, args):
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


def java(env, main, *args, heap=("-Xmx256m",)):
    cp = os.path.join(KSTREAMS_DIR, "target", "denormd-kstreams.jar") + os.pathsep + \
        os.path.join(KSTREAMS_DIR, "target", "lib", "*")
    return ["java", *heap, "-cp", cp, f"denormd.kstreams.{main}", *args]


def tool(env, *args):
    return env.run(java(env, "Tools", *args, heap=("-Xmx256m", "-XX:+UseSerialGC",
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
        cmd = java(env, "App", "--bootstrap", env.brokers, "--input", ks["topic"],
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
        rusage = terminate(self.proc)
        if rusage is not None:
            self.rss_kib = rusage.ru_maxrss
            self.cpu_seconds = rusage.ru_utime + rusage.ru_stime
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


def wait_caught_up(env, app):
    """Runs Tools lag until the application's committed offsets reach the end offsets of its
    input and of every internal topic it consumes; returns that moment (epoch seconds)."""
    args = env.args
    cmd = java(env, "Tools", "lag", "--bootstrap", env.brokers, "--group", app.ks["app_id"],
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


def fill(env, ks, phase, path, n):
    log(f"Kafka Streams: {phase}: filling {ks['topic']} with {fmt_count(n)} events (untimed)")
    out = tool(env, "fill", "--bootstrap", env.brokers, "--topic", ks["topic"], path)
    log(f"Kafka Streams: {phase}: {out.strip()}")


def phase_result(app, phase, n, start, done, cpu0):
    cpu = app.cpu()
    r = {"events": n, "seconds": done - start, "rate": n / (done - start),
         "cpu_seconds": cpu - cpu0 if cpu is not None and cpu0 is not None else None}
    log(f"Kafka Streams: {phase}: {r['seconds']:.1f} s, {r['rate']:,.0f} events/s, "
        f"{r['cpu_seconds'] or 0:.1f} s CPU")
    return r


class KafkaStreams(Contender):
    """The Kafka Streams peer, one JVM through three phases on one 4-partition topic:
    LOAD (topic pre-filled, timed from RUNNING), CHANGES (filled while paused, timed from
    resume), each until every input and internal offset is committed; its documents read
    back and checked; then freshness at denormd's freshness rate on new events."""

    key = "kstreams"

    def __init__(self, env, results, w, run_id):
        super().__init__(env, results, w)
        self.run_id = run_id
        self.ks = {"topic": f"bench.kstreams.{run_id}", "prefix": f"bench.kstreams.{run_id}.out",
                   "app_id": f"denormd-bench-kstreams-{run_id}",
                   "state_dir": os.path.join(env.work, f"kstreams-state-{run_id}")}
        self.app = None  # the JVM, from load() on

    def load(self):
        env, args, ks, load, n_load = self.env, self.args, self.ks, self.w.load, self.w.n_load
        r = self.result()
        r["settings"] = {"threads": args.kstreams_threads, "commit_interval_ms": args.kstreams_commit_ms,
                         "cache_mib": args.kstreams_cache_mib, "rocksdb_mib": args.kstreams_rocksdb_mib,
                         "heap": args.kstreams_heap}
        shutil.rmtree(ks["state_dir"], ignore_errors=True)
        tool(env, "setup", "--bootstrap", env.brokers, "--input", ks["topic"], "--partitions", "4",
             "--output-prefix", ks["prefix"])
        fill(env, ks, "load", load, n_load)
        checkpoint(env)
        self.app = app = KStreamsApp(env, ks, self.run_id)
        running = app.wait_running()
        r["startup_seconds"] = running - app.started
        log(f"Kafka Streams: load: RUNNING {r['startup_seconds']:.1f} s after start; consuming")
        cpu0 = app.cpu()
        r["load"] = phase_result(app, "load", n_load, running, wait_caught_up(env, app), cpu0)

    def changes(self):
        env, ks, app, changes, n_changes = self.env, self.ks, self.app, self.w.changes, self.w.n_changes
        r = self.result()
        app.command("pause")
        fill(env, ks, "changes", changes, n_changes)
        checkpoint(env)
        cpu0 = app.cpu()
        resumed = app.command("resume")
        r["changes"] = phase_result(app, "changes", n_changes, resumed, wait_caught_up(env, app), cpu0)
        app.command("pause")

    def documents(self):
        """Reads every output key's final value back (Tools dump) into a schema, and compares it
        with denormd's documents like every contender's."""
        env, results, ks = self.env, self.results, self.ks
        reference, label = SCHEMAS["replay"], "Kafka Streams after load + all changes"
        d = os.path.join(env.work, f"kstreams-dump-{ks['app_id']}")
        shutil.rmtree(d, ignore_errors=True)
        log("Kafka Streams: reading the output topics back (read_committed, last value per key)")
        tool(env, "dump", "--bootstrap", env.brokers, "--output-prefix", ks["prefix"], "--dir", d)
        schema = SCHEMAS["kstreams"]
        drop_schema(env, schema)
        env.psql(f'create schema "{schema}"')
        mark_schema(env, schema)
        stmts = []
        for c in COLLECTIONS:
            stmts.append(f'create table "{schema}"."{c}" (id text collate "C" primary key, '
                         'doc jsonb not null);')
            stmts.append(f"\\copy \"{schema}\".\"{c}\" from '{os.path.join(d, c + '.tsv')}' {COPY_OPTS}")
        sql = os.path.join(env.work, "kstreams-load-dump.sql")
        with open(sql, "w") as f:
            f.write("\n".join(stmts) + "\n")
        env.psql(file=sql, what="load the Kafka Streams documents")
        total = check(env, "kstreams", results, schema, reference, label)
        drop_schema(env, schema)
        shutil.rmtree(d, ignore_errors=True)
        return total

    def freshness(self):
        """The peer at denormd's freshness rate for --freshness-seconds, on new events: the
        generator's stream continued past changes.jsonl (the peer has applied all of it)."""
        env, results, app = self.env, self.results, self.app
        args = env.args
        ks, r = app.ks, results["contenders"]["kstreams"]
        rate = default_freshness_rate(env, results)
        if not rate:
            log("Kafka Streams freshness: no denormd run rate and no --freshness-rate: skipped")
            return
        lines = new_events(env, self.w, rate, "Kafka Streams freshness")
        fr = r["freshness"] = {"rate": rate, "seconds": args.freshness_seconds}
        fresh = subprocess.Popen(
            java(env, "Tools", "fresh", "--bootstrap", env.brokers, "--output-prefix", ks["prefix"],
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
            sent, elapsed, lag = produce(env, ks["topic"], lines, rate, args.freshness_seconds,
                                         lambda: app.proc.poll() is not None, partitioner="murmur2")
            produced = time.time()
            fr.update({"sent": sent, "elapsed": elapsed, "producer_max_lag": lag})
            fr["caught_up_after_seconds"] = wait_caught_up(env, app) - produced
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

    def measure(self):
        """A failure is reported (results, notes), and the other contenders go on."""
        try:
            self.run()
        except BenchError as e:
            log(f"Kafka Streams: failed: {e}")
            self.result()["failed"] = str(e)[:2000]
            self.results["notes"].append("Kafka Streams peer failed (its output and state are in "
                                         f"{os.path.relpath(self.env.work, REPO)}): "
                                         + str(e).splitlines()[0])

    def run(self):
        env, args, ks = self.env, self.args, self.ks
        r = self.result()
        try:
            self.load()
            self.changes()
            self.documents()
            if not r.get("wrong"):
                self.freshness()
        finally:
            rss = self.app.stop() if self.app is not None else None
        r["rss_kib"] = rss
        r["cpu_seconds"] = self.app.cpu_seconds
        r["state_disk_bytes"], r["state_apparent_bytes"] = dir_bytes(ks["state_dir"])
        r["command"] = ks.get("command")
        log(f"Kafka Streams: peak RSS {(rss or 0) // 1024} MiB, state stores "
            f"{r['state_disk_bytes'] / 2**20:,.0f} MiB on disk")
        if not args.keep_services:
            shutil.rmtree(ks["state_dir"], ignore_errors=True)
            # Its ~30 topics (input, outputs, repartition, subscription, changelogs: 4 partitions
            # each) would otherwise pile up run after run and slow the broker's start-up.
            out = tool(env, "cleanup", "--bootstrap", env.brokers, "--group", ks["app_id"],
                       "--prefix", ks["topic"])
            log(f"Kafka Streams: {out.strip()} of this run")
