#!/usr/bin/env python3
"""`denormd advise` on the benchmark's workload (bench/generate_workload.py, Zipf-skewed, at
a small size): it must name the hot keys — the author in the most books, the post with the
most comments — with the counts this script finds in the generated events itself (the
entities' final state), not through denormd.

Usage: advise_workload_test.py REPO_DIR DENORMD_BINARY (ctest passes them); needs
DENORMD_TEST_POSTGRES (scripts/test.sh exports it).
"""
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

REPO, DENORMD = sys.argv[1], sys.argv[2]
PG = os.environ.get("DENORMD_TEST_POSTGRES")
if not PG:
    sys.exit("FAIL: DENORMD_TEST_POSTGRES is not set (scripts/test.sh exports it)")
SCHEMA = "advise_workload"


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-3000:]}{p.stdout[-2000:]}")
    return p.stdout


with tempfile.TemporaryDirectory() as work:
    run([sys.executable, os.path.join(REPO, "bench", "generate_workload.py"), "--authors", "200",
         "--books", "2000", "--posts", "20", "--comments", "5000", "--changes", "100",
         "--out", work])
    config = open(os.path.join(REPO, "bench", "config.yaml")).read()
    config = re.sub(r"(?m)^source:\n(?:[ \t]+\S.*\n)+", "", config)
    config = re.sub(r"(?m)^(\s*schema:\s*)\S+", lambda m: m.group(1) + SCHEMA, config, count=1)
    path = os.path.join(work, "config.yaml")
    open(path, "w").write(config)
    env = dict(os.environ, DENORMD_POSTGRES=PG)
    run(["psql", "-X", "-q", PG, "-c",
         f"set client_min_messages = warning; drop schema if exists {SCHEMA} cascade"])
    load = os.path.join(work, "load.jsonl")
    run([DENORMD, "replay", "-q", "-c", path, load], env=env)
    advice = json.loads(run([DENORMD, "advise", "-q", "-c", path, "--json"], env=env))

    # The final state of every entity of the log, counted here.
    state = {}
    for line in open(load):
        e = json.loads(line)
        key = (e["type"], e["id"])
        if e["op"] == "delete":
            state.pop(key, None)
        elif e["op"] == "upsert":
            state[key] = e["data"]
        else:
            sys.exit(f"FAIL: the load has a {e['op']}; this test counts upserts and deletes")
    books_of = collections.Counter(a for (t, _), d in state.items() if t == "book"
                                   for a in set(d.get("authorIds", [])))
    comments_of = collections.Counter(d["postId"] for (t, _), d in state.items() if t == "comment")
    hot_author, hot_books = max(books_of.items(), key=lambda kv: (kv[1], [-ord(c) for c in kv[0]]))
    hot_post, hot_comments = max(comments_of.items(), key=lambda kv: (kv[1], [-ord(c) for c in kv[0]]))

    def field(projection, name):
        for f in advice["fields"]:
            if f["projection"] == projection and f["field"] == name:
                return f
        sys.exit(f"FAIL: no {projection}.{name} in advise's output")

    failures = []
    lookup = field("books", "authors")["documents_per_member"]
    if lookup["top"][0] != [hot_author, hot_books] or lookup["max"] != hot_books:
        failures.append(f"books.authors: the most books per author {lookup['top'][0]}, "
                        f"counted here {hot_author} in {hot_books}")
    if lookup["keys"] != len(books_of):
        failures.append(f"books.authors: {lookup['keys']} authors with books, counted here {len(books_of)}")
    embed = field("posts", "recentComments")["members_per_document"]
    if embed["top"][0] != [hot_post, hot_comments]:
        failures.append(f"posts.recentComments: the most comments {embed['top'][0]}, counted here "
                        f"{hot_post} with {hot_comments}")
    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    print(f"ok: {hot_author} in {hot_books} books, {hot_post} with {hot_comments} comments")
