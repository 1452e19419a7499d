"""The ceiling: the events' source rows only, no projection work, stored in bulk (COPY into
a staging table, one set-based upsert)."""

import os

from . import Contender
from ..services import fmt_count, log, timed_process
from ..store import COPY_OPTS, SCHEMAS, checkpoint, drop_schema, mark_schema, vacuum_analyze

# Source rows in bulk, the ceiling's way (and the write floor's): the lines of a JSON Lines
# file copied into a staging table, then one set-based upsert of the newest version of each
# entity into `table` (type, id, version, deleted, data).
SOURCE_ROWS_SQL = """create temp table source_lines (line text) on commit drop;
\\copy source_lines from '{sources}' {copy}
insert into {table} as s (type, id, version, deleted, data)
select distinct on (e->>'type', e->>'id') e->>'type', e->>'id', (e->>'version')::numeric,
       e->>'op' = 'delete', e->'data'
from (select line::jsonb as e from source_lines) x
order by e->>'type', e->>'id', (e->>'version')::numeric desc
on conflict (type, id) do update set version = excluded.version, deleted = excluded.deleted,
  data = excluded.data
where excluded.version > s.version;
"""


class Ceiling(Contender):
    key = "ceiling"

    def load(self):
        env = self.env
        schema = SCHEMAS["ceiling"]
        drop_schema(env, schema)
        env.psql(f'create schema "{schema}"; create table "{schema}".entities (type text collate "C", '
                 f'id text collate "C", version numeric, deleted boolean not null default false, '
                 f'data jsonb, primary key (type, id))')
        mark_schema(env, schema)
        self.phase("load", self.w.load, self.w.n_load)

    def changes(self):
        self.phase("changes", self.w.changes, self.w.n_changes)

    def phase(self, phase, path, n):
        env, schema = self.env, SCHEMAS["ceiling"]
        r = self.result()
        sql = os.path.join(env.work, f"ceiling-{phase}.sql")
        with open(sql, "w") as f:
            f.write("begin;\n" + SOURCE_ROWS_SQL.format(sources=path, table=f'"{schema}".entities',
                                                          copy=COPY_OPTS) + "commit;\n")
        checkpoint(env)
        log(f"ceiling: {phase} ({fmt_count(n)} events)")
        seconds, _, _ = timed_process(env, ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d",
                                            env.pg_url, "-f", sql], f"ceiling {phase}")
        r[phase] = {"events": n, "seconds": seconds, "rate": n / seconds}
        log(f"ceiling: {phase}: {seconds:.1f} s, {n / seconds:,.0f} events/s")
        if phase == "load":
            vacuum_analyze(env, schema)
