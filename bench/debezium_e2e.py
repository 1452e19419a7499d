#!/usr/bin/env python3
"""From SQL statements to documents through the real Kafka Connect + Debezium (issue 26,
point 4): the benchmark's workload as rows of relational tables in an application
PostgreSQL, captured by the Debezium PostgreSQL connector in a Kafka Connect worker,
turned into documents by `denormd run`; its throughput and its commit-to-document delay,
measured from the SQL client.

What runs, each on its own state dir and ports (default --state-dir .local/bench-e2e):

  store PostgreSQL        scripts/postgres.sh, port 15450: denormd's documents
  application PostgreSQL  scripts/postgres.sh, port 15451, wal_level=logical, state in
                          STATE_DIR/app: tables authors, books, book_authors, posts, comments
  Kafka                   scripts/kafka.sh, port 19250 (and 19251, its controller)
  Kafka Connect           scripts/connect.sh, REST 18090: the Debezium PostgreSQL connector
                          (pgoutput, snapshot.mode=initial, JsonConverter with schemas as
                          connect.sh sets them), topics PREFIX.public.TABLE
  denormd run             build/denormd (a copy taken at start), bench/config.yaml rewritten
                          by bench/relational.py for the join table (`through`), /metrics on
                          18091

The tables and the translation are bench/relational.py's (its Translator): every native
event of bench/generate_workload.py's workload (load.jsonl, changes.jsonl) becomes the row
changes PostgreSQL would log for it, c/u/d with their rows. This script reads those change
records (the Translator's output, parsed back) and turns them into SQL:

  LOAD     the final rows of load.jsonl, COPY'd into the tables before the connector
           starts (Debezium then snapshots them: `r` records)
  CHANGES  one transaction per logical change (one native event): INSERT of a `c` row,
           UPDATE of every column by primary key for a `u`, DELETE by primary key for a `d`
           (book_authors has ON DELETE CASCADE from books, as relational.py assumes; the
           explicit deletes of a deleted book's rows then find nothing)

The phases:

  1. snapshot    Connect starts on the loaded tables (a new slot: a snapshot), denormd run
                 starts on the snapshot's topics; until denormd's positions count every row.
  2. throughput  every CHANGES transaction sent by one client (one connection, one simple
                 query `BEGIN; ...; COMMIT` per transaction, back to back), then a marker
                 transaction inserting one row in each of the five tables. Timed from the
                 client's first send until the marker's effects are in the documents (a
                 document per topic: the marker is the last record of every topic, each of
                 which denormd commits in order); the SQL apply rate is timed apart (first
                 send to the last COMMIT returned). The marker rows are deleted afterwards.
  3. check       the documents against denormd replay of the native workload into another
                 schema (the reference relational.py's path is checked against: the same four
                 collections, jsonb equality, post_comments by content, bench/harness/store.py's
                 compare_documents). A difference prints WRONG and no figures.
  4. delay       the change stream continued past changes.jsonl (the generator, same seed),
                 at --delay-fraction (20 %) of phase 2's end-to-end rate for --delay-seconds,
                 with probe transactions every --probe-interval between them: alternately an
                 UPDATE of a probe author's lastName (topic authors) and an INSERT of a
                 comment on a probe post (topic comments, the busy one). A poller on its own
                 connection reads the two probe documents every --poll-interval (5 ms): a
                 probe's delay is from its COMMIT returning in the client to the first poll
                 reply showing it (or a later probe of the same document). p50/p99/max over
                 the probes; the daemon's own denormd_event_age_seconds over the same phase
                 beside it (from the Kafka record timestamp, set when Connect produced the
                 record, to denormd's commit: it leaves out WAL -> Debezium -> producer).
                 Then the probe rows are deleted, and the documents are checked again
                 against the reference advanced by the continued stream.

What bounded the run: the SQL apply rate beside the end-to-end rate, the same transactions
committed by the same client on a copy of the tables before the connector exists (what the
client does alone), and CPU seconds of each component over phases 2 and 4 from /proc
(denormd, the Connect JVM, the broker JVM, each PostgreSQL cluster with its backends, this
client, the rest of the machine named by its largest consumers, interrupts). Peak RSS: the
kernel's high-water mark (VmHWM) of denormd and of the JVMs, at the end of each phase.
Not wait4's ru_maxrss: Linux carries maxrss across exec, so a child of this process starts
at this process's resident set (the translated workload).

Everything it started is stopped at the end, also on Ctrl-C or an error (--keep-services
leaves the services running; a service already running on its state dir is reused and
left running). The table goes to stdout and, with the command, date and machine, to
STATE_DIR/results/e2e-<date>.md (the raw figures beside it as .json). Progress on stderr.

Examples:
  bench/debezium_e2e.py                           # the default size (bench/run.py's)
  bench/debezium_e2e.py --authors 50 --books 500 --posts 10 --comments 2000 --changes 500 \\
      --delay-seconds 10
"""

import argparse
import fcntl
import hashlib
import json
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.dont_write_bytecode = True  # no bench/__pycache__
import relational  # noqa: E402  (bench/relational.py: the tables and the Translator)
from cpu_by_process import TICK, proc_table  # noqa: E402
from harness.daemon import Daemon, histogram, metric_value, quantile  # noqa: E402
from harness.services import BenchError, Env, machine, pg_version, port_open  # noqa: E402
from harness.store import compare_documents, vacuum_analyze, write_config  # noqa: E402
from harness.workload import GEN_DEFAULTS, count_lines, read_lines  # noqa: E402

SCHEMA = "bench_e2e"          # the documents of the Debezium path
REF_SCHEMA = "bench_e2e_ref"  # denormd replay of the native workload
MARK = "zz-e2e"               # ids of the harness's own rows (markers, probes)
APP_DB = "app"
T0 = time.time()


def log(msg):
    m, s = divmod(int(time.time() - T0), 60)
    print(f"[e2e {m:02d}:{s:02d}] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------
# A minimal PostgreSQL client (protocol 3, simple query, trust authentication)
# ----------------------------------------------------------------------------

class PgConn:
    """One connection, one simple query at a time: query() sends it and returns the rows
    (text values, None for NULL) once the server is ready again, i.e. after a COMMIT in it
    has returned. psql per statement would add a process start to each."""

    def __init__(self, port, db, host="127.0.0.1", user="postgres"):
        self.sock = socket.create_connection((host, port), timeout=120)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rf = self.sock.makefile("rb", buffering=1 << 16)
        params = b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in (
            ("user", user), ("database", db), ("application_name", "debezium_e2e"),
            ("client_encoding", "UTF8"))) + b"\0"
        body = struct.pack("!i", 196608) + params
        self.sock.sendall(struct.pack("!i", len(body) + 4) + body)
        self._until_ready()

    def _until_ready(self):
        rows, err = [], None
        while True:
            head = self.rf.read(5)
            if len(head) < 5:
                raise BenchError("PostgreSQL closed the connection" + (f": {err}" if err else ""))
            kind, n = head[:1], struct.unpack("!i", head[1:])[0]
            body = self.rf.read(n - 4)
            if kind == b"D":
                cols, pos, row = struct.unpack("!h", body[:2])[0], 2, []
                for _ in range(cols):
                    ln = struct.unpack("!i", body[pos:pos + 4])[0]
                    pos += 4
                    if ln < 0:
                        row.append(None)
                    else:
                        row.append(body[pos:pos + ln].decode())
                        pos += ln
                rows.append(row)
            elif kind == b"R":
                code = struct.unpack("!i", body[:4])[0]
                if code != 0:
                    raise BenchError(f"PostgreSQL asks for authentication (code {code}); this "
                                     "client does trust authentication only")
            elif kind == b"E":
                f = {x[:1]: x[1:].decode(errors="replace") for x in body.split(b"\0") if x}
                err = f"{f.get(b'S', 'ERROR')}: {f.get(b'M', '')}" + (
                    f" ({f[b'D']})" if b"D" in f else "")
            elif kind == b"Z":
                if err:
                    raise BenchError(err)
                return rows
            # S (parameter), K (key data), T (row description), C (complete), N (notice),
            # I (empty query): nothing to keep

    def query(self, sql):
        data = sql.encode() + b"\0"
        self.sock.sendall(b"Q" + struct.pack("!i", len(data) + 4) + data)
        return self._until_ready()

    def close(self):
        try:
            self.sock.sendall(b"X" + struct.pack("!i", 4))
        except OSError:
            pass
        self.sock.close()


# ----------------------------------------------------------------------------
# Rows and SQL from the Translator's change records
# ----------------------------------------------------------------------------

def ident(name):
    return '"' + name.replace('"', '""') + '"'


def literal(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    raise BenchError(f"no SQL literal for {v!r}")


def columns(table):
    _, keys, cols = relational.TABLES[table]
    return keys, cols


def change_of(record):
    """(table, op, key dict, after row or None) of one of the Translator's records."""
    table, key, value = record
    v = json.loads(value)
    if "payload" in v and "op" not in v:
        v = v["payload"]
    return table, v["op"], json.loads(key), v.get("after")


def sql_of(change):
    """One statement for one row change."""
    table, op, key, after = change
    keys, cols = columns(table)
    where = " and ".join(f"{ident(k)} = {literal(key[k])}" for k in keys)
    if op in ("c", "r"):
        names = keys + cols
        return (f"insert into {ident(table)} ({', '.join(ident(c) for c in names)}) values "
                f"({', '.join(literal(after.get(c)) for c in names)})")
    if op == "u":
        return (f"update {ident(table)} set "
                + ", ".join(f"{ident(c)} = {literal(after.get(c))}" for c in cols)
                + f" where {where}")
    if op == "d":
        return f"delete from {ident(table)} where {where}"
    raise BenchError(f"{table}: no SQL for op {op!r}")


def translate_file(tr, path, snapshot):
    """[[change, ...] per logical change] of a JSON Lines log (the Translator's state goes on)."""
    out = []
    tr.snapshot = snapshot
    try:
        with open(path) as f:
            for line in f:
                if line.strip():
                    out.append([change_of(r) for r in tr.translate(json.loads(line))])
    finally:
        tr.snapshot = False
    return out


def translate_lines(tr, lines):
    return [[change_of(r) for r in tr.translate(json.loads(line))] for line in lines]


def final_rows(groups):
    """{table: {key tuple: row}}: the rows the changes leave, applied in order."""
    state = {t: {} for t in relational.TABLES}
    for group in groups:
        for table, op, key, after in group:
            keys, _ = columns(table)
            k = tuple(key[c] for c in keys)
            if op == "d":
                state[table].pop(k, None)
            else:
                state[table][k] = after
    return state


def transactions(groups):
    """One SQL text per logical change (None when it changes no row)."""
    return [("begin; " + "; ".join(sql_of(c) for c in g) + "; commit") if g else None
            for g in groups]


SCHEMA_SQL = """set client_min_messages = warning;
drop publication if exists denormd_app;
drop table if exists comments, posts, book_authors, books, authors cascade;
create table authors (id text primary key, "firstName" text, "lastName" text, images json);
create table books (id text primary key, name text, "pubYear" integer);
create table book_authors (
  book_id text not null references books (id) on delete cascade,
  author_id text not null references authors (id),
  position integer not null,
  primary key (book_id, author_id));
create table posts (id text primary key, name text, summary text);
create table comments (id text primary key, "postId" text, author text, comment text,
  "createdAt" bigint);
"""
LOAD_ORDER = ["authors", "books", "book_authors", "posts", "comments"]  # foreign keys


def copy_text(v):
    if v is None:
        return "\\N"
    s = v if isinstance(v, str) else ("true" if v is True else "false" if v is False else str(v))
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def write_load(work, state):
    """A psql script: the schema, then COPY of every table's rows; returns (path, rows)."""
    lines, n = [SCHEMA_SQL], {}
    for table in LOAD_ORDER:
        keys, cols = columns(table)
        names = keys + cols
        path = os.path.join(work, f"load-{table}.tsv")
        with open(path, "w") as f:
            for row in state[table].values():
                f.write("\t".join(copy_text(row.get(c)) for c in names) + "\n")
        n[table] = len(state[table])
        lines.append(f"\\copy {ident(table)} ({', '.join(ident(c) for c in names)}) from "
                     f"'{path}'")
    lines.append("analyze;")
    path = os.path.join(work, "load.sql")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path, n


# ----------------------------------------------------------------------------
# Services
# ----------------------------------------------------------------------------

class Services:
    """The store and application PostgreSQL, Kafka and Connect of this state dir; stop()
    stops those this run started."""

    def __init__(self, args, env):
        self.args, self.env = args, env
        self.state = env.state_dir
        self.app_state = os.path.join(self.state, "app")
        self.started = []
        base = dict(env.env)
        self.envs = {
            "postgres": base,
            "kafka": base,
            "app": dict(base, DENORMD_STATE_DIR=self.app_state, DENORMD_PG_PORT=str(args.app_pg_port),
                        DENORMD_PG_DB=APP_DB, DENORMD_PG_WAL_LEVEL="logical"),
            "connect": dict(base, DENORMD_CONNECT_PORT=str(args.connect_port),
                            DENORMD_CONNECT_BOOTSTRAP=env.brokers,
                            DENORMD_CONNECT_DB_PORT=str(args.app_pg_port),
                            DENORMD_CONNECT_DB_NAME=APP_DB,
                            DENORMD_CONNECT_TOPIC_PREFIX=args.topic_prefix,
                            DENORMD_CONNECT_SCHEMAS_ENABLE=args.schemas_enable),
        }
        self.scripts = {"postgres": "postgres.sh", "app": "postgres.sh", "kafka": "kafka.sh",
                        "connect": "connect.sh"}

    def script(self, name, *cmd, check=True, what=None):
        argv = [os.path.join(REPO, "scripts", self.scripts[name])] + list(cmd)
        p = subprocess.run(argv, env=self.envs[name], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=REPO)
        if check and p.returncode != 0:
            raise BenchError(f"{what or shlex.join(argv[-len(cmd) - 1:])} failed (exit "
                             f"{p.returncode}):\n{p.stderr[-3000:]}{p.stdout[-1000:]}")
        return p

    def running(self, name):
        return self.script(name, "status", check=False).returncode == 0

    def preflight(self):
        """Every port free or served by this state dir's own service."""
        a = self.args
        busy = []
        for name, ports, flag in (("postgres", [a.pg_port], "--pg-port"),
                                  ("app", [a.app_pg_port], "--app-pg-port"),
                                  ("kafka", [a.kafka_port, a.kafka_port + 1], "--kafka-port"),
                                  ("connect", [a.connect_port], "--connect-port")):
            if self.running(name):
                continue
            busy += [f"{p} ({flag})" for p in ports if port_open(p)]
        if port_open(a.metrics_port):
            busy.append(f"{a.metrics_port} (--metrics-port)")
        if busy:
            raise BenchError("port(s) " + ", ".join(busy) + " already in use by another "
                             "process. Nothing was started; pass free ports.")

    def start(self, name, what):
        was = self.running(name)
        if name == "kafka" and not was:
            # A broker of this state dir only: its topics of earlier runs go.
            shutil.rmtree(os.path.join(self.state, "kafka", "data"), ignore_errors=True)
        log(f"starting {what}" + (" (already running: reused)" if was else ""))
        if not was:
            self.started.append(name)  # stopped at the end, also when its start fails half-way
        self.script(name, "start")

    def stop(self):
        for name in reversed(self.started):
            log(f"stopping {name}")
            p = self.script(name, "stop", check=False)
            if p.returncode != 0:
                log(f"  {name} stop: exit {p.returncode}: {p.stderr.strip()[-500:]}")
        self.started = []

    def pid(self, name):
        path = {"connect": os.path.join(self.state, "connect", "connect.pid"),
                "kafka": os.path.join(self.state, "kafka", "kafka.pid"),
                "postgres": os.path.join(self.state, "postgres", "postmaster.pid"),
                "app": os.path.join(self.app_state, "postgres", "postmaster.pid")}[name]
        try:
            with open(path) as f:
                return int(f.readline().strip())
        except (OSError, ValueError):
            return None


def check_owned(port, db, state):
    """The PostgreSQL on port must serve STATE/postgres: nothing else is ever dropped."""
    want = os.path.realpath(os.path.join(state, "postgres"))
    c = PgConn(port, db)
    try:
        got = c.query("show data_directory")[0][0]
    finally:
        c.close()
    if os.path.realpath(got) != want:
        raise BenchError(f"the PostgreSQL on port {port} serves {got}, not {want}: not touching it")


# ----------------------------------------------------------------------------
# /proc: CPU and memory
# ----------------------------------------------------------------------------

def stat_line():
    """(user + nice + system, irq + softirq + steal) CPU seconds of the whole machine."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2]) / TICK, (v[5] + v[6] + v[7]) / TICK


def vm_kib(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, TypeError):
        pass
    return None


def vm_hwm_kib(pid):
    return vm_kib(pid, "VmHWM")


def self_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


OTHERS, IRQ = "other processes on the machine", "interrupts (irq, softirq)"


class CpuMeter:
    """CPU seconds per component over a phase, from /proc: a process's own time, plus for a
    PostgreSQL cluster its postmaster's reaped children and its live backends; the machine's
    busy time (/proc/stat) less all of those is what other processes used (named by their
    largest consumers); interrupt time (the loopback network, the disks) apart."""

    def __init__(self, svc, daemon):
        self.pids = {"denormd": daemon.proc.pid, "Kafka Connect (JVM)": svc.pid("connect"),
                     "Kafka broker (JVM)": svc.pid("kafka"),
                     "application PostgreSQL": svc.pid("app"), "store PostgreSQL": svc.pid("postgres")}
        self.trees = {"application PostgreSQL", "store PostgreSQL"}

    def read(self):
        procs = proc_table()
        out, mine = {}, {os.getpid()}
        for k, pid in self.pids.items():
            if pid is None or pid not in procs:
                out[k] = None
                continue
            mine.add(pid)
            _, _, own, reaped = procs[pid]
            total = own + (reaped if k in self.trees else 0.0)
            if k in self.trees:
                for cpid, (_, ppid, cown, _) in procs.items():
                    if ppid == pid:
                        total += cown
                        mine.add(cpid)
            out[k] = total
        out["this client (Python)"] = self_cpu()
        return {"components": out, "machine": stat_line(), "procs": procs, "mine": mine}

    @staticmethod
    def delta(a, b):
        d = {k: (v - a["components"][k]) if v is not None and a["components"].get(k) is not None
             else None for k, v in b["components"].items()}
        busy = b["machine"][0] - a["machine"][0]
        d[OTHERS] = max(0.0, busy - sum(v for v in d.values() if v is not None))
        d[IRQ] = b["machine"][1] - a["machine"][1]
        by_name = {}
        for pid, (name, _, own, reaped) in b["procs"].items():
            if pid in b["mine"] or pid in a["mine"]:
                continue
            before = a["procs"].get(pid)
            x = own + reaped - ((before[2] + before[3]) if before and before[0] == name else 0.0)
            if x > 0.05:
                by_name[name] = by_name.get(name, 0.0) + x
        top = sorted(by_name.items(), key=lambda kv: -kv[1])[:4]
        return d, [(n, round(x, 1)) for n, x in top]


class RssSampler(threading.Thread):
    """Every 0.5 s, the resident set of denormd and of the Connect JVM; the largest per phase.
    And each one's high-water mark (VmHWM, exact) when a phase ends: the phase whose mark is
    above the previous one's is where the peak was, even a peak shorter than 0.5 s."""

    def __init__(self):
        super().__init__(daemon=True)
        self.pids, self.phase, self.peak, self.hwm = {}, "start", {}, {}
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(0.5):
            for name, pid in list(self.pids.items()):
                v = vm_kib(pid, "VmRSS")
                if v:
                    key = (self.phase, name)
                    self.peak[key] = max(self.peak.get(key, 0), v)

    def set_phase(self, phase):
        for name, pid in list(self.pids.items()):
            v = vm_kib(pid, "VmHWM")
            if v:
                self.hwm[(self.phase, name)] = v
        self.phase = phase


# ----------------------------------------------------------------------------
# Workload (bench/run.py's cache layout; its cache is reused read-only)
# ----------------------------------------------------------------------------

def workload(args, sizes, changes):
    gen = os.path.join(BENCH, "generate_workload.py")
    gen_hash = hashlib.sha256(open(gen, "rb").read()).hexdigest()[:16]
    params = dict(sizes, changes=changes, seed=args.seed)
    name = "a{authors}-b{books}-p{posts}-c{comments}-ch{changes}-s{seed}".format(**params)
    manifest = dict(params, generator_sha256=gen_hash)
    for root in (args.out, os.path.join(REPO, ".local", "bench", "workload")):
        d = os.path.join(os.path.abspath(root), name)
        try:
            if json.load(open(os.path.join(d, "manifest.json"))) == manifest and all(
                    os.path.exists(os.path.join(d, f)) for f in ("load.jsonl", "changes.jsonl")):
                log(f"workload: reusing {os.path.relpath(d, REPO)}")
                return d
        except (OSError, ValueError):
            pass
    d = os.path.join(os.path.abspath(args.out), name)
    log(f"workload: generating {os.path.relpath(d, REPO)}")
    if os.path.exists(os.path.join(d, "manifest.json")):
        os.remove(os.path.join(d, "manifest.json"))
    cmd = [sys.executable, gen, "--out", d, "--changes", str(changes), "--seed", str(args.seed)]
    for k in GEN_DEFAULTS:
        cmd += [f"--{k}", str(sizes[k])]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise BenchError(f"generate_workload.py failed: {p.stderr[-2000:]}")
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return d


def continued_lines(args, sizes, changes_path, n_changes, count):
    """The change stream's lines [n_changes, n_changes + count): a longer stream of the same
    seed starts with changes.jsonl (checked on its last line)."""
    extra = -(-count // 10_000) * 10_000
    longer = os.path.join(workload(args, sizes, n_changes + extra), "changes.jsonl")
    if read_lines(longer, n_changes - 1, n_changes) != \
            read_lines(changes_path, n_changes - 1, n_changes):
        raise BenchError("the continued change stream does not extend changes.jsonl (generator?)")
    return read_lines(longer, n_changes, n_changes + count)


# ----------------------------------------------------------------------------
# Waiting for documents
# ----------------------------------------------------------------------------

def q(schema, table):
    return f'"{schema}".{ident(table)}'


def marker_rows(n):
    m = f"{MARK}-m{n}"
    return {"author": m + "-a", "book": m + "-b", "post": m + "-p", "comment": m + "-c"}


def marker_insert_sql(n):
    r = marker_rows(n)
    return ("begin; "
            f"insert into authors (id, \"firstName\", \"lastName\") values ('{r['author']}', 'm', 'm'); "
            f"insert into books (id, name, \"pubYear\") values ('{r['book']}', 'm', 0); "
            f"insert into book_authors (book_id, author_id, position) values "
            f"('{r['book']}', '{r['author']}', 0); "
            f"insert into posts (id, name, summary) values ('{r['post']}', 'm', 'm'); "
            f"insert into comments (id, \"postId\", author, comment, \"createdAt\") values "
            f"('{r['comment']}', '{r['post']}', 'm', 'm', 0); commit")


def marker_delete_sql(n):
    r = marker_rows(n)
    return ("begin; "
            f"delete from comments where id = '{r['comment']}'; "
            f"delete from posts where id = '{r['post']}'; "
            f"delete from books where id = '{r['book']}'; "  # and its book_authors row
            f"delete from authors where id = '{r['author']}'; commit")


def marker_seen_sql(n):
    """3 when the marker is in the documents of every topic: the author (authors), the book
    (books) listing it in authorIds (book_authors), the post (posts) counting its comment
    (comments)."""
    r = marker_rows(n)
    return (f"select (select count(*) from {q(SCHEMA, 'authors')} where id = '{r['author']}')"
            f" + (select count(*) from {q(SCHEMA, 'books')} where id = '{r['book']}' and "
            f"doc->'authorIds' = '[\"{r['author']}\"]'::jsonb)"
            f" + (select count(*) from {q(SCHEMA, 'posts')} where id = '{r['post']}' and "
            f"doc->>'countOfComments' = '1')")


def marker_gone_sql(n):
    r = marker_rows(n)
    return (f"select (select count(*) from {q(SCHEMA, 'authors')} where id = '{r['author']}')"
            f" + (select count(*) from {q(SCHEMA, 'books')} where id = '{r['book']}')"
            f" + (select count(*) from {q(SCHEMA, 'posts')} where id = '{r['post']}')"
            f" + (select count(*) from {q(SCHEMA, 'post_comments')} where "
            f"doc->>'postId' = '{r['post']}')")


def wait_value(store, sql, want, daemon, what, positions, stall, poll=0.005):
    """Polls sql on the store connection until it returns want; returns the reply's time.
    Fails when the daemon exits or its positions stop moving for `stall` seconds."""
    last_pos, last_move, next_pos_check = None, time.time(), 0.0
    while True:
        rows = store.query(sql)
        now = time.time()
        if str(rows[0][0]) == str(want):
            return now
        if now >= next_pos_check:
            if not daemon.alive():
                raise BenchError(f"{what}: denormd run exited ({daemon.proc.returncode}):\n"
                                 + daemon.log_text()[-3000:])
            p = positions()
            if p != last_pos:
                last_pos, last_move = p, now
            elif now - last_move > stall:
                raise BenchError(f"{what}: no progress for {stall:.0f} s (positions {p}):\n"
                                 + daemon.log_text()[-3000:])
            next_pos_check = now + 0.5
        time.sleep(poll)


# ----------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------

def hist_delta(before, after):
    b = dict(before)
    return [(le, c - b.get(le, 0)) for le, c in after]


def quantile_exact(xs, q):
    """Nearest-rank quantile of a sorted list."""
    if not xs:
        return None
    i = max(0, min(len(xs) - 1, int(-(-q * len(xs) // 1)) - 1))
    return xs[i]


def ms(x):
    return "—" if x is None else f"{x * 1000:,.0f} ms" if x >= 0.1 else f"{x * 1000:.1f} ms"


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("workload (bench/generate_workload.py, bench/run.py's defaults)")
    for k, v in GEN_DEFAULTS.items():
        g.add_argument(f"--{k}", type=int, default=v, help=f"default {v:,}")
    g.add_argument("--changes", type=int, default=20_000, help="default 20,000")
    g.add_argument("--seed", type=int, default=20261125)
    g.add_argument("--out", default=os.path.join(REPO, ".local", "bench-e2e", "workload"),
                   help="workload cache (default .local/bench-e2e/workload; bench/run.py's "
                        ".local/bench/workload is reused, read-only, when it holds the size)")
    g = p.add_argument_group("the delay phase")
    g.add_argument("--delay-fraction", type=float, default=0.2,
                   help="input rate as a fraction of the measured end-to-end logical changes/s "
                        "(default 0.2)")
    g.add_argument("--delay-rate", type=float, default=0,
                   help="an explicit input rate in logical changes/s instead of the fraction")
    g.add_argument("--delay-seconds", type=float, default=60, help="default 60")
    g.add_argument("--probe-interval", type=float, default=0.1,
                   help="seconds between probe transactions (default 0.1)")
    g.add_argument("--poll-interval", type=float, default=0.005,
                   help="seconds between polls of the probe documents (default 0.005)")
    g = p.add_argument_group("services and output")
    g.add_argument("--state-dir", default=os.path.join(REPO, ".local", "bench-e2e"))
    g.add_argument("--pg-port", type=int, default=15450, help="the store (default 15450)")
    g.add_argument("--app-pg-port", type=int, default=15451,
                   help="the application database, wal_level=logical (default 15451)")
    g.add_argument("--kafka-port", type=int, default=19250,
                   help="default 19250 (the controller takes the next port)")
    g.add_argument("--connect-port", type=int, default=18090, help="Connect's REST (default 18090)")
    g.add_argument("--metrics-port", type=int, default=18091, help="denormd's /metrics (default 18091)")
    g.add_argument("--schemas-enable", choices=["true", "false"], default="true",
                   help="JsonConverter schemas.enable (default true, scripts/connect.sh's)")
    g.add_argument("--stall-seconds", type=float, default=300)
    g.add_argument("--keep-services", action="store_true",
                   help="leave the services running at the end")
    g.add_argument("--results", default=None,
                   help="default STATE_DIR/results/e2e-<date>.md")
    args = p.parse_args()
    stamp = datetime.now().strftime("%Y%m%d%H%M%S")
    args.state_dir = os.path.abspath(args.state_dir)
    args.topic_prefix = f"e2e{stamp}"
    if args.results is None:
        args.results = os.path.join(args.state_dir, "results", f"e2e-{stamp}.md")

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)

    env = Env(argparse.Namespace(state_dir=args.state_dir, pg_port=args.pg_port,
                                 kafka_port=args.kafka_port, seed=args.seed, out=args.out))
    os.makedirs(env.work, exist_ok=True)
    lock = open(os.path.join(args.state_dir, "e2e.lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print(f"e2e: error: another bench/debezium_e2e.py runs with state dir {args.state_dir}",
              file=sys.stderr)
        return 1
    svc = Services(args, env)
    results = {"notes": [], "busy": []}
    code = 0
    conns = []
    try:
        svc.preflight()
        copy = os.path.join(env.work, "denormd")
        shutil.copy2(os.path.join(REPO, "build", "denormd"), copy)
        env.denormd = copy
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        results["commit"] = head.stdout.strip() or "?"
        results["denormd_mtime"] = datetime.fromtimestamp(
            os.path.getmtime(copy), timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        _run(args, env, svc, results, conns)
        if results.get("wrong"):
            code = 2
    except BenchError as e:
        print(f"e2e: error: {e}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        print("e2e: interrupted", file=sys.stderr)
        code = 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the cleanup runs to its end
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for c in conns:
            try:
                c.close()
            except OSError:
                pass
        sampler = results.pop("_rss", None)
        if sampler is not None:
            sampler.done.set()
            sampler.set_phase("stopped")
            results["rss_by_phase"] = {f"{ph} / {name}": kib for (ph, name), kib in sampler.peak.items()}
            results["hwm_by_phase"] = {f"{ph} / {name}": kib for (ph, name), kib in sampler.hwm.items()}
        daemon = results.pop("_daemon", None)
        if daemon is not None:
            # VmHWM, not wait4's ru_maxrss nor the daemon's own peak_rss_kib (getrusage): Linux
            # carries a process's maxrss across exec, so those start at this Python process's
            # resident set when it forked the daemon (hundreds of MiB of translated workload).
            results["denormd_rss_kib"] = vm_hwm_kib(daemon.proc.pid)
            rc = daemon.stop()
            results["denormd_wait4_maxrss_kib"] = daemon.rss_kib
            if rc not in (0, None) and code == 0:
                print(f"e2e: error: denormd run exited {rc} after SIGTERM", file=sys.stderr)
                code = 1
        for name, key in (("connect", "connect_rss_kib"), ("kafka", "kafka_rss_kib")):
            v = vm_hwm_kib(svc.pid(name))
            if v:
                results[key] = v
        if not args.keep_services:
            svc.stop()
    table = report(args, results, code)
    print(table)
    if results.get("throughput") or results.get("wrong"):
        write_results(args, results, table, code)
    return code


def _run(args, env, svc, results, conns):
    sizes = {k: getattr(args, k) for k in GEN_DEFAULTS}
    results["sizes"] = dict(sizes, changes=args.changes)
    wdir = workload(args, sizes, args.changes)
    load_path, changes_path = os.path.join(wdir, "load.jsonl"), os.path.join(wdir, "changes.jsonl")
    n_changes = count_lines(changes_path)

    svc.start("postgres", f"the store PostgreSQL on port {args.pg_port}")
    svc.start("app", f"the application PostgreSQL on port {args.app_pg_port} (wal_level=logical)")
    svc.start("kafka", f"Kafka on port {args.kafka_port}")
    check_owned(args.pg_port, "denorm", env.state_dir)
    check_owned(args.app_pg_port, APP_DB, svc.app_state)
    env.owned = True
    results["pg_version"] = pg_version(env)

    # -- the rows ----------------------------------------------------------------
    log("translating the workload (bench/relational.py's Translator) into rows and SQL")
    tr = relational.Translator()
    load_groups = translate_file(tr, load_path, snapshot=True)
    state = final_rows(load_groups)
    change_groups = translate_file(tr, changes_path, snapshot=False)
    if len(change_groups) != n_changes:
        raise BenchError(f"{len(change_groups)} logical changes translated, {n_changes} lines")
    txs = transactions(change_groups)
    expected_records = sum(len(g) for g in change_groups)
    per_op = {}
    for g in change_groups:
        for c in g:
            per_op[(c[0], c[1])] = per_op.get((c[0], c[1]), 0) + 1
    results["changes"] = {"logical": n_changes, "transactions": sum(1 for t in txs if t),
                          "empty": sum(1 for t in txs if not t), "expected_records": expected_records,
                          "statements": expected_records,
                          "per_table_op": {f"{t} {o}": n for (t, o), n in sorted(per_op.items())}}

    # -- the application database and its snapshot ---------------------------------
    log("stopping Connect if it runs, dropping its slot and offsets (a new snapshot)")
    svc.script("connect", "stop")
    svc.script("connect", "reset")
    sql_path, rows = write_load(env.work, state)
    results["snapshot"] = {"rows": rows, "total": sum(rows.values())}
    log(f"application tables: {', '.join(f'{t} {n:,}' for t, n in rows.items())} rows (COPY)")
    t = time.time()
    svc.script("app", "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", sql_path, what="load")
    log(f"  loaded in {time.time() - t:.1f} s")
    results["sql_alone"] = sql_alone(args, txs)


    log(f"starting Kafka Connect + Debezium (snapshot; topics {args.topic_prefix}.public.*, "
        f"schemas.enable={args.schemas_enable})")
    t_connect = time.time()
    rss = results["_rss"] = RssSampler()
    rss.set_phase("snapshot")
    rss.start()
    svc.started.append("connect")  # stopped at the end even if start fails half-way
    svc.script("connect", "start")
    svc.script("connect", "wait-streaming")
    t_streaming = time.time()
    results["snapshot"]["connect_seconds"] = t_streaming - t_connect
    rss.pids["Connect JVM"] = svc.pid("connect")
    log(f"  Connect started and snapshotted in {t_streaming - t_connect:.1f} s")

    # -- denormd ---------------------------------------------------------------------
    topics = {tbl: f"{args.topic_prefix}.public.{tbl}" for tbl in relational.TABLES}
    group = f"denormd-{args.topic_prefix}"
    config = relational.write_config(env, SCHEMA, topics, group)
    env.run([env.denormd, "check", "-q", "-c", config], "denormd check")
    for s in (SCHEMA, REF_SCHEMA):
        env.psql(f'set client_min_messages = warning; drop schema if exists "{s}" cascade')
    store = PgConn(args.pg_port, "denorm")
    conns.append(store)

    def positions():
        """(records counted: applied + stale + dead, sum of positions) over the topics."""
        names = ", ".join(f"'kafka:{group}:{tp}'" for tp in topics.values())
        r = store.query(f"select coalesce(sum(applied + stale + dead), 0), "
                        f"coalesce(sum(position), 0) from \"{SCHEMA}\".positions "
                        f"where source in ({names})")
        return int(r[0][0]), int(r[0][1])

    log(f"starting denormd run ({os.path.relpath(config, REPO)})")
    daemon = Daemon(env, config, args.metrics_port, os.path.join(env.work, "denormd-run.log"))
    results["_daemon"] = daemon
    rss.pids["denormd"] = daemon.proc.pid
    assigned = daemon.wait_for(r"partitions_assigned", 120)
    want = results["snapshot"]["total"]
    wait_value(store, f"select coalesce(sum(applied + stale + dead), 0) >= {want} from "
               f"\"{SCHEMA}\".positions where source like 'kafka:{group}:%'", "t", daemon,
               "snapshot", positions, args.stall_seconds, poll=0.05)
    t_snap = time.time()
    results["snapshot"].update({"denormd_seconds": t_snap - assigned,
                                "denormd_startup": assigned - daemon.started})
    log(f"  the snapshot's {want:,} records are documents: {t_snap - assigned:.1f} s from "
        f"partition assignment ({want / (t_snap - assigned):,.0f} records/s)")

    rss.set_phase("reference replay (denormd run idle)")
    log("reference: denormd replay of the native load.jsonl + changes.jsonl (schema "
        f"{REF_SCHEMA})")
    ref_config = write_config(env, REF_SCHEMA)
    for path in (load_path, changes_path):
        env.run([env.denormd, "replay", "-q", "-c", ref_config, path], f"replay {path}")
    vacuum_analyze(env, SCHEMA)
    for port, db in ((args.pg_port, "denorm"), (args.app_pg_port, APP_DB)):
        c = PgConn(port, db)
        c.query("checkpoint")
        c.close()
    app = PgConn(args.app_pg_port, APP_DB)
    conns.append(app)
    app.query("vacuum analyze")

    # -- throughput -----------------------------------------------------------------
    rss.set_phase("throughput")
    busy_before = other_benchmarks()
    cpu = CpuMeter(svc, daemon)
    metrics0 = daemon.metrics()
    pos0 = positions()
    cpu0 = cpu.read()
    log(f"throughput: {n_changes:,} logical changes as {results['changes']['transactions']:,} "
        "SQL transactions, one client, back to back")
    lat = []
    t0 = time.time()
    for sql in txs:
        if sql:
            a = time.time()
            app.query(sql)
            lat.append(time.time() - a)
    t_sql = time.time()
    lat.sort()
    app.query(marker_insert_sql(1))
    t_marker_commit = time.time()
    log(f"  SQL applied in {t_sql - t0:.1f} s ({n_changes / (t_sql - t0):,.0f} transactions/s); "
        "waiting for the marker's documents")
    t_end = wait_value(store, marker_seen_sql(1), 3, daemon, "throughput", positions,
                       args.stall_seconds)
    cpu1 = cpu.read()
    pos1 = positions()
    metrics1 = daemon.metrics()
    busy_after = other_benchmarks()
    records = pos1[0] - pos0[0] - 5
    kafka_records = pos1[1] - pos0[1] - 5
    e2e = t_end - t0
    tp = results["throughput"] = {
        "seconds": e2e, "sql_seconds": t_sql - t0, "tail_seconds": t_end - t_marker_commit,
        "logical_rate": n_changes / e2e, "records": records, "records_rate": records / e2e,
        "tombstones": kafka_records - records, "sql_rate": n_changes / (t_sql - t0),
        "tx_p50": quantile_exact(lat, 0.5), "tx_p99": quantile_exact(lat, 0.99),
        "tx_max": lat[-1] if lat else None,
        "batches": (metric_value(metrics1, "denormd_batches_total") or 0)
        - (metric_value(metrics0, "denormd_batches_total") or 0),
        "documents_written": (metric_value(metrics1, "denormd_documents_written_total") or 0)
        - (metric_value(metrics0, "denormd_documents_written_total") or 0)}
    tp["cpu"], tp["others_top"] = CpuMeter.delta(cpu0, cpu1)
    if records != expected_records:
        results["notes"].append(f"throughput: denormd counted {records:,} change records, the "
                                f"Translator gives {expected_records:,}")
    with open(os.path.join(env.work, "metrics-throughput.txt"), "w") as f:
        f.write(metrics1)
    log(f"  transaction round trip (BEGIN ... COMMIT) p50 {ms(tp['tx_p50'])}, p99 "
        f"{ms(tp['tx_p99'])}, max {ms(tp['tx_max'])}")
    log(f"  end to end {e2e:.1f} s: {tp['logical_rate']:,.0f} logical changes/s, "
        f"{tp['records_rate']:,.0f} change records/s; the last document {tp['tail_seconds']:.2f} s "
        f"after the last COMMIT")
    log("  CPU seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in tp["cpu"].items() if v is not None))
    if tp["others_top"]:
        log("  other processes, the largest (names): " + ", ".join(n for n, _ in tp["others_top"]))
    mark_busy(results, "throughput", busy_before + busy_after, tp, e2e)

    app.query(marker_delete_sql(1))
    wait_value(store, marker_gone_sql(1), 0, daemon, "marker delete", positions, args.stall_seconds)

    # -- check -----------------------------------------------------------------------
    rss.set_phase("check")
    if not check(env, results, "after the snapshot + all changes"):
        return

    # -- delay -----------------------------------------------------------------------
    rate = args.delay_rate or args.delay_fraction * tp["logical_rate"]
    count = max(1, int(rate * args.delay_seconds))
    lines = continued_lines(args, sizes, changes_path, n_changes, count)
    extra_path = os.path.join(env.work, "continued.jsonl")
    with open(extra_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    bg = transactions(translate_lines(tr, lines))
    pa, pp = f"{MARK}-probe-a", f"{MARK}-probe-p"
    app.query(f"begin; insert into authors (id, \"firstName\", \"lastName\") values "
              f"('{pa}', 'probe', 'probe-0'); insert into posts (id, name, summary) values "
              f"('{pp}', 'probe', 'probe'); commit")
    wait_value(store, f"select (select count(*) from {q(SCHEMA, 'authors')} where id = '{pa}') + "
               f"(select count(*) from {q(SCHEMA, 'posts')} where id = '{pp}')", 2, daemon,
               "probe rows", positions, args.stall_seconds)
    n_probes = int(args.delay_seconds / args.probe_interval)
    timeline = sorted([(j / rate, 0, j) for j in range(len(bg))] +
                      [((k + 1) * args.probe_interval, 1, k) for k in range(n_probes)])
    pending = {"a": [], "c": []}
    delays = {"a": [], "c": []}
    mu = threading.Lock()
    stop = threading.Event()
    poll_sql = (f"select (select doc->>'lastName' from {q(SCHEMA, 'authors')} where id = '{pa}'), "
                f"(select doc->>'countOfComments' from {q(SCHEMA, 'posts')} where id = '{pp}')")
    poller_error = []

    def poller():
        try:
            c = PgConn(args.pg_port, "denorm")
            try:
                while not stop.is_set():
                    row = c.query(poll_sql)[0]
                    now = time.time()
                    seen = {"a": int(row[0].rsplit("-", 1)[1]) if row[0] else -1,
                            "c": int(row[1]) if row[1] else -1}
                    with mu:
                        for kind in ("a", "c"):
                            while pending[kind] and pending[kind][0][0] <= seen[kind]:
                                _, tc = pending[kind].pop(0)
                                delays[kind].append(now - tc)
                    time.sleep(args.poll_interval)
            finally:
                c.close()
        except Exception as e:  # noqa: BLE001  (reported by the main thread)
            poller_error.append(e)

    log(f"delay: {len(bg):,} logical changes of the continued stream at {rate:,.0f}/s "
        f"({'--delay-rate' if args.delay_rate else f'{args.delay_fraction:.0%} of the end-to-end rate'})"
        f" for {args.delay_seconds:g} s, a probe every {args.probe_interval * 1000:.0f} ms, "
        f"polled every {args.poll_interval * 1000:.0f} ms")
    rss.set_phase("delay")
    busy_before = other_benchmarks()
    metrics0 = daemon.metrics()
    cpu0 = cpu.read()
    th = threading.Thread(target=poller, daemon=True)
    th.start()
    n_comments, max_late, sent = 0, 0.0, 0
    start = time.time()
    for due, kind, j in timeline:
        now = time.time()
        if now < start + due:
            time.sleep(start + due - now)
        else:
            max_late = max(max_late, now - start - due)
        if poller_error:
            raise BenchError(f"the probe poller failed: {poller_error[0]}")
        if kind == 0:
            if bg[j]:
                app.query(bg[j])
            sent += 1
        elif j % 2 == 0:
            app.query(f"update authors set \"lastName\" = 'probe-{j + 1}' where id = '{pa}'")
            tc = time.time()
            with mu:
                pending["a"].append((j + 1, tc))
        else:
            n_comments += 1
            app.query(f"insert into comments (id, \"postId\", author, comment, \"createdAt\") "
                      f"values ('{MARK}-probe-c{j}', '{pp}', 'probe', 'probe', {j})")
            tc = time.time()
            with mu:
                pending["c"].append((n_comments, tc))
    elapsed = time.time() - start
    deadline = time.time() + 120
    while True:
        with mu:
            left = len(pending["a"]) + len(pending["c"])
        if not left or poller_error:
            break
        if time.time() > deadline or not daemon.alive():
            raise BenchError(f"delay: {left} probes not in the documents after 120 s:\n"
                             + daemon.log_text()[-3000:])
        time.sleep(0.05)
    stop.set()
    th.join(5)
    if poller_error:
        raise BenchError(f"the probe poller failed: {poller_error[0]}")
    cpu1 = cpu.read()
    metrics1 = daemon.metrics()
    busy_after = other_benchmarks()
    with open(os.path.join(env.work, "metrics-delay.txt"), "w") as f:
        f.write(metrics1)
    all_delays = sorted(delays["a"] + delays["c"])
    age = hist_delta(histogram(metrics0, "denormd_event_age_seconds"),
                     histogram(metrics1, "denormd_event_age_seconds"))
    dl = results["delay"] = {
        "rate": rate, "sent": sent, "elapsed": elapsed, "actual_rate": sent / elapsed,
        "probes": len(all_delays), "client_max_late": max_late,
        "p50": quantile_exact(all_delays, 0.5), "p99": quantile_exact(all_delays, 0.99),
        "max": all_delays[-1] if all_delays else None,
        "by_kind": {k: {"probes": len(v), "p50": quantile_exact(sorted(v), 0.5),
                        "p99": quantile_exact(sorted(v), 0.99), "max": max(v) if v else None}
                    for k, v in delays.items()},
        "event_age_count": age[-1][1] if age else 0,
        "event_age_p50": quantile(age, 0.5), "event_age_p99": quantile(age, 0.99),
        "batches": (metric_value(metrics1, "denormd_batches_total") or 0)
        - (metric_value(metrics0, "denormd_batches_total") or 0)}
    dl["cpu"], dl["others_top"] = CpuMeter.delta(cpu0, cpu1)
    with open(os.path.join(env.work, "delays.json"), "w") as f:
        json.dump(delays, f)
    log(f"  {dl['probes']} probes: commit -> document p50 {ms(dl['p50'])}, p99 {ms(dl['p99'])}, "
        f"max {ms(dl['max'])}; denormd_event_age_seconds p50 {ms(dl['event_age_p50'])}, "
        f"p99 {ms(dl['event_age_p99'])} ({dl['event_age_count']:,} records); the client was at "
        f"most {max_late * 1000:.0f} ms late")
    mark_busy(results, "delay", busy_before + busy_after, dl, elapsed)

    # -- the end: probe rows out, documents checked again ------------------------------
    rss.set_phase("end")
    app.query(f"begin; delete from comments where \"postId\" = '{pp}'; delete from posts where "
              f"id = '{pp}'; delete from authors where id = '{pa}'; commit")
    app.query(marker_insert_sql(2))
    wait_value(store, marker_seen_sql(2), 3, daemon, "final marker", positions, args.stall_seconds)
    app.query(marker_delete_sql(2))
    wait_value(store, marker_gone_sql(2), 0, daemon, "final marker delete", positions,
               args.stall_seconds)
    env.run([env.denormd, "replay", "-q", "-c", ref_config, extra_path], "replay continued.jsonl")
    check(env, results, "after the delay phase")


def sql_alone(args, txs):
    """The CHANGES transactions on a copy of the loaded tables (CREATE DATABASE ... TEMPLATE),
    before the connector exists: what this client commits with nothing else running beside
    it. The copy is dropped; its WAL precedes the replication slot, so Debezium never reads it."""
    admin = PgConn(args.app_pg_port, "postgres")
    try:
        admin.query("drop database if exists app_solo")
        admin.query(f"create database app_solo template {APP_DB}")
        c = PgConn(args.app_pg_port, "app_solo")
        lat = []
        try:
            c.query("checkpoint")
            t0 = time.time()
            for sql in txs:
                if sql:
                    a = time.time()
                    c.query(sql)
                    lat.append(time.time() - a)
            seconds = time.time() - t0
        finally:
            c.close()
        admin.query("drop database app_solo")
        admin.query("checkpoint")
    finally:
        admin.close()
    lat.sort()
    r = {"seconds": seconds, "rate": len(txs) / seconds, "tx_p50": quantile_exact(lat, 0.5),
         "tx_p99": quantile_exact(lat, 0.99)}
    log(f"SQL alone (a copy of the tables, nothing consuming): {r['rate']:,.0f} transactions/s, "
        f"round trip p50 {ms(r['tx_p50'])}, p99 {ms(r['tx_p99'])}")
    return r


def check(env, results, label):
    total, diffs, docs = compare_documents(env, SCHEMA, REF_SCHEMA)
    results.setdefault("checks", []).append({"label": label, "differ": total, "documents": docs,
                                             "detail": diffs})
    if total:
        detail = ", ".join(f"{c} {n}" for c, n in diffs.items() if n)
        log(f"check {label}: WRONG: {total} documents differ ({detail})")
        results["wrong"] = total
        return False
    log(f"check {label}: identical to denormd replay's {docs:,} documents")
    return True


def mark_busy(results, phase, procs, r, wall):
    """A busy-machine mark when another benchmark or a compiler ran, or when processes not
    of this run used more than a quarter of one CPU on average."""
    others = r["cpu"].get(OTHERS) or 0.0
    why = []
    if procs:
        why.append("running: " + ", ".join(sorted(set(procs))))
    if others > 0.25 * wall:
        why.append(f"other processes used {others:.1f} CPU seconds in {wall:.1f} s "
                   f"({100 * others / wall:.0f} % of one CPU; mostly "
                   + ", ".join(n for n, _ in r.get("others_top", [])) + ")")
    if why:
        results["busy"].append(f"{phase}: " + ", ".join(why))
        log(f"  busy machine during {phase}: " + ", ".join(why))


def other_benchmarks():
    """Other benchmarks or compilers running now (for the busy-machine mark): short names."""
    p = subprocess.run(["pgrep", "-af", r"bench/run\.py|bench/link_cost\.py|kstreams|cc1plus|ninja"],
                       stdout=subprocess.PIPE, text=True)
    out = []
    for line in p.stdout.splitlines():
        cmd = line.split(" ", 1)[1] if " " in line else ""
        if "pgrep" in cmd:
            continue
        m = re.search(r"bench/\S+\.py|kstreams", cmd)
        out.append(m.group(0) if m else os.path.basename(cmd.split(" ", 1)[0]))
    return out


# ----------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------

def report(args, results, code):
    s = results.get("sizes", {})
    out = [f"From SQL to documents through Kafka Connect + Debezium: {s.get('authors', 0):,} "
           f"authors, {s.get('books', 0):,} books, {s.get('posts', 0):,} posts, "
           f"{s.get('comments', 0):,} comments, {s.get('changes', 0):,} logical changes "
           "(bench/relational.py's tables and translation).", ""]
    if results.get("wrong"):
        last = results["checks"][-1]
        out.append(f"WRONG: {results['wrong']} documents differ from denormd replay's "
                   f"({last['label']}: " + ", ".join(f"{c} {n}" for c, n in last["detail"].items() if n)
                   + "); no figures.")
        return "\n".join(out) + "\n"
    if code != 0 and not results.get("throughput"):
        out.append(f"FAILED (exit {code}): no figures.")
        return "\n".join(out) + "\n"
    out += ["| measure | figure |", "| --- | ---: |"]
    sn = results.get("snapshot", {})
    if sn.get("denormd_seconds"):
        out.append(f"| snapshot: rows loaded (COPY) | {sn['total']:,} |")
        out.append(f"| snapshot: Connect start → streaming (snapshot done) | {sn['connect_seconds']:.1f} s |")
        out.append(f"| snapshot: denormd, partition assignment → every row a document | "
                   f"{sn['denormd_seconds']:.1f} s ({sn['total'] / sn['denormd_seconds']:,.0f} records/s) |")
    tp = results.get("throughput")
    ch = results.get("changes", {})
    if tp:
        out.append(f"| CHANGES: logical changes (SQL transactions, 1 client) | {ch['logical']:,} "
                   f"({ch['transactions']:,}; {ch['empty']:,} change no row) |")
        out.append(f"| CHANGES: SQL apply rate (first send → last COMMIT) | "
                   f"{tp['sql_rate']:,.0f} transactions/s ({tp['sql_seconds']:.1f} s) |")
        out.append(f"| CHANGES: one transaction's round trip, p50 / p99 / max | "
                   f"{ms(tp['tx_p50'])} / {ms(tp['tx_p99'])} / {ms(tp['tx_max'])} |")
        solo = results.get("sql_alone")
        if solo:
            out.append(f"| the same SQL alone (a copy of the tables, before the connector "
                       f"exists), round trip p50 / p99 | {solo['rate']:,.0f} transactions/s, "
                       f"{ms(solo['tx_p50'])} / {ms(solo['tx_p99'])} |")
        out.append(f"| **CHANGES end to end (first send → last document)** | **{tp['logical_rate']:,.0f} "
                   f"logical changes/s, {tp['records_rate']:,.0f} change records/s** "
                   f"({tp['seconds']:.1f} s) |")
        out.append(f"| CHANGES: change records (Debezium, as denormd counted them) | "
                   f"{tp['records']:,} (+{tp['tombstones']:,} tombstones) |")
        out.append(f"| CHANGES: last COMMIT → its document | {tp['tail_seconds'] * 1000:,.0f} ms |")
        out.append(f"| CHANGES: denormd batches | {tp['batches']:,.0f} "
                   f"({tp['records'] / max(1, tp['batches']):,.0f} records each on average) |")
    dl = results.get("delay")
    if dl:
        out.append(f"| delay: input rate (continued stream) | {dl['actual_rate']:,.0f} logical "
                   f"changes/s for {dl['elapsed']:.0f} s + a probe every "
                   f"{args.probe_interval * 1000:.0f} ms |")
        out.append(f"| **delay: COMMIT returned → document visible, p50 / p99 / max** | "
                   f"**{ms(dl['p50'])} / {ms(dl['p99'])} / {ms(dl['max'])}** "
                   f"({dl['probes']} probes, poll {args.poll_interval * 1000:.0f} ms) |")
        for k, label in (("a", "author UPDATE (topic authors)"), ("c", "comment INSERT (topic comments)")):
            b = dl["by_kind"][k]
            out.append(f"| delay: {label} | {ms(b['p50'])} / {ms(b['p99'])} / {ms(b['max'])} "
                       f"({b['probes']}) |")
        out.append(f"| delay: denormd_event_age_seconds (Kafka timestamp → commit), p50 / p99 | "
                   f"{ms(dl['event_age_p50'])} / {ms(dl['event_age_p99'])} "
                   f"({dl['event_age_count']:,} records; histogram buckets, interpolated) |")
    rss = [(k, results.get(k)) for k in ("denormd_rss_kib", "connect_rss_kib", "kafka_rss_kib")]
    names = {"denormd_rss_kib": "denormd (VmHWM)", "connect_rss_kib": "Connect JVM (VmHWM)",
             "kafka_rss_kib": "Kafka broker JVM (VmHWM)"}
    line = ", ".join(f"{names[k]} {v / 1024:.0f} MiB" for k, v in rss if v)
    if line:
        out.append(f"| peak RSS | {line} |")
    for c in results.get("checks", []):
        out.append(f"| documents {c['label']} | identical to denormd replay's ({c['documents']:,}) |")
    out.append("")
    for phase, key in (("CHANGES", "throughput"), ("delay", "delay")):
        r = results.get(key)
        if r and r.get("cpu"):
            wall = r["seconds"] if key == "throughput" else r["elapsed"]
            out.append(f"CPU during {phase} ({wall:.1f} s; {os.cpu_count()} CPUs = "
                       f"{100 * (os.cpu_count() or 1)} %): " + ", ".join(
                f"{k} {v:.1f} s ({100 * v / wall:.0f} %)" for k, v in r["cpu"].items() if v is not None)
                + ".")
    phases = {}
    for key, kib in results.get("rss_by_phase", {}).items():
        ph, name = key.rsplit(" / ", 1)
        phases.setdefault(ph, []).append(f"{name} {kib / 1024:.0f} MiB")
    if phases:
        out.append("Resident set sampled every 0.5 s, the largest per phase: " + "; ".join(
            f"{ph}: {', '.join(sorted(v))}" for ph, v in phases.items()) + ".")
    phases = {}
    for key, kib in results.get("hwm_by_phase", {}).items():
        ph, name = key.rsplit(" / ", 1)
        phases.setdefault(ph, []).append(f"{name} {kib / 1024:.0f} MiB")
    if phases:
        out.append("Peak resident set so far (VmHWM) at the end of each phase: " + "; ".join(
            f"{ph}: {', '.join(sorted(v))}" for ph, v in phases.items()) + ".")
    if tp:
        if tp["tail_seconds"] < 0.1 * tp["seconds"]:
            bound = ("the SQL side: the documents kept up with the commits (the last document "
                     f"{tp['tail_seconds'] * 1000:,.0f} ms after the last COMMIT; end to end "
                     f"{tp['logical_rate'] / tp['sql_rate']:.0%} of the SQL apply rate)")
        else:
            bound = ("downstream of the commits (Debezium, Connect, Kafka or denormd): the last "
                     f"document came {tp['tail_seconds']:.1f} s after the last COMMIT (end to end "
                     f"{tp['logical_rate'] / tp['sql_rate']:.0%} of the SQL apply rate)")
        solo = results.get("sql_alone")
        if solo:
            bound += (f"; the client commits {solo['rate']:,.0f} transactions/s alone and "
                      f"{tp['sql_rate']:,.0f}/s with the pipeline running beside it")
        used = sum(v for v in tp["cpu"].values() if v is not None)
        cap = (os.cpu_count() or 1) * tp["seconds"]
        bound += (f"; the machine's {os.cpu_count()} CPUs were {100 * used / cap:.0f} % busy "
                  f"({used:.1f} of {cap:.1f} CPU seconds, this run's processes "
                  f"{used - (tp['cpu'].get(OTHERS) or 0):.1f})")
        out.append(f"What bounded CHANGES: {bound}.")
    for n in results.get("notes", []):
        out.append(f"Note: {n}")
    for b in results.get("busy", []):
        out.append(f"Busy machine, {b}.")
    if code not in (0, 2):
        out.append(f"FAILED (exit {code}) before the end: the figures above are those measured.")
    return "\n".join(out) + "\n"


def write_results(args, results, table, code):
    mach = machine()
    header = ["# denormd: from SQL to documents through Debezium", "",
              f"- command: `{shlex.join(['bench/debezium_e2e.py'] + sys.argv[1:])}`",
              f"- date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
              f"- machine: {mach['cpus']} CPUs ({mach['cpu']}), {mach['memory']} RAM, "
              f"Linux {mach['kernel']}",
              f"- PostgreSQL: {results.get('pg_version', '?')} (fsync on, both clusters)",
              f"- build/denormd of {results.get('denormd_mtime', '?')} (HEAD "
              f"{results.get('commit', '?')})",
              f"- total runtime: {(time.time() - T0) / 60:.1f} min"
              + ("" if code == 0 else f" (FAILED, exit {code})"), "", ""]
    os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
    with open(args.results, "w") as f:
        f.write("\n".join(header) + table)
    with open(os.path.splitext(args.results)[0] + ".json", "w") as f:
        json.dump({k: v for k, v in results.items() if not k.startswith("_")}, f, indent=1,
                  default=str)
    log(f"results in {os.path.relpath(args.results, REPO)}")


if __name__ == "__main__":
    sys.exit(main())
