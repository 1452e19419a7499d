#!/usr/bin/env python3
"""The production fault test's longer mode: the five faults, N rounds in random orders.

Runs build/production_faults_test's AllFaultsInRandomOrder (tests/production/) with
DENORMD_FAULT_ROUNDS=N over one pass of the article's random scenario: two `denormd run`
instances with the change feed on, a 3-broker Kafka cluster and a PostgreSQL primary with a
synchronous standby (scripts/cluster.sh, on ports of the test's own), and after every fault
the time until a batch commits again and until every input partition has. At the end the
test checks the documents against the scenario's fresh replay, the dead letters and the
feed. This prints, per fault, how often it struck and the median and worst of both delays,
as a markdown table (stdout), and the test's verdict.

Needs root (tmpfs, nftables) and a built test: ninja -C build production_faults_test.

  bench/faults.py --rounds 5             # 25 faults
  bench/faults.py --rounds 2 --seed 7    # a given order
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = re.compile(r"\[ fault\s+\] (\w+)\s+next committed batch after ([\d.]+) s, "
                  r"every partition after ([\d.]+) s")
TARGETS = {"LeaderLoss": 10, "StandbyPromoted": 30, "NetworkPartition": 30}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="each of the five faults this many times")
    p.add_argument("--seed", type=int, default=None, help="the order (default: random, printed)")
    p.add_argument("--binary", default=os.path.join(REPO, "build", "production_faults_test"))
    args = p.parse_args()
    if not os.path.exists(args.binary):
        sys.exit(f"faults.py: {args.binary} not found; run: ninja -C build production_faults_test")
    env = dict(os.environ, DENORMD_FAULT_ROUNDS=str(args.rounds))
    if args.seed is not None:
        env["DENORMD_FAULT_SEED"] = str(args.seed)
    delays = {}
    proc = subprocess.Popen([args.binary, "--gtest_filter=*AllFaultsInRandomOrder"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        sys.stderr.write(line)
        m = LINE.search(line)
        if m:
            delays.setdefault(m.group(1), []).append((float(m.group(2)), float(m.group(3))))
    code = proc.wait()
    print(f"{args.rounds} rounds of the five faults, `bench/faults.py --rounds {args.rounds}"
          f"{'' if args.seed is None else f' --seed {args.seed}'}`; seconds from the fault "
          "(from its end for DiskFull and NetworkPartition):\n")
    print("| fault | times | next batch, median | next batch, worst | every partition, median "
          "| every partition, worst | target |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for fault in sorted(delays):
        first = [d[0] for d in delays[fault]]
        every = [d[1] for d in delays[fault]]
        target = TARGETS.get(fault)
        print(f"| {fault} | {len(first)} | {statistics.median(first):.1f} | {max(first):.1f} | "
              f"{statistics.median(every):.1f} | {max(every):.1f} | "
              f"{'<= %d s' % target if target else ''} |")
    print(f"\nThe test's checks (documents, dead letters, feed): {'passed' if code == 0 else 'FAILED'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
