#!/usr/bin/env python3
"""The benchmark drops only schemas it made (bench/harness/store.py, drop_schema): one
carrying its mark goes, one without any comment (made by hand beside it) is refused with
its name and stays, and an absent one is nothing to do. The schema without a comment used
to be taken for an absent one: neither dropped nor refused.

Usage: drop_schema_test.py REPO; needs DENORMD_TEST_POSTGRES (scripts/test.sh exports it).
"""

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pg_test_support import PG, check, fresh_psql  # noqa: E402  (puts bench/ on the path)
from harness.services import BenchError, Env  # noqa: E402
from harness.store import drop_schema, mark_schema  # noqa: E402


def exists(schema):
    return fresh_psql(f"select count(*) from pg_namespace where nspname = '{schema}'") == [["1"]]


def main():
    marked, unmarked = "bench_drop_test_marked", "bench_drop_test_unmarked"
    with tempfile.TemporaryDirectory() as state:
        env = Env(argparse.Namespace(state_dir=state, pg_port=0, kafka_port=0))
        env.pg_url = PG
        env.owned = True  # what check_server_ownership sets for the harness's own server
        try:
            for schema in (marked, unmarked):
                fresh_psql(f'drop schema if exists "{schema}" cascade; create schema "{schema}"')
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
            fresh_psql(f'drop schema if exists "{unmarked}" cascade')
    print("PASS")


if __name__ == "__main__":
    main()
