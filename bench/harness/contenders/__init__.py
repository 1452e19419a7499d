"""The contenders: one module each, one interface (Contender).

  ceiling        the source rows only, in bulk, no projection work
  replay         `denormd replay`: the reference every other contender's documents are
                 compared with; its loaded store is copied for run, feed, the write floor
                 and the reference store
  denormd_run    `denormd run` from a pre-filled topic
  feed           `denormd run` with the change feed on, and the feed's delay
  kstreams       the Kafka Streams peer (bench/peers/kstreams)
  triggers       PL/pgSQL triggers, one event per transaction, then 1,000
  (the relational path's module is bench/relational.py, beside the Debezium records it
  makes, which bench/debezium_e2e.py shares)
"""


class Contender:
    """One way of keeping the documents, measured on the workload's events against the same
    PostgreSQL; its figures go to results["contenders"][key], its row of the table.

    load()       LOAD: load.jsonl into an empty store, timed. Nothing for a contender whose
                 store is a copy (untimed) of denormd replay's loaded store.
    changes()    CHANGES: changes.jsonl on top of the loaded store, timed.
    documents()  its documents against denormd replay's at the same point of the stream
                 (untimed): how many differ, recorded in the results (store.check); None
                 for one that keeps no documents of its own to check.
    measure()    the three, in that order; a contender whose steps go otherwise (a check
                 after LOAD too, a freshness phase after CHANGES, one process across the
                 phases) overrides it.
    """

    key = None

    def __init__(self, env, results, w):
        self.env, self.args, self.results, self.w = env, env.args, results, w

    def result(self):
        """Its entry in results["contenders"], made on first use."""
        return self.results["contenders"].setdefault(self.key, {})

    def load(self):
        pass

    def changes(self):
        raise NotImplementedError

    def documents(self):
        return None

    def measure(self):
        self.load()
        self.changes()
        return self.documents()
