#include "projections/memory_admin.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <tuple>

#include "common/clock.h"
#include "projections/json.h"
#include "projections/projection_plan.h"

namespace denormd {

namespace {

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() > suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool SameJson(const std::string& a, const std::string& b) {
  if (a == b) return true;
  JsonDocument x, y;
  return ParseJson(a, &x).ok() && ParseJson(b, &y).ok() && JsonEquals(x, y);
}

using Collection = std::map<std::string, MemoryState::Document>;

// The documents of `collection` (none when it does not exist) by their
// identity across a live collection and a built one: (projection, id, pk or
// ""), as BuiltComparison says.
using DocumentIdentity = std::tuple<std::string, std::string, std::string>;
std::map<DocumentIdentity, const MemoryState::Document*> ByIdentity(const MemoryState& state,
                                                                   const std::string& collection) {
  std::map<DocumentIdentity, const MemoryState::Document*> out;
  auto found = state.collections.find(collection);
  if (found == state.collections.end()) return out;
  for (const auto& entry : found->second) {
    const MemoryState::Document& doc = entry.second;
    out[{doc.projection, doc.id, doc.pk.value_or("")}] = &doc;
  }
  return out;
}

// The lock of a MemoryState: a flag, which cannot be lost.
class MemoryAdministrationLock : public AdministrationLock {
 public:
  explicit MemoryAdministrationLock(MemoryState* state) : state_(state) {
    state_->administration_locked = true;
  }
  ~MemoryAdministrationLock() override { state_->administration_locked = false; }
  Status Check() override { return Status::Ok(); }

 private:
  MemoryState* state_;
};

}  // namespace

MemoryAdministration::MemoryAdministration(const Config& config, MemoryStore* store)
    : config_(config), store_(store), state_(*store->mutable_state()) {}

Status MemoryAdministration::NoTransactionOpen() const {
  if (store_->transaction_open()) {
    return Status::Fatal("internal: store administration beside an open MemoryStore transaction");
  }
  return Status::Ok();
}

Status MemoryAdministration::Open(OpenMode mode) {
  DENORMD_RETURN_IF_ERROR(NoTransactionOpen());
  const std::string model_fingerprint = ModelFingerprint(config_);
  const bool other_model = state_.model.epoch != 0 && state_.model.fingerprint != model_fingerprint;
  if (other_model && mode == OpenMode::kRunsThisModel) {
    model_ = state_.model;
    return StaleModelError(config_, model_);
  }
  if (!other_model || mode == OpenMode::kBuild) {
    for (const std::string& collection : config_.CollectionNames()) state_.collections[collection];
  }
  const std::string fingerprint = ProjectionPlan(config_).IndexFingerprint();
  // A new store: the index is built as events arrive.
  if (state_.index_fingerprint.empty() && state_.entities.empty()) {
    state_.index_fingerprint = fingerprint;
  }
  if (state_.model.epoch == 0) state_.model = {1, model_fingerprint, config_.model_yaml, ""};
  model_ = state_.model;
  if (config_.feed) store_->PublishCollections(config_.PublishedCollections());
  if (state_.index_fingerprint == fingerprint || mode != OpenMode::kRunsThisModel) {
    return Status::Ok();
  }
  return StaleIndexError(config_);
}

Status MemoryAdministration::Adopt(std::vector<std::string>* adopted) {
  if (adopted != nullptr) adopted->clear();  // nothing carries a mark to miss
  return Status::Ok();
}

Status MemoryAdministration::ReadModel(StoredModel* out) {
  *out = state_.model;
  return Status::Ok();
}

Status MemoryAdministration::RecordModel() {
  DENORMD_RETURN_IF_ERROR(NoTransactionOpen());
  if (state_.model.epoch != model_.epoch) return ModelMovedError(config_, model_.epoch);
  const std::string fingerprint = ModelFingerprint(config_);
  if (state_.model.fingerprint != fingerprint) state_.model.epoch++;
  state_.model.yaml = config_.model_yaml;
  state_.model.fingerprint = fingerprint;
  model_ = state_.model;
  return Status::Ok();
}

Status MemoryAdministration::MarkIndexCurrent() {
  state_.index_fingerprint = ProjectionPlan(config_).IndexFingerprint();
  return Status::Ok();
}

Status MemoryAdministration::Summarize(StoreSummary* out) {
  DENORMD_RETURN_IF_ERROR(NoTransactionOpen());
  for (const auto& collection : state_.collections) {
    if (EndsWith(collection.first, "__next") || EndsWith(collection.first, "__plan")) {
      out->leftover_tables.push_back(collection.first);
    }
  }
  for (const auto& position : state_.positions) out->positions.push_back(position.second);
  for (const std::string& collection : config_.CollectionNames()) {
    // The file's collections: the store may run another model that lacks some.
    auto it = state_.collections.find(collection);
    if (it != state_.collections.end()) out->documents.emplace_back(collection, it->second.size());
  }
  for (const auto& entity : state_.entities) {
    if (out->entities.empty() || out->entities.back().first != entity.first.type) {
      out->entities.emplace_back(entity.first.type, 0);
    }
    if (entity.second.deleted) {
      out->tombstones++;
    } else {
      out->entities.back().second++;
    }
  }
  out->dead_letters = state_.dead_letters.size();
  if (!config_.feed) return Status::Ok();
  out->feed = true;
  MemoryOutbox outbox(store_);
  DENORMD_RETURN_IF_ERROR(outbox.Lag(&out->outbox));
  // The in-process relay records its sequence only; it published "now".
  if (state_.feed_sequence > 0) {
    out->feed_relay = config_.feed->transactional_id;
    out->feed_sequence = state_.feed_sequence;
  }
  return Status::Ok();
}

Status MemoryAdministration::Prune(const RetentionConfig& retention, size_t /*chunk_rows*/,
                                   PruneReport* report,
                                   const std::function<void(const PruneReport&)>& progress,
                                   const std::function<bool()>& stop) {
  DENORMD_RETURN_IF_ERROR(NoTransactionOpen());
  // One chunk per kind: the state is in this process, and no batch runs
  // beside a prune here.
  const auto stopped = [&] { return stop && stop(); };
  const auto told = [&] {
    if (progress) progress(*report);
  };
  const double now = UnixSeconds();
  if (retention.tombstone_hours > 0 && !stopped()) {
    const double horizon = now - static_cast<double>(retention.tombstone_hours) * 3600;
    for (auto it = state_.entities.begin(); it != state_.entities.end();) {
      auto written = state_.updated_at.find(it->first);
      const bool old = written == state_.updated_at.end() || written->second < horizon;
      if (!it->second.deleted || !old) {
        ++it;
        continue;
      }
      if (written != state_.updated_at.end()) state_.updated_at.erase(written);
      state_.references.erase(it->first);  // a tombstone has no index rows
      it = state_.entities.erase(it);
      report->tombstones++;
    }
    told();
  }
  if ((retention.dead_letter_days > 0 || retention.max_dead_letters > 0) && !stopped()) {
    const double horizon = now - static_cast<double>(retention.dead_letter_days) * 86400;
    const size_t count = state_.dead_letters.size();
    // Beyond the cap: all but the newest max_dead_letters.
    const size_t beyond = retention.max_dead_letters > 0 && count > retention.max_dead_letters
                              ? count - retention.max_dead_letters
                              : 0;
    std::vector<DeadLetter> letters;
    std::vector<double> received;
    for (size_t i = 0; i < count; ++i) {
      const double at = i < state_.dead_letters_received_at.size()
                            ? state_.dead_letters_received_at[i]
                            : now;
      const bool aged = retention.dead_letter_days > 0 && at < horizon;
      if (aged || i < beyond) {
        report->dead_letters++;
        continue;
      }
      letters.push_back(state_.dead_letters[i]);
      received.push_back(at);
    }
    state_.dead_letters = std::move(letters);
    state_.dead_letters_received_at = std::move(received);
    told();
  }
  if (stopped()) return Status::Ok();
  return ClearStaleApply(&report->stale_apply_cleared, &report->stale_journal_rows);
}

Status MemoryAdministration::LockAdministration(const std::string& command,
                                                std::unique_ptr<AdministrationLock>* out) {
  if (state_.administration_locked) return AdministrationBusy(config_, command);
  *out = std::make_unique<MemoryAdministrationLock>(&state_);
  return Status::Ok();
}

Status MemoryAdministration::AdministrationLocked(bool* held) {
  *held = state_.administration_locked;
  return Status::Ok();
}

Status MemoryAdministration::MarkApplying(const std::string& applying) {
  DENORMD_RETURN_IF_ERROR(NoTransactionOpen());
  state_.journal.clear();
  state_.model.applying = applying;
  return Status::Ok();
}

Status MemoryAdministration::AbandonApply(uint64_t* journal_rows) {
  DENORMD_RETURN_IF_ERROR(NoTransactionOpen());
  uint64_t removed = 0;
  if (!state_.model.applying.empty()) {
    DENORMD_RETURN_IF_ERROR(DropBuiltCollections("__next"));
    removed = state_.journal.size();
    state_.journal.clear();
    state_.model.applying.clear();
  }
  if (journal_rows != nullptr) *journal_rows = removed;
  return Status::Ok();
}

Status MemoryAdministration::DropBuiltCollections(const std::string& suffix) {
  DENORMD_RETURN_IF_ERROR(NoTransactionOpen());
  for (auto it = state_.collections.begin(); it != state_.collections.end();) {
    it = EndsWith(it->first, suffix) ? state_.collections.erase(it) : std::next(it);
  }
  return Status::Ok();
}

void MemoryAdministration::RemoveRelationsIf(
    const std::function<bool(const RelationName&)>& remove) {
  for (auto it = state_.index.begin(); it != state_.index.end();) {
    const bool gone = remove({std::get<0>(it->first), std::get<1>(it->first)});
    it = gone ? state_.index.erase(it) : std::next(it);
  }
  for (auto& entity : state_.references) {
    std::vector<MemoryState::IndexRow>& rows = entity.second;
    rows.erase(std::remove_if(rows.begin(), rows.end(),
                              [&](const MemoryState::IndexRow& row) {
                                return remove({entity.first.type, row.relation});
                              }),
               rows.end());
  }
}

Status MemoryAdministration::RemoveRelationsExcept(const std::vector<RelationName>& kept) {
  DENORMD_RETURN_IF_ERROR(NoTransactionOpen());
  RemoveRelationsIf([&](const RelationName& relation) {
    return std::find(kept.begin(), kept.end(), relation) == kept.end();
  });
  return Status::Ok();
}

Status MemoryAdministration::RemoveRelations(const std::vector<RelationName>& dropped) {
  DENORMD_RETURN_IF_ERROR(NoTransactionOpen());
  RemoveRelationsIf([&](const RelationName& relation) {
    return std::find(dropped.begin(), dropped.end(), relation) != dropped.end();
  });
  return Status::Ok();
}

Status MemoryAdministration::CompareBuilt(const std::string& collection, const std::string& suffix,
                                          BuiltComparison* out) {
  *out = BuiltComparison();
  const auto live = ByIdentity(state_, collection);
  out->live = live.size();
  for (const auto& built : ByIdentity(state_, collection + suffix)) {
    auto match = live.find(built.first);
    if (match != live.end()) out->matched++;
    if (match != live.end() && SameJson(match->second->json, built.second->json)) {
      out->unchanged++;
    } else {
      out->written++;
    }
  }
  return Status::Ok();
}

Status MemoryAdministration::CountDocuments(const std::string& collection, uint64_t* out) {
  auto found = state_.collections.find(collection);
  *out = found == state_.collections.end() ? 0 : found->second.size();
  return Status::Ok();
}

Status MemoryAdministration::SwitchModel(StoreTransaction& /*txn*/, const ModelSwitch& change,
                                         bool* switched) {
  *switched = false;
  if (state_.model.epoch != change.from_epoch) return Status::Ok();
  // Everything below is undone if the transaction rolls back.
  std::map<std::string, std::optional<Collection>> before;
  auto remember = [&](const std::string& name) {
    if (before.count(name)) return;
    auto it = state_.collections.find(name);
    before[name] = it == state_.collections.end() ? std::nullopt
                                                  : std::optional<Collection>(it->second);
  };
  for (const std::string& collection : change.dropped) remember(collection);
  for (const std::string& collection : change.rebuilt) {
    remember(collection);
    remember(collection + change.suffix);
  }
  DENORMD_RETURN_IF_ERROR(store_->UndoOnRollback(
      [state = &state_, before, model = state_.model, index = state_.index_fingerprint,
       outbox = state_.outbox.size()] {
        for (const auto& collection : before) {
          if (collection.second) {
            state->collections[collection.first] = *collection.second;
          } else {
            state->collections.erase(collection.first);
          }
        }
        state->model = model;
        state->index_fingerprint = index;
        state->outbox.resize(outbox);
      }));
  // The change feed: what the switch writes or deletes in a published
  // collection, as a batch's changes (when the store has an outbox).
  for (const std::string& collection : change.captured) {
    if (state_.published.empty()) break;
    const auto live = ByIdentity(state_, collection);
    const auto built = ByIdentity(state_, collection + change.suffix);
    auto capture = [&](const MemoryState::Document& doc, bool deleted) {
      state_.AppendToOutbox(collection, doc.id, doc.pk,
                            deleted ? std::nullopt : std::optional<std::string>(doc.json),
                            change.capture_source);
    };
    for (const auto& entry : built) {
      auto match = live.find(entry.first);
      if (match == live.end() || !SameJson(match->second->json, entry.second->json)) {
        capture(*entry.second, /*deleted=*/false);
      }
    }
    for (const auto& entry : live) {
      if (!built.count(entry.first)) capture(*entry.second, /*deleted=*/true);
    }
  }
  for (const std::string& collection : change.dropped) state_.collections.erase(collection);
  for (const std::string& collection : change.rebuilt) {
    auto built = state_.collections.find(collection + change.suffix);
    Collection documents = built == state_.collections.end() ? Collection() : built->second;
    if (built != state_.collections.end()) state_.collections.erase(built);
    state_.collections[collection] = std::move(documents);
  }
  state_.model = {change.from_epoch + 1, change.model_fingerprint, change.model_yaml, ""};
  state_.index_fingerprint = change.index_fingerprint;
  *switched = true;
  return Status::Ok();
}

StoreFactory MemoryStores(MemoryStore* store) {
  return [store](const Config& config) -> std::unique_ptr<StoreAdministration> {
    return std::make_unique<MemoryAdministration>(config, store);
  };
}

}  // namespace denormd
