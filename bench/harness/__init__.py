"""The benchmark's harness, run by bench/run.py (its options, and the order of the run).

  services.py    paths, progress lines, BenchError, Env (commands, psql), timed processes,
                 the preflight, the build, PostgreSQL and Kafka, the machine
  workload.py    the generated workload (cached per size and seed) and its lines
  store.py       the harness's schemas, checks of documents, configs, `denormd replay`
                 into a store, copies of a loaded store, the reference store
  daemon.py      `denormd run` in the background, its /metrics and positions; producing
                 at a fixed rate into a topic
  requests.py    round trips and statements to PostgreSQL per batch and per event
  contenders/    one module per contender, one interface (contenders.Contender)
  freshness.py   freshness of `denormd run` at fixed input rates
  scaling.py     denormd replay on a store ten times smaller, and the same work on more data
  floor.py       the write floor (a bound, not a contender)
  report.py      the table, the targets and verdicts, the freshness plot, the results file

bench/relational.py (the relational path) and bench/soak.py (the soak mode) use it too.
"""
