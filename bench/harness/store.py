"""The stores in the benchmark's PostgreSQL: the harness's schemas (marked as its own, and
dropped only then), statistics and checkpoints between phases, row writes, the documents'
check against a reference, bench/config.yaml for a schema, `denormd replay` into a store,
copies of a loaded store, and the reference store advanced along the change stream."""

import os
import re
import shlex
import subprocess
import time

from .requests import REPLAY_REQUESTS, store_requests
from .services import BENCH, BenchError, fmt_count, log, timed_process
from .workload import slice_lines

COLLECTIONS = ["authors", "books", "posts", "post_comments"]
SCHEMAS = {  # contender -> schema
    "ceiling": "bench_ceiling", "replay": "bench_replay", "run": "bench_run",
    "ref": "bench_ref", "triggers": "bench_triggers", "small": "bench_small",
    "kstreams": "bench_kstreams", "feed": "bench_feed",
    "floor": "bench_floor", "floor_writes": "bench_floor_writes",
    "relational": "bench_relational",
    "horizontal_base": "bench_horizontal_base", "horizontal": "bench_horizontal",
}
COPY_OPTS = "with (format csv, quote e'\\x01', delimiter e'\\x02')"  # each line one text value

SCHEMA_MARK_PREFIX = "created by denormd bench/run.py, state dir "


def schema_mark(env):
    return SCHEMA_MARK_PREFIX + env.state_dir


def mark_schema(env, schema):
    """Marks a schema the run created, so that only such schemas are ever dropped."""
    env.psql(f"comment on schema \"{schema}\" is '{schema_mark(env)}'")


def drop_schema(env, schema):
    """Drops a schema this harness created (marked) in its own server; refuses anything else."""
    if not env.owned:
        raise BenchError(f"refusing to drop schema {schema}: the server was not verified as this "
                         "run's own")
    # "=" before the comment: a schema without one is a row too, not an empty answer.
    comment = env.scalar("select '=' || coalesce(obj_description(oid, 'pg_namespace'), '') "
                         f"from pg_namespace where nspname = '{schema}'")
    if comment is None:
        return  # no such schema
    comment = comment[1:]
    if comment != schema_mark(env):
        raise BenchError(f"schema {schema} exists but was not created by this benchmark's state dir "
                         f"({comment!r}); drop it yourself if it is to go")
    env.psql(f'drop schema if exists "{schema}" cascade')


def vacuum_analyze(env, schema):
    """Untimed, after each LOAD: every contender starts CHANGES with fresh statistics."""
    tables = [r[0] for r in env.query(
        f"select tablename from pg_tables where schemaname = '{schema}'")]
    if tables:
        env.psql("vacuum analyze " + ", ".join(f'"{schema}"."{t}"' for t in tables))


def checkpoint(env):
    env.psql("checkpoint")


def row_writes(env, schema):
    """n_tup_ins + n_tup_upd + n_tup_del of the collection tables (stable reading).

    Backends report their counters when they exit, a moment after the client does:
    read until two readings agree."""
    names = ", ".join(f"'{c}'" for c in COLLECTIONS)
    sql = (f"select coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) from pg_stat_user_tables "
           f"where schemaname = '{schema}' and relname in ({names})")
    last = None
    for _ in range(40):
        v = int(env.scalar(sql))
        if v == last:
            return v
        last = v
        time.sleep(0.3)
    return last


# Bucket collections (bench/config.yaml's `buckets`): collection -> (group field, items field).
# Which member sits in which bucket may depend on batching (DESIGN.md, "Buckets (revised
# contract)"), so they are compared by content: per group, the items of its documents
# concatenated in ascending `seq` order (the id's numeric suffix, "p1:3", where a document has
# no `seq`). The other collections are compared document by document.
BUCKETS = {"post_comments": ("postId", "comments")}


def bucket_groups_sql(schema, collection):
    by, field = BUCKETS[collection]
    return (f"select g, jsonb_agg(item order by seq, ord) as items from ("
            f"select d.doc->>'{by}' as g, coalesce((d.doc->>'seq')::numeric, "
            f"substring(d.id from ':([0-9]+)$')::numeric) as seq, e.item, e.ord "
            f"from \"{schema}\".\"{collection}\" d, "
            f"jsonb_array_elements(d.doc->'{field}') with ordinality e(item, ord)) m group by g")


def compare_documents(env, schema, reference):
    """Documents that differ between schema and reference (full outer join on id); for a
    bucket collection, the groups whose content differs."""
    parts = []
    for c in COLLECTIONS:
        if c in BUCKETS:
            parts.append(
                f"select count(*) from ({bucket_groups_sql(schema, c)}) x full outer join "
                f"({bucket_groups_sql(reference, c)}) y on x.g = y.g "
                f"where x.g is null or y.g is null or x.items is distinct from y.items")
            continue
        parts.append(
            f"select count(*) from (select id, doc from \"{schema}\".\"{c}\") x "
            f"full outer join (select id, doc from \"{reference}\".\"{c}\") y on x.id = y.id "
            f"where x.id is null or y.id is null or x.doc is distinct from y.doc")
    rows = env.query("select " + ", ".join(f"({p})" for p in parts))
    diffs = dict(zip(COLLECTIONS, (int(v) for v in rows[0])))
    total = sum(diffs.values())
    docs = int(env.scalar("select " + " + ".join(
        f"(select count(*) from \"{reference}\".\"{c}\")" for c in COLLECTIONS)))
    return total, diffs, docs


def check(env, result_key, results, schema, reference, label):
    total, diffs, docs = compare_documents(env, schema, reference)
    if total == 0:
        log(f"check {label}: identical to denormd's {fmt_count(docs)} documents")
    else:
        detail = ", ".join(f"{c} {n}" + (" groups (by content)" if c in BUCKETS else "")
                           for c, n in diffs.items() if n)
        log(f"check {label}: WRONG: {total} documents differ ({detail})")
    results.setdefault("checks", []).append(
        {"contender": result_key, "label": label, "differ": total, "documents": docs,
         "detail": diffs})
    if total:
        results["contenders"].setdefault(result_key, {})["wrong"] = total
    return total


def write_config(env, schema, topic=None, group=None):
    src = open(os.path.join(BENCH, "config.yaml")).read()
    text, n = re.subn(r"(?m)^(\s*schema:\s*)\S+", lambda m: m.group(1) + schema, src, count=1)
    if n != 1:
        raise BenchError("bench/config.yaml: no store.schema line to set")
    if topic:
        text, n = re.subn(r"topics:\s*\[[^\]]*\]", f"topics: [{topic}]", text, count=1)
        if n != 1:
            raise BenchError("bench/config.yaml: no source.kafka.topics to set")
    if group:
        text, n = re.subn(r"group:\s*[\w.-]+", f"group: {group}", text, count=1)
        if n != 1:
            raise BenchError("bench/config.yaml: no source.kafka.group to set")
    if getattr(env.args, "max_lanes", 0):
        text, n = re.subn(r"(?m)^batch:\s*\{", f"batch: {{max_lanes: {env.args.max_lanes}, ", text,
                          count=1)
        if n != 1:
            raise BenchError("bench/config.yaml: no `batch: {...}` line to set max_lanes in")
    path = os.path.join(env.work, f"config-{schema}" + (f"-{topic}" if topic else "") + ".yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


REPLAY_SUMMARY = re.compile(
    r"([\d,]+) events?.* in ([\d,]+) transactions?, ([\d.]+) s: .*?([\d,]+) documents? written"
    r"(?:, ([\d,]+) deleted)?(?:; peak RSS (\d+) MiB)?")


def denormd_replay(env, schema, config, path, what):
    """Replays one log; returns a dict: events, seconds, rss_kib, documents (pg_stat)."""
    before = row_writes(env, schema)
    out_path = os.path.join(env.work, f"replay-{schema}-{os.path.basename(path)}.out")
    seconds, stdout, rss = timed_process(
        env, [env.denormd, "replay", "-q", "-c", config, path], what, stdout_path=out_path)
    m = REPLAY_SUMMARY.search(stdout)
    if not m:
        raise BenchError(f"{what}: no summary line in denormd replay's output:\n{stdout[-2000:]}")
    events = int(m.group(1).replace(",", ""))
    r = {"events": events, "seconds": seconds, "denormd_seconds": float(m.group(3)),
         "transactions": int(m.group(2).replace(",", "")),
         "denormd_documents_written": int(m.group(4).replace(",", "")),
         "rss_kib": rss, "summary": stdout.strip()}
    # denormd's own peak (VmHWM): wait4's ru_maxrss is kept across exec, so it
    # starts at this harness's size.
    own = re.search(r"peak RSS (\d+) MiB", stdout)
    if own:
        r["rss_kib"] = int(own.group(1)) * 1024
    q = REPLAY_REQUESTS.search(stdout)
    r["requests"] = store_requests(events, r["transactions"],
                                   *(int(v.replace(",", "")) for v in q.groups())) if q else None
    r["documents"] = row_writes(env, schema) - before
    return r


def create_denormd_schema(env, schema):
    """An empty store, created by denormd itself (verify on an empty schema does nothing else)."""
    drop_schema(env, schema)
    config = write_config(env, schema)
    env.run([env.denormd, "verify", "-q", "-c", config], f"create schema {schema}")
    mark_schema(env, schema)
    return config


def clone_schemas(env, src, dsts, exclude=("positions", "dead_letters")):
    """Copies every table's rows from src into each of dsts (which denormd created empty),
    the copies running side by side (untimed), then VACUUM ANALYZE."""
    tables = [r[0] for r in env.query(
        f"select tablename from pg_tables where schemaname = '{src}' order by tablename")]
    procs = []
    for dst in dsts:
        stmts = ["begin;", "set local session_replication_role = replica;"]
        for t in tables:
            if t in exclude:
                continue
            cols = [r[0] for r in env.query(
                f"select column_name from information_schema.columns where table_schema = '{src}' "
                f"and table_name = '{t}' and is_generated = 'NEVER' order by ordinal_position")]
            collist = ", ".join(f'"{c}"' for c in cols)
            stmts.append(f'delete from "{dst}"."{t}";')  # e.g. what denormd wrote on creating it
            stmts.append(f'insert into "{dst}"."{t}" ({collist}) select {collist} from "{src}"."{t}";')
        stmts.append("commit;")
        path = os.path.join(env.work, f"clone-{dst}.sql")
        with open(path, "w") as f:
            f.write("\n".join(stmts) + "\n")
        cmd = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", env.pg_url, "-f", path]
        procs.append((dst, cmd, subprocess.Popen(cmd, env=env.env, stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE, text=True)))
    for dst, cmd, p in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            raise BenchError(f"clone {src} into {dst} failed: {shlex.join(cmd)}\n{err[-3000:]}")
    for dst in dsts:
        vacuum_analyze(env, dst)


def ref_advance(env, state, changes, upto):
    """Advances the reference store (denormd, untimed) to line `upto` of the change stream."""
    if upto <= state["at"]:
        return
    path = slice_lines(changes, os.path.join(env.work, f"changes-{state['at']}-{upto}.jsonl"),
                       state["at"], upto)
    log(f"reference: denormd replay of changes [{state['at']}, {upto}) into {SCHEMAS['ref']} (untimed)")
    denormd_replay(env, SCHEMAS["ref"], state["config"], path, "reference replay")
    state["at"] = upto
