#!/usr/bin/env python3
"""The benchmark drops only schemas it made (bench/harness/store.py, drop_schema): one
carrying its mark goes, one without any comment (made by hand beside it) is refused with
its name and stays, and an absent one is nothing to do. The schema without a comment used
to be taken for an absent one: neither dropped nor refused.

Usage: drop_schema_test.py REPO; needs DENORMD_TEST_POSTGRES (scripts/test.sh exports it).
"""

import argparse
import os
import subprocess
import sys
import tempfile

REPO = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
from harness.services import BenchError, Env  # noqa: E402
from harness.store import drop_schema, mark_schema  # noqa: E402

PG = os.environ.get("DENORMD_TEST_POSTGRES")
if not PG:
    sys.exit("FAIL: DENORMD_TEST_POSTGRES is not set (scripts/test.sh exports it)")


def sql(statement):
    return subprocess.run(["psql", "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", "-d", PG, "-c",
                           statement], capture_output=True, text=True, check=True).stdout.strip()


def exists(schema):
    return sql(f"select count(*) from pg_namespace where nspname = '{schema}'") == "1"


def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)


def main():
    marked, unmarked = "bench_drop_test_marked", "bench_drop_test_unmarked"
    with tempfile.TemporaryDirectory() as state:
        env = Env(argparse.Namespace(state_dir=state, pg_port=0, kafka_port=0))
        env.pg_url = PG
        env.owned = True  # what check_server_ownership sets for the harness's own server
        try:
            for schema in (marked, unmarked):
                sql(f'drop schema if exists "{schema}" cascade; create schema "{schema}"')
            mark_schema(env, marked)
            drop_schema(env, marked)
            check(not exists(marked), "the marked schema was not dropped")
            try:
                drop_schema(env, unmarked)
                check(False, "the schema without a comment was neither dropped nor refused")
            except BenchError as e:
                check(unmarked in str(e), f"the refusal does not name the schema: {e}")
            check(exists(unmarked), "the schema without a comment was dropped")
            drop_schema(env, "bench_drop_test_absent")  # nothing to do, no error
        finally:
            env.close()
            sql(f'drop schema if exists "{unmarked}" cascade')
    print("PASS")


if __name__ == "__main__":
    main()
