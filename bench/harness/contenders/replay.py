"""denormd replay: `denormd replay` of load.jsonl into an empty store, then of changes.jsonl.
Every other contender's documents are compared with its (it is the reference), and its
loaded store is copied (untimed) into the stores that start from it."""

import os

from . import Contender
from ..services import fmt_count, log
from ..store import (SCHEMAS, checkpoint, clone_schemas, create_denormd_schema, denormd_replay,
                     vacuum_analyze)


class Replay(Contender):
    """LOAD, then the copies into `clones` (untimed; their configs in .configs), then CHANGES."""

    key = "replay"

    def __init__(self, env, results, w, clones):
        super().__init__(env, results, w)
        self.clones, self.configs = clones, {}

    def load(self):
        env, load, clones = self.env, self.w.load, self.clones
        schema = SCHEMAS["replay"]
        self.config = config = create_denormd_schema(env, schema)
        r = self.result()
        checkpoint(env)
        log(f"denormd replay: load ({os.path.basename(load)})")
        r["load"] = denormd_replay(env, schema, config, load, "denormd replay (load)")
        r["load"]["rate"] = r["load"]["events"] / r["load"]["seconds"]
        log(f"denormd replay: load: {r['load']['seconds']:.1f} s, {r['load']['rate']:,.0f} events/s, "
            f"peak RSS {r['load']['rss_kib'] // 1024} MiB")
        vacuum_analyze(env, schema)
        if clones:
            log(f"copying the loaded store into {', '.join(clones)} (untimed)")
            for clone in clones:
                self.configs[clone] = create_denormd_schema(env, clone)
            clone_schemas(env, schema, clones)

    def changes(self):
        env, changes, n_changes, config = self.env, self.w.changes, self.w.n_changes, self.config
        schema = SCHEMAS["replay"]
        r = self.result()
        checkpoint(env)
        log(f"denormd replay: changes ({fmt_count(n_changes)} events)")
        r["changes"] = denormd_replay(env, schema, config, changes, "denormd replay (changes)")
        c = r["changes"]
        c["rate"] = c["events"] / c["seconds"]
        r["rss_kib"] = max(r["load"]["rss_kib"], c["rss_kib"])
        r["entities"] = int(env.scalar(f'select count(*) from "{schema}".entities'))
        log(f"denormd replay: changes: {c['seconds']:.1f} s, {c['rate']:,.0f} events/s, "
            f"{c['documents'] / c['events']:.2f} documents written per event, "
            f"peak RSS {c['rss_kib'] // 1024} MiB")
