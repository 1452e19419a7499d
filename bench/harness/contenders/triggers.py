"""The trigger baselines: PL/pgSQL row triggers on one source table per entity type
(bench/triggers.sql) that recompute the same documents; `select apply_event(...)` per event
(triggers/event, a sample: slow), then `select apply_events(...)` of 1,000 per transaction
(triggers/1000) on the events that follow, on the same store."""

import json
import os

from . import Contender
from ..services import BENCH, fmt_count, log, timed_process
from ..store import (COPY_OPTS, SCHEMAS, check, checkpoint, drop_schema, mark_schema, ref_advance,
                     row_writes, vacuum_analyze)
from ..workload import read_lines

TRIGGERS_SQL = os.path.join(BENCH, "triggers.sql")


def measure(env, results, w, ref):
    """Both, on one store: triggers/event's LOAD is triggers/1000's too."""
    if not os.path.exists(TRIGGERS_SQL):
        log("triggers: bench/triggers.sql does not exist: the trigger contenders are skipped")
        results["notes"].append("bench/triggers.sql missing: no trigger contenders")
        return
    per_event = PerEvent(env, results, w, ref)
    per_event.measure()
    Batched(env, results, w, ref, per_event).measure()


def write_apply_file(path, lines, per_statement):
    """A psql script: `select apply_event(...)` per event, or apply_events per chunk."""
    with open(path, "w") as out:
        if per_statement == 1:
            for line in lines:
                out.write("select apply_event('" + line.replace("'", "''") + "'::jsonb);\n")
        else:
            for i in range(0, len(lines), per_statement):
                chunk = "[" + ",".join(lines[i:i + per_statement]) + "]"
                out.write("select apply_events('" + chunk.replace("'", "''") + "'::jsonb);\n")
    return path


def run_apply(env, schema, script, what):
    """Runs an apply script in autocommit (one transaction per statement)."""
    out_path = script + ".out"
    cmd = ["psql", "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", "-d", env.pg_url,
           "-c", f'set search_path = "{schema}"', "-f", script, "-o", out_path]
    seconds, _, _ = timed_process(env, cmd, what)
    text = open(out_path).read()
    counts = {"applied": 0, "stale": 0, "invalid": 0}
    for line in text.split("\n"):
        line = line.strip()
        if line in counts:
            counts[line] += 1
        elif line.startswith("{"):
            for k, v in json.loads(line).items():
                counts[k] = counts.get(k, 0) + v
    return seconds, counts


def apply_bounded(env, schema, lines, per_statement, budget, tag):
    """Applies lines through the triggers, per_statement events per transaction, in
    chunks of statements (one psql each, sized to last about 3 s) until all are done or
    `budget` seconds have passed; a transaction is never cut. Returns (events applied,
    seconds, status counts)."""
    done, seconds, chunk_no = 0, 0.0, 0
    counts = {"applied": 0, "stale": 0, "invalid": 0}
    statements = 5 if per_statement == 1 else 1
    while done < len(lines) and seconds < budget:
        take = lines[done:done + statements * per_statement]
        chunk_no += 1
        script = write_apply_file(os.path.join(env.work, f"{tag}-{chunk_no}.sql"), take,
                                  per_statement)
        t, c = run_apply(env, schema, script, tag)
        os.remove(script)
        seconds += t
        done += len(take)
        for k, v in c.items():
            counts[k] = counts.get(k, 0) + v
        per_second = (len(take) / per_statement) / t if t > 0 else statements
        statements = max(1, min(int(per_second * 3), 100_000))
    return done, seconds, counts


def trigger_load(env, schema, load, mode):
    if mode == "events":
        script = write_apply_file(os.path.join(env.work, "triggers-load.sql"),
                                  read_lines(load), 1000)
        seconds, counts = run_apply(env, schema, script, "triggers load (apply_events)")
        return seconds
    # backfill: the final source rows in bulk with the triggers off, then each
    # projection recomputed set-based over everything (how a team seeds its tables).
    sql = os.path.join(env.work, "triggers-backfill.sql")
    inserts = []
    for t in ("author", "book", "post", "comment"):
        inserts.append(f"""insert into {t} (id, version, deleted, data)
select distinct on (e->>'id') e->>'id', (e->>'version')::numeric, e->>'op' = 'delete',
       case when e->>'op' = 'delete' then null else e->'data' end
from ev where e->>'type' = '{t}' order by e->>'id', (e->>'version')::numeric desc;""")
    with open(sql, "w") as f:
        f.write(f"""begin;
set local search_path = "{schema}";
create temp table staging (line text) on commit drop;
\\copy staging from '{load}' {COPY_OPTS}
create temp table ev on commit drop as select line::jsonb as e from staging;
set local session_replication_role = replica;
{chr(10).join(inserts)}
set local session_replication_role = origin;
select refresh_authors(array(select id from author where not deleted));
select refresh_books(array(select id from book where not deleted));
select refresh_posts(array(select id from post where not deleted));
select refresh_post_comments(array(select distinct (data->>'postId') collate "C" from comment
  where not deleted and jsonb_typeof(data->'postId') = 'string'));
commit;
""")
    seconds, _, _ = timed_process(env, ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d",
                                        env.pg_url, "-o", "/dev/null", "-f", sql],
                                  "triggers load (backfill)")
    return seconds


class PerEvent(Contender):
    """triggers/event: the store (loaded for both), then the first --trigger-sample change
    events (at most --trigger-seconds), one transaction each. Its documents are checked after
    LOAD (for both) and after its sample, against the reference store at the same point."""

    key = "triggers_event"
    schema = SCHEMAS["triggers"]

    def __init__(self, env, results, w, ref):
        super().__init__(env, results, w)
        self.ref = ref
        self.applied = None  # change events applied: None until changes()

    def load(self):
        env, args, schema, load, n_load = self.env, self.args, self.schema, self.w.load, self.w.n_load
        drop_schema(env, schema)
        env.psql(file=TRIGGERS_SQL, variables={"schema": schema}, what="bench/triggers.sql")
        mark_schema(env, schema)
        ev = self.result()
        ba = self.results["contenders"].setdefault("triggers_batched", {})

        checkpoint(env)
        log(f"triggers: load ({fmt_count(n_load)} events, mode {args.trigger_load})")
        seconds = trigger_load(env, schema, load, args.trigger_load)
        load_r = {"events": n_load, "seconds": seconds, "rate": n_load / seconds, "mode": args.trigger_load}
        ev["load"] = ba["load"] = load_r
        log(f"triggers: load: {seconds:.1f} s, {n_load / seconds:,.0f} events/s")
        vacuum_analyze(env, schema)

    def changes(self):
        env, args, schema = self.env, self.args, self.schema
        changes, n_changes = self.w.changes, self.w.n_changes
        ev, budget = self.result(), args.trigger_seconds
        lines = read_lines(changes, 0, min(args.trigger_sample, n_changes))
        before = row_writes(env, schema)
        checkpoint(env)
        log(f"triggers/event: up to {fmt_count(len(lines))} change events (or {budget:g} s), "
            "one transaction each")
        n1, seconds, counts = apply_bounded(env, schema, lines, 1, budget, "triggers-event")
        ev["changes"] = {"events": n1, "seconds": seconds, "rate": n1 / seconds, "sample": True,
                         "range": [0, n1], "counts": counts,
                         "documents": row_writes(env, schema) - before}
        log(f"triggers/event: {fmt_count(n1)} events in {seconds:.1f} s, "
            f"{n1 / seconds:,.1f} events/s ({counts})")
        self.applied = n1

    def documents(self):
        env, results, schema = self.env, self.results, self.schema
        if self.applied is None:  # after LOAD: both rows'
            total = check(env, "triggers_load", results, schema, SCHEMAS["ref"], "triggers after load")
            if total:
                self.result()["wrong"] = results["contenders"]["triggers_batched"]["wrong"] = total
            return total
        n1 = self.applied
        ref_advance(env, self.ref, self.w.changes, n1)
        return check(env, "triggers_event", results, schema, SCHEMAS["ref"],
                     f"triggers/event after load + {fmt_count(n1)} changes")

    def measure(self):
        self.load()
        self.documents()
        if self.args.trigger_sample > 0:
            self.changes()
            self.documents()


class Batched(Contender):
    """triggers/1000: transactions of 1,000 events on triggers/event's store, from the end of
    its sample, for --trigger-batched-sample events (default: the rest of the stream) or
    --trigger-seconds; not run when one transaction would take over 3x --trigger-seconds at
    the per-event rate. No LOAD of its own: triggers/event's."""

    key = "triggers_batched"
    schema = SCHEMAS["triggers"]

    def __init__(self, env, results, w, ref, per_event):
        super().__init__(env, results, w)
        self.ref, self.per_event = ref, per_event
        self.start = per_event.applied or 0
        n_changes, sample = w.n_changes, self.args.trigger_batched_sample
        self.end = n_changes if sample <= 0 else min(n_changes, self.start + sample)

    def changes(self):
        env, args, schema = self.env, self.args, self.schema
        changes, n_changes = self.w.changes, self.w.n_changes
        n1, end, ba, budget = self.start, self.end, self.result(), args.trigger_seconds
        lines = read_lines(changes, n1, end)
        before = row_writes(env, schema)
        checkpoint(env)
        log(f"triggers/1000: change events from {fmt_count(n1)}, up to {fmt_count(len(lines))} "
            f"(or {budget:g} s), transactions of 1,000")
        n, seconds, counts = apply_bounded(env, schema, lines, 1000, budget, "triggers-batched")
        n2 = n1 + n
        ba["changes"] = {"events": n, "seconds": seconds, "rate": n / seconds,
                         "sample": n2 < n_changes or n1 > 0, "range": [n1, n2],
                         "counts": counts, "documents": row_writes(env, schema) - before}
        log(f"triggers/1000: {fmt_count(n)} events in {seconds:.1f} s, {n / seconds:,.1f} events/s "
            f"({counts})")

    def documents(self):
        env, results, schema = self.env, self.results, self.schema
        n2 = self.result()["changes"]["range"][1]
        if n2 == self.w.n_changes:
            return check(env, "triggers_batched", results, schema, SCHEMAS["replay"],
                         "triggers/1000 after load + all changes")
        ref_advance(env, self.ref, self.w.changes, n2)
        return check(env, "triggers_batched", results, schema, SCHEMAS["ref"],
                     f"triggers/1000 after load + {fmt_count(n2)} changes")

    def measure(self):
        if self.end <= self.start:
            return
        budget = self.args.trigger_seconds
        per_event = self.per_event.result().get("changes", {}).get("rate")
        if per_event and 1000 / per_event > 3 * budget:
            note = (f"triggers/1000 not measured: one 1,000-event transaction would take about "
                    f"{1000 / per_event:,.0f} s at the per-event rate, over 3x --trigger-seconds "
                    f"({budget:g} s)")
            log(note)
            self.results["notes"].append(note)
            self.result()["skipped"] = note
            return
        self.changes()
        self.documents()
