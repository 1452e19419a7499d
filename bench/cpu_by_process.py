#!/usr/bin/env python3
"""CPU by process name over an interval, in cores: what shares this machine's cores while
a benchmark runs (the daemon, PostgreSQL, the Kafka broker's JVM, the harness).

  python3 bench/cpu_by_process.py 30     # 30 seconds, every process of the machine

Reads utime + stime of every /proc/PID/stat at the start and at the end, summed per
command name (processes that start or end within the interval count from or up to when
they are seen); prints the total and each name above 0.02 cores, highest first.
"""

import collections
import os
import sys
import time


TICK = os.sysconf("SC_CLK_TCK")


def proc_table():
    """{pid: (name, ppid, own CPU s, reaped children's CPU s)} of every process (also
    bench/debezium_e2e.py's)."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as fh:
                stat = fh.read()
        except OSError:  # ended meanwhile
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(pid)] = (name, int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK,
                         (int(fields[13]) + int(fields[14])) / TICK)
    return out


def cpu_seconds():
    """{command name: CPU seconds (utime + stime) of its live processes}."""
    out = collections.Counter()
    for name, _, own, _ in proc_table().values():
        out[name] += own
    return out


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    before, start = cpu_seconds(), time.time()
    time.sleep(seconds)
    after, elapsed = cpu_seconds(), time.time() - start
    cores = sorted(((after[k] - before.get(k, 0)) / elapsed, k) for k in after)
    total = sum(c for c, _ in cores)
    print(f"total {total:.2f} cores over {elapsed:.0f} s: "
          + ", ".join(f"{k} {c:.2f}" for c, k in reversed(cores) if c > 0.02))


if __name__ == "__main__":
    main()
