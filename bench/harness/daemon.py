"""`denormd run` in the background (Daemon), what it exposes (its /metrics: values and
histograms, their quantiles) and what it committed (its positions); Kafka topics."""

import os
import re
import subprocess
import time
import urllib.request

import kafka_produce

from .services import REPO, BenchError, terminate


class Daemon:
    """denormd run in the background, its log in a file, its RSS from wait4."""

    def __init__(self, env, config, metrics_port, log_path, process_env=None):
        """process_env: its environment (default env.env)."""
        self.env, self.metrics_port, self.log_path = env, metrics_port, log_path
        self.log_file = open(log_path, "w")
        self.started = time.time()
        self.proc = subprocess.Popen(
            [env.denormd, "run", "-c", config, "--metrics-port", str(metrics_port)],
            env=process_env or env.env, stdout=self.log_file, stderr=subprocess.STDOUT, cwd=REPO)
        self.rss_kib = None

    def log_text(self):
        return open(self.log_path).read()

    def alive(self):
        return self.proc.poll() is None

    def wait_for(self, pattern, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(pattern, self.log_text())
            if m:
                return time.time()
            if not self.alive():
                raise BenchError(f"denormd run exited ({self.proc.returncode}):\n"
                                 + self.log_text()[-3000:])
            time.sleep(0.05)
        raise BenchError(f"denormd run: no '{pattern}' in {timeout} s:\n" + self.log_text()[-3000:])

    def wait_for_count(self, count, total, what, unit, stall_seconds):
        """Polls count() every 0.1 s until it reaches total and returns that moment; a
        BenchError when it stays unchanged for stall_seconds or the daemon exits."""
        last, last_change = 0, time.time()
        while True:
            n = count()
            now = time.time()
            if n >= total:
                return time.time()
            if n != last:
                last, last_change = n, now
            elif now - last_change > stall_seconds:
                raise BenchError(f"{what}: no progress for {stall_seconds} s at {n}/{total} {unit}:\n"
                                 + self.log_text()[-3000:])
            if not self.alive():
                raise BenchError(f"{what}: denormd run exited ({self.proc.returncode}):\n"
                                 + self.log_text()[-3000:])
            time.sleep(0.1)

    def metrics(self):
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.read().decode()

    def save_metrics(self, path):
        """Its /metrics, also written to path; returns the text."""
        text = self.metrics()
        with open(path, "w") as fh:
            fh.write(text)
        return text

    def wait_until(self, done, what, timeout=120):
        """Polls done() every 0.1 s until it holds; a BenchError "what:" with the log's tail
        when timeout seconds pass first or the daemon exits."""
        deadline = time.time() + timeout
        while not done():
            if time.time() > deadline or not self.alive():
                raise BenchError(f"{what}:\n" + self.log_text()[-3000:])
            time.sleep(0.1)

    def stop(self):
        rusage = terminate(self.proc)
        if rusage is not None:
            self.rss_kib = rusage.ru_maxrss
        self.log_file.close()
        m = re.findall(r"daemon_stopped.*?peak_rss_kib=(\d+)", self.log_text())
        if m:
            self.rss_kib = int(m[-1])
        return self.proc.returncode


def metric_value(text, name):
    m = re.search(rf"(?m)^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.eE+-]+|NaN)$", text)
    return float(m.group(1)) if m else None


def histogram(text, name):
    """[(upper bound, cumulative count)], +Inf last, of a Prometheus histogram."""
    out = []
    for m in re.finditer(rf'(?m)^{re.escape(name)}_bucket{{le="([^"]+)"}} (\d+)$', text):
        le = float("inf") if m.group(1) == "+Inf" else float(m.group(1))
        out.append((le, int(m.group(2))))
    return out


def quantile(buckets, q):
    """histogram_quantile: linear interpolation within the bucket holding rank q."""
    if not buckets or buckets[-1][1] == 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0
    for le, c in buckets:
        if c >= rank:
            if le == float("inf"):
                return prev_le  # beyond the last finite bound
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return prev_le


def event_age(text, empty):
    """count, p50, p99 and max of denormd_event_age_seconds in a /metrics text: the quantiles
    interpolated within its buckets, capped by the observed maximum; a BenchError `empty`
    when it counts no event."""
    b = histogram(text, "denormd_event_age_seconds")
    f = {"count": b[-1][1] if b else 0}
    if not f["count"]:
        raise BenchError(empty)
    f["p50"], f["p99"] = quantile(b, 0.50), quantile(b, 0.99)
    f["max"] = metric_value(text, "denormd_event_age_max_seconds")
    if f["max"] is not None:  # interpolation within a bucket may overshoot the true maximum
        f["p50"], f["p99"] = (min(q, f["max"]) if q is not None else None for q in (f["p50"], f["p99"]))
    return f


def produce(env, topic, lines, rate, seconds, stop, **options):
    """lines into the 4-partition topic at `rate` per second for at most `seconds`, on a
    producer of their own (kafka_produce.py), what became due every --freshness-send-ms;
    (sent, elapsed seconds, max lag)."""
    producer = kafka_produce.Producer(env.brokers, topic, 4, **options)
    result = kafka_produce.produce_at_rate(producer, lines, rate, seconds,
                                           tick=env.args.freshness_send_ms / 1000, stop=stop)
    producer.close()
    return result


def kafka_topic(env, name, partitions):
    env.run([os.path.join(REPO, "scripts", "kafka.sh"), "topic-create", name, str(partitions)],
            f"create topic {name}")


def positions_total(env, schema, topic):
    """Events committed from `topic` (applied, stale or dead), from denormd's positions."""
    return int(env.poll_scalar(f'select coalesce(sum(applied + stale + dead), 0) from '
                               f'"{schema}".positions where source like \'kafka:%:\' || \'{topic}\''))
