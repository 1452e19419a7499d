#!/usr/bin/env python3
"""What a change through a join table costs, by the size of the linked set.

A store where author a0 is linked to N books (default 20,000) and a1 to one;
then 200 new books, each created with its book_author row in one transaction
of 2 events (`denormd replay --batch-size 2`), linked to a0, and the same for
a1. With count, ids and lookup through the link, the two runs should take the
same time per transaction (issue 26, point 1): a link change reads a counter
and splices a list instead of reading every link of the document.

    python3 bench/link_cost.py [--books 20000] [--without-ids] [--postgres URL]
                               [--binary build/denormd]

Needs a PostgreSQL (the URL, or $DENORMD_POSTGRES / $DENORMD_TEST_POSTGRES);
uses the schema link_cost (dropped first). Prints one line per run and the
ratio; writes nothing else.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CONFIG = """\
store:
  postgres: {postgres}
  schema: link_cost
entities: [author, book, book_author]
projections:
  authors:
    from: author
    fields:
      countOfBooks: {{count: book, through: book_author, from: author_id, to: book_id}}
{ids_field}  books:
    from: book
    fields:
      authors: {{lookup: author, through: book_author, from: book_id, to: author_id, select: [name]}}
"""


def event(type_, id_, data):
    return json.dumps({"type": type_, "id": id_, "op": "upsert", "data": data})


def book_with_link(book, author):
    return [event("book", book, {"title": "T " + book}),
            event("book_author", book + ":" + author, {"book_id": book, "author_id": author})]


def write(path, lines):
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")


def replay(binary, config, path, batch_size=None):
    args = [binary, "replay", "-q", "-c", config, path]
    if batch_size:
        args[2:2] = ["--batch-size", str(batch_size)]
    start = time.monotonic()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--books", type=int, default=20000, help="books linked to a0")
    parser.add_argument("--new", type=int, default=200, help="new linked books per run")
    parser.add_argument("--postgres", default=os.environ.get(
        "DENORMD_POSTGRES", os.environ.get("DENORMD_TEST_POSTGRES", "")))
    parser.add_argument("--binary", default="build/denormd")
    parser.add_argument("--without-ids", action="store_true",
                        help="leave bookIds out: a0's document then stays small, and what is "
                             "left is the change's own cost")
    args = parser.parse_args()
    if not args.postgres:
        sys.exit("link_cost.py: give --postgres URL (or set $DENORMD_POSTGRES)")
    subprocess.run(["psql", args.postgres, "-qc", "set client_min_messages = warning; "
                    "drop schema if exists link_cost cascade"], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "config.yaml")
        with open(config, "w") as out:
            ids = ("      bookIds: {ids: book, through: book_author, from: author_id, to: book_id}\n"
                   if not args.without_ids else "")
            out.write(CONFIG.format(postgres=json.dumps(args.postgres), ids_field=ids))
        setup = [event("author", "a0", {"name": "Big"}), event("author", "a1", {"name": "Small"})]
        for i in range(args.books):
            setup += book_with_link("b%06d" % i, "a0")
        setup += book_with_link("c000000", "a1")
        write(os.path.join(tmp, "setup.jsonl"), setup)
        seconds = replay(args.binary, config, os.path.join(tmp, "setup.jsonl"))
        print("setup: %d events in %.1f s" % (len(setup), seconds))
        per_transaction = {}
        for author, prefix in (("a0", "x"), ("a1", "y")):
            lines = []
            for i in range(args.new):
                lines += book_with_link("%s%06d" % (prefix, i), author)
            path = os.path.join(tmp, author + ".jsonl")
            write(path, lines)
            seconds = replay(args.binary, config, path, batch_size=2)
            per_transaction[author] = seconds / args.new * 1000
            print("%d books linked to %s (%s links before): %.1f s, %.1f ms per transaction"
                  % (args.new, author, args.books if author == "a0" else 1, seconds,
                     per_transaction[author]))
        print("ratio a0/a1: %.2f" % (per_transaction["a0"] / per_transaction["a1"]))
        subprocess.run([args.binary, "verify", "-c", config], check=True, stdout=subprocess.DEVNULL)
        print("verify: no differences")


if __name__ == "__main__":
    main()
