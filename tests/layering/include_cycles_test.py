#!/usr/bin/env python3
"""The includes of denormd's sources form no cycle (issue 29, point 8).

cmake/CheckLayering.cmake holds the folders to one direction
(common <- config <- projections <- formats <- connectors <- daemon); this holds
the files inside them: no file reaches itself through its #include "..." lines.
A cycle builds today (include guards) but makes an order between headers that no
one chose, and a header that cannot be understood without the one that includes it.

Usage: include_cycles_test.py SOURCE_DIR
"""
import os
import re
import sys

FOLDERS = ("common", "config", "projections", "formats", "connectors", "daemon")
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def include_graph(source_dir):
    """{file: [project files it includes]}, paths relative to source_dir."""
    graph = {}
    for folder in FOLDERS:
        for root, _, names in os.walk(os.path.join(source_dir, folder)):
            for name in names:
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.relpath(os.path.join(root, name), source_dir)
                with open(os.path.join(source_dir, path), encoding="utf-8") as f:
                    included = INCLUDE.findall(f.read())
                graph[path] = [p for p in included
                               if os.path.exists(os.path.join(source_dir, p))]
    return graph


def find_cycle(graph):
    """One cycle as [a, b, ..., a], or None when the graph has none."""
    state = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, iters = [start], [iter(graph.get(start, ()))]
        state[start] = 1
        while path:
            step = next(iters[-1], None)
            if step is None:
                state[path.pop()] = 2
                iters.pop()
            elif state.get(step) == 1:
                return path[path.index(step):] + [step]
            elif not state.get(step):
                state[step] = 1
                path.append(step)
                iters.append(iter(graph.get(step, ())))
    return None


def main():
    # The detector itself: a cycle three files long is found, a chain is not.
    assert find_cycle({"a.h": ["b.h"], "b.h": ["c.h"], "c.h": ["a.h"]}) == \
        ["a.h", "b.h", "c.h", "a.h"], "the checker missed a cycle"
    assert find_cycle({"a.cc": ["a.h", "b.h"], "a.h": ["b.h"], "b.h": []}) is None, \
        "the checker saw a cycle in a chain"
    graph = include_graph(sys.argv[1])
    if len(graph) < 100:
        print(f"FAIL: only {len(graph)} sources found under {sys.argv[1]}")
        return 1
    cycle = find_cycle(graph)
    if cycle:
        print("FAIL: an include cycle: " + " -> ".join(cycle))
        return 1
    edges = sum(len(v) for v in graph.values())
    print(f"ok: {len(graph)} sources, {edges} project includes, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
