"""The benchmark's processes and services: paths, progress lines, errors, the environment
of every command (Env: psql against the benchmark's PostgreSQL), timed child processes, the
preflight, the build and the PostgreSQL and Kafka the run starts and stops, and the machine."""

import fcntl
import os
import platform
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(BENCH)

T0 = time.time()


def log(msg):
    m, s = divmod(int(time.time() - T0), 60)
    print(f"[bench {m:02d}:{s:02d}] {msg}", file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


def fmt_rate(x):
    return "—" if x is None else f"{x:,.0f}"


def fmt_count(n):
    return f"{n:,}"


class Env:
    def __init__(self, args):
        self.args = args
        self.state_dir = os.path.abspath(args.state_dir)
        self.work = os.path.join(self.state_dir, "run")
        self.pg_url = f"postgresql://postgres@127.0.0.1:{args.pg_port}/denorm"
        self.brokers = f"127.0.0.1:{args.kafka_port}"
        self.denormd = os.path.join(REPO, "build", "denormd")
        self.env = dict(os.environ)
        self.env.update({
            "DENORMD_STATE_DIR": self.state_dir,
            "DENORMD_PG_PORT": str(args.pg_port),
            "DENORMD_KAFKA_PORT": str(args.kafka_port),
            "DENORMD_POSTGRES": self.pg_url,
            "DENORMD_KAFKA_BROKERS": self.brokers,
            "PGOPTIONS": "",
        })
        self.env.pop("PGDATABASE", None)
        self.owned = False  # set by check_server_ownership: only then is anything dropped
        self._poller = None  # the PsqlSession of poll_scalar, opened by its first poll

    def run(self, cmd, what, capture=True, stdin=None, check=True):
        """Runs cmd; on failure raises BenchError with its stderr."""
        p = subprocess.run(cmd, env=self.env, stdin=stdin,
                           stdout=subprocess.PIPE if capture else None,
                           stderr=subprocess.PIPE, text=True, cwd=REPO)
        if check and p.returncode != 0:
            raise BenchError(f"{what} failed (exit {p.returncode}): {shlex.join(cmd)}\n"
                             + (p.stderr or "")[-3000:] + (p.stdout or "")[-2000:])
        return p

    def psql(self, sql=None, file=None, what="psql", variables=None, output=None):
        cmd = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", self.pg_url, "-tA"]
        for k, v in (variables or {}).items():
            cmd += ["-v", f"{k}={v}"]
        if sql is not None:
            cmd += ["-c", sql]
        if file is not None:
            cmd += ["-f", file]
        if output is not None:
            cmd += ["-o", output]
        return self.run(cmd, what).stdout

    def query(self, sql):
        out = self.psql(sql).strip()
        return [line.split("|") for line in out.splitlines()] if out else []

    def scalar(self, sql):
        rows = self.query(sql)
        return rows[0][0] if rows else None

    def poll_scalar(self, sql):
        rows = self.poll_query(sql)
        return rows[0][0] if rows else None

    def poll_query(self, sql):
        """A read-only query asked many times a second while a contender runs (its progress),
        on one kept psql session. A new psql per poll took about 25 ms (a process, a
        connection, a server backend; 0.2 ms on a kept session), and at 10 polls/s psql
        alone had 11 % of this 2-core machine's CPU samples while `run` was timed
        (perf record -a, 2026-11-29), beside the contender it was timing."""
        if self._poller is None:
            self._poller = PsqlSession(self)
        try:
            rows = self._poller.query(sql)
        except BenchError:
            # The session went with its server (a restart between phases): one new session,
            # which fails loudly if the server is really gone. Only for reads.
            self._poller.close()
            self._poller = PsqlSession(self)
            rows = self._poller.query(sql)
        return rows

    def close(self):
        if self._poller is not None:
            self._poller.close()
            self._poller = None


class PsqlSession:
    """One psql process kept open: statements in on its stdin, each answer read up to a
    marker line. Read-only use (Env.poll_scalar); a statement that fails ends the session
    (ON_ERROR_STOP) and raises BenchError with psql's error."""

    END = "__denormd_bench_end_of_answer__"

    def __init__(self, env):
        self.proc = subprocess.Popen(
            ["psql", "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", "-d", env.pg_url],
            env=env.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, bufsize=1, cwd=REPO)

    def query(self, sql):
        try:
            self.proc.stdin.write(sql.rstrip().rstrip(";") + ";\n\\echo " + self.END + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):  # a broken pipe; a session already ended
            raise BenchError("psql session: " + self._ended())
        rows = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise BenchError(f"psql session: {self._ended()} on: {sql}")
            line = line.rstrip("\n")
            if line == self.END:
                return rows
            if line:
                rows.append(line.split("|"))

    def _ended(self):
        self.close()
        return f"psql exited ({self.proc.returncode}): " + (self.proc.stderr.read() or "")[-3000:]

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def timed_process(env, cmd, what, stdout_path=None, stderr_path=None):
    """Runs cmd to completion. Returns (seconds, stdout text, peak RSS KiB of the child)."""
    out = open(stdout_path, "w") if stdout_path else subprocess.PIPE
    err = open(stderr_path, "w") if stderr_path else subprocess.PIPE
    start = time.time()
    p = subprocess.Popen(cmd, env=env.env, stdout=out, stderr=err, text=True, cwd=REPO)
    stdout_text, stderr_text = "", ""
    if not stdout_path or not stderr_path:
        # Drain pipes in threads so the child never blocks on a full pipe.
        bufs = {}

        def drain(name, stream):
            bufs[name] = stream.read()
        threads = []
        if not stdout_path:
            threads.append(threading.Thread(target=drain, args=("out", p.stdout)))
        if not stderr_path:
            threads.append(threading.Thread(target=drain, args=("err", p.stderr)))
        for t in threads:
            t.start()
    _, status, rusage = os.wait4(p.pid, 0)
    seconds = time.time() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    if not stdout_path or not stderr_path:
        for t in threads:
            t.join()
        stdout_text, stderr_text = bufs.get("out", ""), bufs.get("err", "")
    for f in (out, err):
        if f is not subprocess.PIPE:
            f.close()
    if stdout_path:
        stdout_text = open(stdout_path).read()
    if stderr_path:
        stderr_text = open(stderr_path).read()
    if p.returncode != 0:
        raise BenchError(f"{what} failed (exit {p.returncode}): {shlex.join(cmd)}\n"
                         + stderr_text[-3000:] + stdout_text[-1000:])
    return seconds, stdout_text, rusage.ru_maxrss


def terminate(proc):
    """SIGTERM to a child still running, then its exit status (into proc.returncode) and its
    resource usage from wait4; None when it had exited already or was reaped elsewhere."""
    if proc.poll() is not None:
        return None
    proc.send_signal(signal.SIGTERM)
    try:
        _, status, rusage = os.wait4(proc.pid, 0)
    except ChildProcessError:
        proc.wait()
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return rusage


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def preflight(env, args):
    """Before anything is built, started or dropped: one run per state dir at a time, and
    every port either free or served by this state dir's own service. A second run whose
    ports are taken stops here with a message, touching nothing."""
    os.makedirs(env.state_dir, exist_ok=True)
    env.lock = open(os.path.join(env.state_dir, "bench.lock"), "w")
    try:
        fcntl.flock(env.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise BenchError(f"another bench/run.py is running with state dir {env.state_dir}; wait "
                         "for it or pass another --state-dir (and other ports)")
    busy = []
    services = [("postgres", [args.pg_port], "--pg-port")]
    if not args.skip_kafka:
        services.append(("kafka", [args.kafka_port, args.kafka_port + 1], "--kafka-port"))
    for name, ports, flag in services:
        script = os.path.join(REPO, "scripts", f"{name}.sh")
        if env.run([script, "status"], f"{name}.sh status", check=False).returncode == 0:
            continue  # this state dir's own server, left running by an earlier run: reused
        busy += [f"{p} ({name}, {flag})" for p in ports if port_open(p)]
    if not args.skip_kafka and port_open(args.metrics_port):
        busy.append(f"{args.metrics_port} (denormd run's metrics, --metrics-port)")
    if busy:
        raise BenchError("port(s) " + ", ".join(busy) + " already in use by another process "
                         "(another checkout's benchmark?). Nothing was started or dropped; pass "
                         "free ports (and a separate --state-dir) to run beside it.")


def build(env, args):
    """install-deps.sh and build/denormd (RelWithDebInfo), unless --no-build."""
    if not args.no_build:
        log("installing dependencies (scripts/install-deps.sh; nothing to do if present)")
        env.run([os.path.join(REPO, "scripts", "install-deps.sh")], "install-deps.sh")
        build_dir = os.path.join(REPO, "build")
        if not os.path.exists(os.path.join(build_dir, "build.ninja")):
            log("configuring the build (RelWithDebInfo)")
            env.run(["cmake", "-S", REPO, "-B", build_dir, "-G", "Ninja",
                     "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], "cmake configure")
        else:
            btype = ""
            cache = os.path.join(build_dir, "CMakeCache.txt")
            for line in open(cache):
                if line.startswith("CMAKE_BUILD_TYPE:"):
                    btype = line.split("=", 1)[1].strip()
            if btype not in ("RelWithDebInfo", "Release"):
                log(f"warning: build/ is configured as {btype or 'no build type'}; "
                    "figures need an optimized build (RelWithDebInfo)")
        log("building denormd")
        env.run(["cmake", "--build", build_dir, "--target", "denormd"], "build")
    if not os.access(env.denormd, os.X_OK):
        raise BenchError(f"{env.denormd} is missing; build it (drop --no-build)")


def start(env, args, started):
    """One copy of the binary for the run; PostgreSQL (checked as this state dir's own) and,
    unless --skip-kafka, Kafka, each recorded in `started` when this run started it."""
    # Every command of the run uses one copy of the binary: a rebuild of build/ meanwhile
    # must not mix two versions (their stores may differ).
    os.makedirs(env.work, exist_ok=True)
    copy = os.path.join(env.work, "denormd")
    shutil.copy2(env.denormd, copy)
    env.denormd = copy

    log(f"starting PostgreSQL on port {args.pg_port} (state in {env.state_dir})")
    start_service(env, "postgres", started)
    check_server_ownership(env)
    if not args.skip_kafka:
        log(f"starting Kafka on port {args.kafka_port}")
        start_service(env, "kafka", started)


def check_server_ownership(env):
    """The PostgreSQL on --pg-port must be the benchmark's own cluster, in --state-dir: the
    harness drops schemas only there (another checkout's server on a shared port is never
    touched). Sets env.owned."""
    want = os.path.realpath(os.path.join(env.state_dir, "postgres"))
    got = env.scalar("show data_directory")
    if not got or os.path.realpath(got) != want:
        raise BenchError(f"the PostgreSQL on port {env.args.pg_port} serves {got}, not this run's "
                         f"cluster ({want}); it belongs to someone else: not touching it. "
                         "Pass another --pg-port (and --state-dir).")
    env.owned = True


def start_service(env, name, started):
    """Starts scripts/NAME.sh; records NAME in `started` unless it was already running
    (a service the run did not start is left running at the end)."""
    script = os.path.join(REPO, "scripts", f"{name}.sh")
    was_running = env.run([script, "status"], f"{name}.sh status", check=False).returncode == 0
    if not was_running:
        # Recorded before it starts: a run interrupted while the script starts it still
        # stops it (stopping a service that did not start is harmless).
        started.append(name)
    env.run([script, "start"], f"{name}.sh start")


def stop_services(env, started):
    env.close()  # its psql session, before the server it is connected to stops
    for name in reversed(started):
        script = os.path.join(REPO, "scripts", f"{name}.sh")
        if name == "kafka":
            # The run's own broker (in --state-dir): its topics, and those of runs before it
            # (every run makes new ones, gigabytes at the full size; 28 GB had piled up by
            # 2026-11-29), are not read again.
            log("deleting the benchmark's topics")
            env.run([script, "topic-delete", r"bench\..*"], "kafka.sh topic-delete", check=False)
        log(f"stopping {name}")
        env.run([script, "stop"], f"{name} stop", check=False)


def machine():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "memory": mem, "cpu": cpu, "kernel": platform.release()}


def pg_version(env):
    try:
        return env.scalar("select version()")
    except BenchError:
        return "?"
