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


def cpu_ticks():
    out = collections.Counter()
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
        out[name] += int(fields[11]) + int(fields[12])  # utime, stime
    return out


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    before, start = cpu_ticks(), time.time()
    time.sleep(seconds)
    after, elapsed = cpu_ticks(), time.time() - start
    hz = os.sysconf("SC_CLK_TCK")
    cores = sorted(((after[k] - before.get(k, 0)) / hz / elapsed, k) for k in after)
    total = sum(c for c, _ in cores)
    print(f"total {total:.2f} cores over {elapsed:.0f} s: "
          + ", ".join(f"{k} {c:.2f}" for c, k in reversed(cores) if c > 0.02))


if __name__ == "__main__":
    main()
