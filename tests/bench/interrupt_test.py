#!/usr/bin/env python3
"""bench/run.py stopped by a signal stops what it started: SIGTERM, and SIGINT when the
run was started with SIGINT ignored (a background job of a non-interactive shell, e.g.
`nohup python3 bench/run.py ... &`), end the run as Ctrl-C does: its PostgreSQL is
stopped and the run exits 130. Before, SIGTERM killed the harness alone and left its
PostgreSQL, Kafka and denormd running, and SIGINT did nothing.

Starts the harness's own PostgreSQL (no Kafka: --skip-kafka) in a temporary state
directory on a port of its own, signals the harness once that PostgreSQL has written
its postmaster.pid (the harness may still be inside `postgres.sh start`), and checks that
no process of that state directory is left.

Usage: interrupt_test.py REPO
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
PG_PORT = 15452


def running(pid):
    """Whether `pid` runs: a zombie (exited, not yet reaped: this machine's init reaps
    slowly) does not."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def processes_of(state_dir):
    out = subprocess.run(["pgrep", "-f", state_dir], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if int(p) != os.getpid() and running(int(p))]


def wait_until(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise SystemExit(f"FAIL: {what} within {seconds} s")


def run_and_signal(sig, ignore_sigint):
    with tempfile.TemporaryDirectory(prefix="denormd-bench-interrupt-") as tmp:
        state = os.path.join(tmp, "state")
        cmd = [sys.executable, os.path.join(REPO, "bench", "run.py"), "--no-build",
               "--skip-kafka", "--state-dir", state, "--pg-port", str(PG_PORT),
               "--authors", "10", "--books", "50", "--posts", "5", "--comments", "100",
               "--changes", "100", "--trigger-sample", "0", "--scale-small", "0"]

        def child_setup():
            if ignore_sigint:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, preexec_fn=child_setup)
        pid_file = os.path.join(state, "postgres", "postmaster.pid")
        try:
            wait_until(lambda: os.path.exists(pid_file) or proc.poll() is not None, 120,
                       "the harness's PostgreSQL started")
            if proc.poll() is not None:
                raise SystemExit(f"FAIL: bench/run.py ended (exit {proc.returncode}) before "
                                 f"its PostgreSQL started:\n{proc.stderr.read()[-3000:]}")
            postmaster = int(open(pid_file).readline())
            proc.send_signal(sig)
            try:
                _, err = proc.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                raise SystemExit(f"FAIL: bench/run.py did not end within 90 s of {sig.name}")
            name = f"{sig.name}{' (SIGINT ignored at start)' if ignore_sigint else ''}"
            if proc.returncode != 130:
                raise SystemExit(f"FAIL: {name}: exit {proc.returncode}, expected 130:\n"
                                 f"{err[-3000:]}")
            if "bench: interrupted" not in err:
                raise SystemExit(f"FAIL: {name}: no 'bench: interrupted' in:\n{err[-3000:]}")
            if running(postmaster):
                raise SystemExit(f"FAIL: {name}: its PostgreSQL (pid {postmaster}) still runs")
            left = processes_of(state)
            if left:
                raise SystemExit(f"FAIL: {name}: processes of {state} still run: {left}")
            print(f"ok: {name}: exit 130, PostgreSQL stopped, nothing of the run left")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for p in processes_of(state):
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def main():
    run_and_signal(signal.SIGTERM, ignore_sigint=False)
    run_and_signal(signal.SIGINT, ignore_sigint=True)
    print("PASS")


if __name__ == "__main__":
    main()
