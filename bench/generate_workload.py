#!/usr/bin/env python3
"""Generates the benchmark's workload: the article's model with realistic skew.

Writes two JSON Lines event logs into --out:
  load.jsonl     the initial state: authors, books (1-3 authors each, Zipf, so a few
                 authors have thousands of books), posts, comments (Zipf over posts)
  changes.jsonl  a change stream mixing new comments, book upserts and patches,
                 author renames and thumbnail changes (the fan-out case), deletes and
                 reference moves (a book changing authors, a comment changing posts)

Seeded and reproducible: the same flags give byte-identical files.
"""

import argparse
import bisect
import itertools
import json
import os
import random
import sys


def zipf_sampler(rng, n, s):
    """Returns f() drawing 0..n-1 with P(k) proportional to 1/(k+1)^s."""
    weights = [1.0 / (k + 1) ** s for k in range(n)]
    cdf = list(itertools.accumulate(weights))
    total = cdf[-1]
    return lambda: min(n - 1, bisect.bisect_left(cdf, rng.random() * total))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--authors", type=int, default=10_000)
    p.add_argument("--books", type=int, default=100_000)
    p.add_argument("--posts", type=int, default=1_000)
    p.add_argument("--comments", type=int, default=1_000_000)
    p.add_argument("--changes", type=int, default=200_000, help="events in the change stream")
    p.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent of the skew")
    p.add_argument("--seed", type=int, default=20261125)
    p.add_argument("--id-prefix", default="",
                   help="prepended to every entity id and reference (a store's extra entities "
                        "that no other workload touches)")
    p.add_argument("--out", required=True, help="directory for load.jsonl and changes.jsonl")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    P = args.id_prefix
    hot_author = zipf_sampler(rng, args.authors, args.zipf)
    hot_post = zipf_sampler(rng, args.posts, args.zipf)
    version = {}
    clock = [1_700_000_000_000]  # createdAt, milliseconds

    def event(kind, eid, op, data=None):
        key = (kind, eid)
        version[key] = version.get(key, 0) + 1
        e = {"type": kind, "id": eid, "op": op, "version": version[key]}
        if data is not None:
            e["data"] = data
        return json.dumps(e, separators=(",", ":"))

    def author_data(i, generation=0):
        images = [{"profile": f"https://img.example/a{i}-p.png"}]
        images.insert(rng.randrange(2), {"thumbnail": f"https://img.example/a{i}-t{generation}.png"})
        return {"firstName": f"First{i}", "lastName": f"Last{i}", "images": images}

    def book_authors():
        ids = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            a = f"{P}a{hot_author()}"
            if a not in ids:
                ids.append(a)
        return ids

    def comment_data(post=None):
        clock[0] += rng.randrange(1, 2000)
        return {"postId": post or f"{P}p{hot_post()}", "author": f"user{rng.randrange(50_000)}",
                "comment": "x" * rng.randrange(20, 120), "createdAt": clock[0]}

    live_books = list(range(args.books))
    live_comments = list(range(args.comments))
    with open(os.path.join(args.out, "load.jsonl"), "w") as out:
        for i in range(args.authors):
            out.write(event("author", f"{P}a{i}", "upsert", author_data(i)) + "\n")
        for i in range(args.books):
            out.write(event("book", f"{P}b{i}", "upsert",
                            {"name": f"Book {i}", "authorIds": book_authors(),
                             "pubYear": 1990 + rng.randrange(35)}) + "\n")
        for i in range(args.posts):
            out.write(event("post", f"{P}p{i}", "upsert",
                            {"name": f"Post {i}", "summary": "s" * 60}) + "\n")
        for i in range(args.comments):
            out.write(event("comment", f"{P}c{i}", "upsert", comment_data()) + "\n")

    next_book, next_comment = args.books, args.comments
    mix = [  # (weight, kind of change)
        (50, "new_comment"), (8, "new_book"), (12, "book_rename"), (4, "book_move"),
        (5, "author_rename"), (5, "author_thumbnail"), (3, "book_delete"),
        (6, "comment_delete"), (4, "comment_edit"), (3, "comment_move"),
    ]
    kinds = [k for w, k in mix for _ in range(w)]
    with open(os.path.join(args.out, "changes.jsonl"), "w") as out:
        for _ in range(args.changes):
            kind = rng.choice(kinds)
            if kind == "new_comment":
                line = event("comment", f"{P}c{next_comment}", "upsert", comment_data())
                live_comments.append(next_comment)
                next_comment += 1
            elif kind == "new_book":
                line = event("book", f"{P}b{next_book}", "upsert",
                             {"name": f"Book {next_book}", "authorIds": book_authors(),
                              "pubYear": 2026})
                live_books.append(next_book)
                next_book += 1
            elif kind == "book_rename":
                b = rng.choice(live_books)
                line = event("book", f"{P}b{b}", "patch", {"name": f"Book {b}, 2nd ed."})
            elif kind == "book_move":
                b = rng.choice(live_books)
                line = event("book", f"{P}b{b}", "patch", {"authorIds": book_authors()})
            elif kind == "author_rename":
                a = rng.randrange(args.authors)
                line = event("author", f"{P}a{a}", "patch", {"lastName": f"Last{a}-{rng.randrange(1000)}"})
            elif kind == "author_thumbnail":
                a = rng.randrange(args.authors)
                line = event("author", f"{P}a{a}", "patch",
                             {"images": author_data(a, rng.randrange(1, 1000))["images"]})
            elif kind == "book_delete":
                b = live_books.pop(rng.randrange(len(live_books)))
                line = event("book", f"{P}b{b}", "delete")
            elif kind == "comment_delete":
                c = live_comments.pop(rng.randrange(len(live_comments)))
                line = event("comment", f"{P}c{c}", "delete")
            elif kind == "comment_edit":
                c = rng.choice(live_comments)
                line = event("comment", f"{P}c{c}", "patch", {"comment": "edited " + "y" * 40})
            else:  # comment_move: a reference move between posts
                c = rng.choice(live_comments)
                line = event("comment", f"{P}c{c}", "patch", {"postId": f"{P}p{hot_post()}"})
            out.write(line + "\n")
    print(f"wrote {args.out}/load.jsonl and {args.out}/changes.jsonl", file=sys.stderr)


if __name__ == "__main__":
    main()
