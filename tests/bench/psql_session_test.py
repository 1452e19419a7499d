#!/usr/bin/env python3
"""The benchmark's progress polls (Env.poll_query, bench/harness/services.py) run on one kept
psql session instead of a new psql per poll: their answers are a fresh psql's, many polls
are one process, a failing statement is a BenchError with the server's words, and a
session whose server connection went (as across a PostgreSQL restart) is replaced by the
next poll.

Usage: psql_session_test.py REPO; needs DENORMD_TEST_POSTGRES (scripts/test.sh exports it).
"""

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pg_test_support import PG, check, fresh_psql  # noqa: E402  (puts bench/ on the path)
from harness.services import BenchError, Env  # noqa: E402


def main():
    with tempfile.TemporaryDirectory() as state:
        env = Env(argparse.Namespace(state_dir=state, pg_port=0, kafka_port=0))
        env.pg_url = PG
        try:
            # Rows of several columns, a '|' inside a value, an empty answer.
            queries = ["select g, 'a|b' || g, null from generate_series(1, 5) g",
                       "select 1 where false",
                       "select count(*) from pg_class where relname like 'pg_%'"]
            for sql in queries:
                check(env.poll_query(sql) == fresh_psql(sql), f"poll of {sql!r}: "
                      f"{env.poll_query(sql)} against a fresh psql's {fresh_psql(sql)}")
            check(env.poll_scalar("select 7 * 6") == "42", "poll_scalar")

            pid = env.poll_scalar("select pg_backend_pid()")
            for _ in range(50):
                env.poll_scalar("select 1")
            check(env.poll_scalar("select pg_backend_pid()") == pid,
                  "50 polls did not stay on one server session")

            try:
                env.poll_query("select no_such_column")
                check(False, "a failing statement answered")
            except BenchError as e:
                check("no_such_column" in str(e), f"the error does not name the cause: {e}")

            # The session's connection goes (a server restart does this): the next poll
            # answers on a new one.
            pid = env.poll_scalar("select pg_backend_pid()")
            fresh_psql(f"select pg_terminate_backend({pid})")
            check(env.poll_scalar("select 5") == "5", "no answer after the session's connection went")
            check(env.poll_scalar("select pg_backend_pid()") != pid, "the gone session answered")
        finally:
            env.close()
            check(env._poller is None, "close left the session")
    print("PASS")


if __name__ == "__main__":
    main()
