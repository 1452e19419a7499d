"""What the tests of the benchmark's harness against a real PostgreSQL share: the repository
(argv[1], else this file's) with bench/ importable, the server (DENORMD_TEST_POSTGRES,
which scripts/test.sh exports), a fresh psql's answers, and a check that fails the test
with its reason."""

import os
import subprocess
import sys

REPO = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))

PG = os.environ.get("DENORMD_TEST_POSTGRES")
if not PG:
    sys.exit("FAIL: DENORMD_TEST_POSTGRES is not set (scripts/test.sh exports it)")


def fresh_psql(sql):
    """The rows of `sql` from a psql of its own, each a list of its columns' text."""
    out = subprocess.run(["psql", "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", "-d", PG, "-c", sql],
                         capture_output=True, text=True, check=True).stdout.strip()
    return [line.split("|") for line in out.splitlines()] if out else []


def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)
