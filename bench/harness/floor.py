"""The write floor, a bound rather than a contender: per batch of denormd's batch.max_events,
one transaction that writes the batch's source rows as the ceiling does and only the
documents that batch changed, in bulk, into bare tables."""

import json
import os
import re

from .contenders.ceiling import SOURCE_ROWS_SQL
from .services import BENCH, BenchError, fmt_count, log, timed_process
from .store import (COLLECTIONS, COPY_OPTS, SCHEMAS, checkpoint, denormd_replay, drop_schema,
                    mark_schema, vacuum_analyze)
from .workload import slice_lines


def config_batch_events():
    """bench/config.yaml's batch.max_events: the events in each of replay's transactions."""
    m = re.search(r"max_events:\s*(\d+)", open(os.path.join(BENCH, "config.yaml")).read())
    if not m:
        raise BenchError("bench/config.yaml: no batch.max_events")
    return int(m.group(1))


# The write floor's statement for the documents one batch changed: upserted (or deleted) in
# one statement. (Its source rows: SOURCE_ROWS_SQL, as the ceiling writes them.)
FLOOR_DOCUMENTS_SQL = """create temp table document_lines (line text) on commit drop;
\\copy document_lines from '{documents}' {copy}
with x as (select line::jsonb as e from document_lines),
gone as (delete from {table} d using x
         where (x.e->>'deleted')::boolean and d.collection = x.e->>'c' and d.id = x.e->>'id')
insert into {table} (collection, id, pk, seq, doc)
select e->>'c', e->>'id', e->>'pk', (e->>'seq')::bigint, e->'doc' from x
where not (e->>'deleted')::boolean
on conflict (collection, id) do update set pk = excluded.pk, seq = excluded.seq, doc = excluded.doc;
"""


def measure(env, results, changes, n_changes, config):
    """The write floor: what writing only the rows that change costs PostgreSQL, committed
    every `batch.max_events` events as denormd commits.

    Untimed, per batch: denormd replay applies it to a copy of the loaded store (schema
    "floor"), and the documents it wrote whose content or seq differs from before, and those
    it deleted, are exported. Timed: one psql that runs one transaction per batch, each
    writing the batch's source rows as the ceiling does and those documents in one upsert,
    into bare tables (schema "floor_writes": primary keys and the bucket paging index only).
    No reads, no reference index, no counters: a floor under any maintainer of these
    documents that commits as often. Its rate against the ceiling bounds the throughput
    target."""
    store, w = SCHEMAS["floor"], SCHEMAS["floor_writes"]
    batch = config_batch_events()
    drop_schema(env, w)
    union = " union all ".join(f"select '{c}' as collection, id, pk, seq, doc, xmin from "
                               f'"{store}"."{c}"' for c in COLLECTIONS)
    documents_table = (f'(collection text collate "C", id text collate "C", pk text collate "C", '
                       "seq bigint, doc jsonb not null, primary key (collection, id))")
    env.psql(f'create schema "{w}"; '
             f'create table "{w}".sources (type text collate "C", id text collate "C", '
             f"version numeric, deleted boolean not null default false, data jsonb, "
             f"primary key (type, id)); "
             f'insert into "{w}".sources select type, id, version, deleted, data from "{store}".entities; '
             f'create table "{w}".documents {documents_table}; '
             f'insert into "{w}".documents select collection, id, pk, seq, doc from ({union}) d; '
             f'create index on "{w}".documents (collection, pk, seq) where seq is not null; '
             # what the store's documents were before each batch (untimed bookkeeping)
             f'create table "{w}".before {documents_table}; '
             f'insert into "{w}".before select * from "{w}".documents')
    mark_schema(env, w)
    f = results["floor"] = {"batch": batch, "events": 0, "transactions": 0, "documents": 0,
                            "deleted": 0}
    log(f"write floor: the documents each batch of {fmt_count(batch)} changes (denormd replay, "
        "untimed)")
    # Documents are compressed as denormd's session compresses them (lz4 where the server
    # has it: about twice as fast as the default pglz).
    script = ["\\set ON_ERROR_STOP on",
              "select set_config('default_toast_compression', 'lz4', false) from pg_settings "
              "where name = 'default_toast_compression' and 'lz4' = any(enumvals) \\g /dev/null"]
    for start in range(0, n_changes, batch):
        end = min(n_changes, start + batch)
        part = slice_lines(changes, os.path.join(env.work, f"floor-{start}.jsonl"), start, end)
        xid = int(env.scalar("select txid_current() % 4294967296"))
        denormd_replay(env, store, config, part, "write floor: denormd replay")
        documents = os.path.join(env.work, f"floor-{start}-documents.jsonl")
        changed = (f"select collection, id, pk, seq, doc, false as deleted from ({union}) a "
                   f"where a.xmin::text::bigint >= {xid} and not exists (select 1 from "
                   f'"{w}".before d where d.collection = a.collection and d.id = a.id '
                   f"and d.doc = a.doc and d.seq is not distinct from a.seq)")
        gone = (f'select collection, id, null, null::bigint, null::jsonb, true from "{w}".before d '
                f"where not exists (select 1 from ({union}) a where a.collection = d.collection "
                f"and a.id = d.id)")
        env.psql(f"\\copy (select json_build_object('c', collection, 'id', id, 'pk', pk, "
                 f"'seq', seq, 'doc', doc, 'deleted', deleted)::text from ({changed} union all "
                 f"{gone}) x) to '{documents}' {COPY_OPTS}")
        bookkeeping = os.path.join(env.work, "floor-before.sql")
        with open(bookkeeping, "w") as fh:
            fh.write("begin;\n" + FLOOR_DOCUMENTS_SQL.format(
                documents=documents, table=f'"{w}".before', copy=COPY_OPTS) + "commit;\n")
        env.psql(file=bookkeeping, what="write floor: bookkeeping")
        with open(documents) as fh:
            for line in fh:
                f["deleted" if json.loads(line)["deleted"] else "documents"] += 1
        f["events"] += end - start
        f["transactions"] += 1
        script += ["begin;", SOURCE_ROWS_SQL.format(sources=part, table=f'"{w}".sources',
                                                    copy=COPY_OPTS),
                   FLOOR_DOCUMENTS_SQL.format(documents=documents, table=f'"{w}".documents',
                                              copy=COPY_OPTS), "commit;"]
    vacuum_analyze(env, w)
    sql = os.path.join(env.work, "floor.sql")
    with open(sql, "w") as fh:
        fh.write("\n".join(script) + "\n")
    checkpoint(env)
    log(f"write floor: {f['transactions']} transactions, {f['documents']:,} documents written and "
        f"{f['deleted']:,} deleted, with the batches' source rows")
    f["seconds"], _, _ = timed_process(env, ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d",
                                             env.pg_url, "-f", sql], "write floor")
    f["rate"] = f["events"] / f["seconds"]
    log(f"write floor: {f['seconds']:.2f} s, {f['rate']:,.0f} events/s")
    drop_schema(env, w)
