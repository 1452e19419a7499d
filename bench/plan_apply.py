#!/usr/bin/env python3
"""Measures `denormd plan` and `denormd apply` on the benchmark's store.

Loads the benchmark's workload (load.jsonl, made by bench/run.py or
generate_workload.py) into a fresh schema with bench/config.yaml, then:

  1. plan of a changed config (a field added to the books' embedded authors,
     the comment pages halved, a projection added), exact and with --sample 0.1;
  2. apply of it on the idle store: its counts must equal the exact plan's;
  3. apply of a second change (the authors' books ordered by name: a new index
     relation) while `denormd replay` applies changes.jsonl beside it, then
     verify.

Prints each step's wall time and the reports' figures, and exits 1 when a
count differs or verify finds a difference. Needs a PostgreSQL (--postgres)
and build/denormd.

  bench/plan_apply.py --postgres postgresql://postgres@127.0.0.1:15433/denorm \\
      --workload .local/bench/workload/a1000-b10000-p100-c100000-ch20000-s20261125
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def config_text(schema, step):
    text = open(os.path.join(ROOT, "bench", "config.yaml")).read()
    text = text.replace("schema: bench", "schema: " + schema)
    if step >= 1:
        text = text.replace("          thumbnailUrl: images[].thumbnail\n",
                            "          thumbnailUrl: images[].thumbnail\n"
                            "          firstName: firstName\n")
        text = text.replace("size: 100", "size: 50")
        text = text.replace("projections:\n",
                            "projections:\n  post_titles:\n    from: post\n"
                            "    include: [name]\n", 1)
    if step >= 2:
        text = text.replace("books: {ids: book, via: authorIds}",
                            "books: {embed: book, via: authorIds, order_by: name,"
                            " select: [id, name]}")
    return text


def run(denormd, args, env, what):
    start = time.monotonic()
    proc = subprocess.run([denormd] + args, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    return proc, seconds


def documents(report):
    return {c: (v["written"], v["deleted"], v["unchanged"]) for c, v in report["documents"].items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", required=True)
    parser.add_argument("--workload", required=True, help="directory with load.jsonl and changes.jsonl")
    parser.add_argument("--schema", default="bench_apply")
    parser.add_argument("--denormd", default=os.path.join(ROOT, "build", "denormd"))
    args = parser.parse_args()
    env = dict(os.environ, DENORMD_POSTGRES=args.postgres)
    tmp = tempfile.mkdtemp(prefix="denormd-plan-apply-")
    files = []
    for step in range(3):
        path = os.path.join(tmp, f"v{step}.yaml")
        with open(path, "w") as f:
            f.write(config_text(args.schema, step))
        files.append(path)
    subprocess.run(["psql", args.postgres, "-qc", f"drop schema if exists {args.schema} cascade"],
                   check=True, capture_output=True)
    proc, seconds = run(args.denormd, ["replay", "-q", "-c", files[0],
                                       os.path.join(args.workload, "load.jsonl")], env, "load")
    if proc.returncode != 0:
        sys.exit("load failed:\n" + proc.stderr)
    print(f"load: {seconds:.1f} s ({proc.stdout.strip()})")

    failures = []
    proc, plan_s = run(args.denormd, ["plan", "-q", "--json", "-c", files[1]], env, "plan")
    if proc.returncode != 3:
        sys.exit(f"plan exited {proc.returncode}:\n{proc.stderr}")
    plan = json.loads(proc.stdout)
    proc, sample_s = run(args.denormd, ["plan", "-q", "--json", "--sample", "0.1", "-c", files[1]],
                         env, "plan --sample")
    sample = json.loads(proc.stdout)
    proc, apply_s = run(args.denormd, ["apply", "-q", "--json", "-c", files[1]], env, "apply")
    if proc.returncode != 0:
        sys.exit(f"apply exited {proc.returncode}:\n{proc.stderr}")
    applied = json.loads(proc.stdout)
    if documents(plan) != documents(applied):
        failures.append(f"plan counted {documents(plan)}, apply wrote {documents(applied)}")
    print(f"plan (exact): {plan_s:.1f} s wall; counts {json.dumps(plan['total'])}; "
          f"built {plan['documents_built']} documents in {plan['build_seconds']:.1f} s; "
          f"estimated apply {plan['estimated_seconds']:.1f} s")
    print(f"plan --sample 0.1: {sample_s:.1f} s wall; counts {json.dumps(sample['total'])}; "
          f"estimated apply {sample['estimated_seconds']:.1f} s")
    print(f"apply (idle store): {apply_s:.1f} s wall; counts {json.dumps(applied['total'])}; "
          f"switch {applied['switch_ms']:.0f} ms; equal to plan: "
          f"{documents(plan) == documents(applied)}")
    for name, counts in sorted(documents(applied).items()):
        print(f"  {name}: written {counts[0]}, deleted {counts[1]}, unchanged {counts[2]}")

    # Apply while a replay of the change stream runs beside it.
    replay = subprocess.Popen([args.denormd, "replay", "-q", "--batch-size", "500", "-c", files[1],
                               os.path.join(args.workload, "changes.jsonl")],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1)  # let it start applying batches first
    proc, online_s = run(args.denormd, ["apply", "-q", "--json", "-c", files[2]], env, "apply online")
    out, err = replay.communicate()
    online = json.loads(proc.stdout) if proc.returncode == 0 else None
    if online is None:
        failures.append(f"online apply exited {proc.returncode}: {proc.stderr}")
    else:
        print(f"apply beside a replay of changes.jsonl: {online_s:.1f} s wall; relations added "
              f"{online['relations_added']}; {online['entities_reindexed']} entities reindexed in "
              f"{online['index_seconds']:.1f} s; build {online['build_seconds']:.1f} s; "
              f"{online['journal_changes']} journaled changes caught up; switch "
              f"{online['switch_ms']:.0f} ms")
    # The replay was fenced at the switch (its config is the old one): it
    # exits 1 naming the stale configuration; the rest is applied with the new.
    print(f"replay beside it: exit {replay.returncode}: {(out + err).strip().splitlines()[-1:]}")
    if replay.returncode != 0:
        proc, rest_s = run(args.denormd, ["replay", "-q", "-c", files[2],
                                          os.path.join(args.workload, "changes.jsonl")], env, "rest")
        print(f"the rest of changes.jsonl with the new config: {rest_s:.1f} s (exit {proc.returncode})")
    proc, verify_s = run(args.denormd, ["verify", "-q", "-c", files[2]], env, "verify")
    print(f"verify: {verify_s:.1f} s, exit {proc.returncode}: {proc.stdout.strip().splitlines()[-1:]}")
    if proc.returncode != 0:
        failures.append("verify found differences:\n" + proc.stdout[-2000:])
    for failure in failures:
        print("FAILED: " + failure, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
