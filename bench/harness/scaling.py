"""Scaling: denormd replay's CHANGES rate on a store --scale-small times the size, with a
change stream of the same length; then that stream again on the large store with the small
store's entities added (the same work on more data)."""

import os

from .services import fmt_count, log
from .store import (SCHEMAS, checkpoint, create_denormd_schema, denormd_replay, drop_schema,
                    vacuum_analyze, write_config)
from .workload import count_lines

SMALL_ID_PREFIX = "s."  # the scaling workload's ids: apart from the main workload's


def measure(env, results, small_dir, n_large_changes):
    """The small store's CHANGES rate; then the same change stream on the large store
    (denormd replay's, after its CHANGES) with the small store's entities added to it: the
    same work on about 12x the data, so that the rates differ only by what the data's size
    costs."""
    schema = SCHEMAS["small"]
    config = create_denormd_schema(env, schema)
    load, changes = (os.path.join(small_dir, f) for f in ("load.jsonl", "changes.jsonl"))
    s = results["scaling"] = {}
    checkpoint(env)
    log(f"scaling: denormd replay of the small store's load ({fmt_count(count_lines(load))} events)")
    s["load"] = denormd_replay(env, schema, config, load, "scaling replay (load)")
    s["entities"] = int(env.scalar(f'select count(*) from "{schema}".entities'))
    vacuum_analyze(env, schema)
    checkpoint(env)
    log("scaling: changes on the small store")
    s["changes"] = denormd_replay(env, schema, config, changes, "scaling replay (changes)")
    s["changes"]["rate"] = s["changes"]["events"] / s["changes"]["seconds"]
    log(f"scaling: small store: {s['changes']['rate']:,.0f} events/s")
    drop_schema(env, schema)
    large = SCHEMAS["replay"]
    config = write_config(env, large)
    log("scaling: the small store's load added to denormd replay's store (untimed)")
    denormd_replay(env, large, config, load, "scaling replay (load into the large store)")
    vacuum_analyze(env, large)
    entities = int(env.scalar(f'select count(*) from "{large}".entities'))
    checkpoint(env)
    log("scaling: the small store's changes on the large store")
    same = s["same_stream"] = denormd_replay(env, large, config, changes,
                                             "scaling replay (changes on the large store)")
    same["rate"] = same["events"] / same["seconds"]
    same["entities"] = entities  # like s["entities"]: before the changes
    log(f"scaling: the same changes on {fmt_count(same['entities'])} entities: "
        f"{same['rate']:,.0f} events/s")


# ----------------------------------------------------------------------------
# Report
