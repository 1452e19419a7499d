#include "daemon/command_line.h"

namespace denormd {

const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {
    {"run", "",
       "consume Kafka (source.kafka in the config) and apply batches\n"
       "until SIGTERM or SIGINT, which finish the batch, commit, exit 0",
       RunCommand},
    {"replay", "FILE...",
       "apply JSON Lines event logs (\"-\" is stdin); a log already\n"
       "applied up to some line resumes after it",
       ReplayCommand},
    {"rebuild", "[PROJECTION...]",
       "recompute projections from the stored source (default: all)",
       RebuildCommand},
    {"verify", "[PROJECTION...]",
       "recompute every document from the source rows alone (not\n"
       "through the index or counters), compare with the tables, and\n"
       "check the index and counters; list differences; exit 1 if any",
       VerifyCommand},
    {"status", "",
       "stream positions, Kafka lag, documents per collection,\n"
       "dead letters",
       StatusCommand},
    {"advise", "",
       "measure what the model costs on the stored data: for each\n"
       "field reading other entities, members per document and the\n"
       "documents one member's change rewrites; document sizes per\n"
       "collection; index rows each entity keeps, per type; and\n"
       "what to change where limits.* are passed",
       AdviseCommand},
    {"check", "",
       "validate the config; list every error with its place",
       CheckCommand},
    {"plan", "",
       "what `apply` of this config would change in the store: the\n"
       "projections, collections and index relations added, removed\n"
       "or changed, and the documents written, deleted, unchanged\n"
       "(built from the stored source); exit 0 nothing would change,\n"
       "3 something would",
       PlanCommand},
    {"apply", "",
       "make this config's projections the ones the store runs,\n"
       "online: builds what changed beside the old tables while the\n"
       "daemons go on, catches up, then switches in one transaction;\n"
       "running `run` instances load the new projections themselves",
       ApplyCommand},
    {"adopt", "",
       "mark a store made by a denormd older than the mark of\n"
       "ownership as denormd's (its tables of denormd's names, with\n"
       "meta of denormd's layout); other commands refuse a schema\n"
       "holding tables of those names without the mark",
       AdoptCommand},
    {"prune", "",
       "remove what retention (in the config) no longer keeps:\n"
       "tombstones past the horizon, old dead letters, unused lock\n"
       "rows and zero counters; safe while instances run",
       PruneCommand},
    {"publish", "FILE...",
       "send JSON Lines event logs to the first source.kafka topic\n"
       "(or --topic), keyed type:id; for loading and demos",
       PublishCommand},
    {"relay", "",
       "publish the change feed (feed in the config) until SIGTERM or\n"
       "SIGINT, without consuming; `run` does it too unless --no-relay",
       RelayCommand},
    {"test", "FILE...",
       "apply JSON Lines event logs in memory (no PostgreSQL, no\n"
       "Kafka: nothing connects) and check the documents they make;\n"
       "dead letters are listed with line and reason",
       TestCommand},
  };
  return commands;
}

const Command* FindCommand(const std::string& name) {
  for (const Command& command : Commands()) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

}  // namespace denormd
