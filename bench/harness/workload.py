"""The workload: bench/generate_workload.py's files, generated once per size and seed and
reused (a manifest), and the lines of its logs."""

import hashlib
import json
import os
import re
import sys

from .services import BENCH, BenchError, log

# The default run is a tenth of the sizes, so that the whole benchmark
# fits in 10 minutes on 2 cores; the sizes (10,000 authors, 100,000
# books, 1,000 posts, 1,000,000 comments, 200,000 changes) take about 15
# minutes (docs/benchmarks.md has both).
GEN_DEFAULTS = {"authors": 1_000, "books": 10_000, "posts": 100, "comments": 100_000}


def workload(env, sizes, changes, seed, label, id_prefix=""):
    """Generates (or reuses) a workload; returns its directory. id_prefix: prepended to every
    entity id, so that the workload's entities can be added to another workload's store."""
    gen = os.path.join(BENCH, "generate_workload.py")
    gen_hash = hashlib.sha256(open(gen, "rb").read()).hexdigest()[:16]
    params = dict(sizes, changes=changes, seed=seed)
    name = "a{authors}-b{books}-p{posts}-c{comments}-ch{changes}-s{seed}".format(**params)
    if id_prefix:
        params["id_prefix"] = id_prefix
        name += "-id" + re.sub(r"[^A-Za-z0-9]", "_", id_prefix)
    d = os.path.join(os.path.abspath(env.args.out), name)
    manifest_path = os.path.join(d, "manifest.json")
    manifest = dict(params, generator_sha256=gen_hash)
    try:
        if json.load(open(manifest_path)) == manifest and all(
                os.path.exists(os.path.join(d, f)) for f in ("load.jsonl", "changes.jsonl")):
            log(f"workload ({label}): reusing {d}")
            return d
    except (OSError, ValueError):
        pass
    log(f"workload ({label}): generating {d}")
    if os.path.exists(manifest_path):
        os.remove(manifest_path)
    cmd = [sys.executable, gen, "--out", d, "--changes", str(changes), "--seed", str(seed),
           "--id-prefix", id_prefix]
    for k in ("authors", "books", "posts", "comments"):
        cmd += [f"--{k}", str(sizes[k])]
    env.run(cmd, "generate_workload.py")
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)
    return d


class Workload:
    """A generated workload (workload() above): its folder, its two logs, their lengths and
    the sizes it was generated with."""

    def __init__(self, directory, sizes):
        self.dir, self.sizes = directory, sizes
        self.load, self.changes = (os.path.join(directory, f) for f in ("load.jsonl", "changes.jsonl"))
        self.n_load, self.n_changes = count_lines(self.load), count_lines(self.changes)


def count_lines(path):
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


def slice_lines(src, dst, start, end):
    """Writes lines [start, end) of src to dst."""
    with open(src, "rb") as f, open(dst, "wb") as out:
        for i, line in enumerate(f):
            if i >= end:
                break
            if i >= start:
                out.write(line)
    return dst


def read_lines(path, start=0, end=None):
    out = []
    with open(path) as f:
        for i, line in enumerate(f):
            if end is not None and i >= end:
                break
            if i >= start and line.strip():
                out.append(line.rstrip("\n"))
    return out


def change_lines(env, sizes, changes, n_changes, start, count, label):
    """Lines [start, start + count) of the change stream, as bytes: changes.jsonl, continued
    past its end by the generator when needed (the generator is sequential: a longer stream of
    the same seed starts with changes.jsonl, checked on its last line)."""
    end = start + count
    if end <= n_changes:
        return [line.encode() for line in read_lines(changes, start, end)]
    extra = -(-(end - n_changes) // 10_000) * 10_000
    longer = os.path.join(workload(env, sizes, n_changes + extra, env.args.seed, label),
                          "changes.jsonl")
    if read_lines(longer, n_changes - 1, n_changes) != read_lines(changes, n_changes - 1, n_changes):
        raise BenchError("the continued change stream does not extend changes.jsonl (generator?)")
    return [line.encode() for line in read_lines(longer, start, end)]
