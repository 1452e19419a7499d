#!/usr/bin/env python3
"""bench/harness/horizontal.py without services: the instance counts it accepts, the
assignment it reads from daemon logs and when it calls it stable, the lock sampler's tally,
and the table and verdict it reports.

Usage: horizontal_test.py REPO
"""

import os
import sys

REPO = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.dont_write_bytecode = True
from harness import horizontal  # noqa: E402


def assigned(*partitions):
    return ("ts=2026-11-28T18:02:00.649Z level=info event=partitions_assigned partitions="
            + ",".join(f"t/{p}@beginning" for p in partitions) + "\n")


def revoked(*partitions):
    return ("ts=2026-11-28T18:02:05.015Z level=info event=partitions_revoked partitions="
            + ",".join(f"t/{p}" for p in partitions) + "\n")


def check_counts():
    assert horizontal.instance_counts("1,2,4") == [1, 2, 4]
    assert horizontal.instance_counts("") == []
    for bad in ("0", "5", "1,8"):
        try:
            horizontal.instance_counts(bad)
        except ValueError as e:
            assert "1 to 4" in str(e), e
        else:
            raise AssertionError(f"{bad!r} accepted")


def check_assignment():
    assert horizontal.assignment("ts=... event=daemon_started\n") is None
    assert horizontal.assignment(assigned(0, 1, 2, 3)) == {"t/0", "t/1", "t/2", "t/3"}
    # The last event counts: revoked, then assigned a share.
    assert horizontal.assignment(assigned(0, 1, 2, 3) + revoked(0, 1, 2, 3)) is None
    assert horizontal.assignment(assigned(0, 1, 2, 3) + revoked(0, 1, 2, 3) + assigned(2, 3)) \
        == {"t/2", "t/3"}
    a, b = {"t/0", "t/1"}, {"t/2", "t/3"}
    assert horizontal.stable([a | b])
    assert horizontal.stable([a, b])
    assert not horizontal.stable([a | b, None]), "an instance without a share"
    assert not horizontal.stable([a | b, b]), "a partition held twice (a rebalance under way)"
    assert not horizontal.stable([a]), "a partition held by nobody"
    assert not horizontal.stable([a, set()]), "an empty assignment"


def check_tally():
    lines = ["2 1 1\n", "0 0 0\n", "", "ERROR:  canceling statement due to user request\n",
             "3 2 0\n", "1 0\n"]
    assert horizontal.tally(lines) == (3, 5, 3, 1)
    assert horizontal.tally([]) == (0, 0, 0, 0)


def row(n, lock, busy, differ=0, keying="entity"):
    f = {"instances": n, "keying": keying, "rate": 4000.0, "batches": 5, "lock_share": lock,
         "writers_share": lock / 2, "busy_retries": 2, "busy_share": busy,
         "transient_retries": 0, "differ": differ}
    f["wait_low"], f["wait_high"] = horizontal.wait_range(f)
    return f


def check_report():
    assert horizontal.report_lines({}) == []
    assert horizontal.targets({}) == []
    results = {"horizontal": [row(1, 0.0, 0.0), row(2, 0.03, 0.01), row(4, 0.2, 0.1, differ=3)]}
    text = "\n".join(horizontal.report_lines(results))
    entity = "by entity (type:id)"
    assert f"| {entity} | 2 | 4,000 | 5 | 3.0% (1.5%) | 2 (1.0%) | 0 | 3.0%–4.0% | identical |" \
        in text, text
    assert (f"| {entity} | 4 | 4,000 | 5 | 20.0% (10.0%) | 2 (10.0%) | 0 | 20.0%–30.0% "
            "| WRONG: 3 differ |") in text, text
    assert horizontal.targets(results)[0][1:] == ("3.0%–4.0%", "MET")
    results["horizontal"][1] = row(2, 0.04, 0.02)
    assert horizontal.targets(results)[0][1:] == ("4.0%–6.0%", "n/a (the range straddles 5 %)")
    results["horizontal"][1] = row(2, 0.05, 0.0)
    assert horizontal.targets(results)[0][1:] == ("5.0%", "NOT MET")
    # Shares whose sum passes 100 % (waits inside rolled-back attempts) cap at it.
    assert horizontal.wait_range({"lock_share": 0.7, "busy_share": 0.48}) == (0.7, 1.0)
    results["horizontal"][1] = row(2, 0.0, 0.0, differ=1)
    assert horizontal.targets(results)[0][2] == "NOT MET", "wrong documents never meet it"
    # One verdict per keying's 2-instance run.
    results["horizontal"].append(row(2, 0.01, 0.0, keying="post"))
    verdicts = horizontal.targets(results)
    assert [v[2] for v in verdicts] == ["NOT MET", "MET"], verdicts
    assert "keyed comments by their post" in verdicts[1][0], verdicts


def check_keying():
    assert horizontal.keyings("entity,post") == ["entity", "post"]
    try:
        horizontal.keyings("entity,author")
    except ValueError as e:
        assert "author" in str(e), e
    else:
        raise AssertionError("an unknown keying accepted")
    load = ['{"type":"post","id":"p1","op":"upsert","version":1,"data":{"name":"P1"}}\n',
            '{"type":"comment","id":"c1","op":"upsert","version":1,"data":{"postId":"p1"}}\n']
    changes = [
        # a comment of the load: keyed by the post the load gave it
        '{"type":"comment","id":"c1","op":"patch","version":2,"data":{"comment":"x"}}\n',
        # a new comment, then moved: every event keyed by the post it first named
        '{"type":"comment","id":"c2","op":"upsert","version":1,"data":{"postId":"p2"}}\n',
        '{"type":"comment","id":"c2","op":"patch","version":2,"data":{"postId":"p1"}}\n',
        '{"type":"comment","id":"c2","op":"delete","version":3}\n',
        # a comment never seen with a post, and any other type: type:id
        '{"type":"comment","id":"c3","op":"delete","version":2}\n',
        '{"type":"book","id":"b1","op":"patch","version":2,"data":{"name":"B"}}\n',
    ]
    keyed = horizontal.keyed_by_post(load, changes)
    assert [k for k, _ in keyed] == [b"post:p1", b"post:p2", b"post:p2", b"post:p2",
                                     b"comment:c3", b"book:b1"], keyed
    assert [v for _, v in keyed] == [c.rstrip("\n").encode() for c in changes], \
        "the records are the lines, in order"


check_counts()
check_assignment()
check_tally()
check_report()
check_keying()
print("horizontal_test: ok")
