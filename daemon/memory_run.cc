#include "daemon/memory_run.h"

#include "formats/native_format.h"
#include "projections/batch_applier.h"
#include "projections/memory_store.h"
#include "projections/projection_plan.h"

namespace denormd {

DocumentSet MemoryDocumentSet(const Config& config, const MemoryState& state) {
  DocumentSet set = EmptyDocumentSet(config);
  for (const auto& collection : state.collections) {
    auto of_config = set.collections.find(collection.first);
    if (of_config == set.collections.end()) continue;  // another model's, or one built beside
    std::map<std::string, int> uses;
    for (const auto& doc : collection.second) uses[doc.second.id]++;
    auto& docs = of_config->second;
    for (const auto& doc : collection.second) {
      const MemoryState::Document& d = doc.second;
      docs[uses[d.id] > 1 ? d.pk.value_or("") + "/" + d.id : d.id] = d.json;
    }
  }
  uint64_t stale = 0;
  for (const auto& position : state.positions) stale += position.second.stale;
  set.stale = stale;
  set.dead = state.dead_letters.size();
  return set;
}

Status RunInMemory(const Config& config, const std::vector<std::string>& logs, size_t batch_size,
                   MemoryRun* out) {
  const ProjectionPlan plan(config);
  const BatchApplier applier(plan);
  const NativeDecoder decoder(config);
  MemoryStore store;
  ReplayOptions options;
  options.batch_size = batch_size;
  options.max_attempts = 1;  // nothing transient in memory
  options.max_event_bytes = config.batch.max_event_bytes;
  *out = MemoryRun();
  Status status;
  for (const std::string& path : logs) {
    ReplayReport report;
    status = ReplayLog(decoder, applier, &store, path, options, &report);
    if (!status.ok()) break;
    out->stats.Add(report.stats);
    out->logs.push_back(std::move(report));
  }
  out->documents = MemoryDocumentSet(config, store.state());
  out->dead_letters = store.state().dead_letters;
  return status;
}

}  // namespace denormd
