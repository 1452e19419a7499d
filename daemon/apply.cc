#include "daemon/apply.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <set>
#include <sstream>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "common/crash_point.h"
#include "common/text.h"
#include "connectors/postgres_admin.h"
#include "formats/format_registry.h"
#include "projections/batch_applier.h"
#include "projections/json.h"
#include "projections/json_writer.h"
#include "projections/maintenance.h"
#include "projections/projection_plan.h"

namespace denormd {

namespace {

// Catch-up rounds run while batches go on until a round finds fewer changes
// than this; the rest is taken in the switch, with the writers waiting.
constexpr size_t kSwitchBelowChanges = 2000;
constexpr int kMaxCatchUpRounds = 1000;
constexpr size_t kPageSize = 1000;

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Which units a sample takes (the same in every run).
bool InSample(const std::string& unit, double fraction) {
  return static_cast<double>(Fnv1a64(unit) % 1000000) < fraction * 1000000;
}

// (type, relation name) pairs of "<type> <relation>" strings.
std::vector<RelationName> SplitRelations(const std::vector<std::string>& relations) {
  std::vector<RelationName> out;
  for (const std::string& relation : relations) {
    const size_t space = relation.find(' ');
    out.push_back({relation.substr(0, space), relation.substr(space + 1)});
  }
  return out;
}

// How many collections an `applying` mark names (its "collections" array).
size_t RecordedCollections(const std::string& applying) {
  JsonDocument doc;
  if (!ParseJson(applying, &doc).ok() || !doc.IsObject() || !doc.HasMember("collections") ||
      !doc["collections"].IsArray()) {
    return 0;
  }
  return doc["collections"].Size();
}

class Reconfiguration {
 public:
  Reconfiguration(const Config& target, const ReconfigureOptions& options,
                  ReconfigureReport* report)
      : target_(target),
        options_(options),
        report_(report),
        suffix_(options.plan_only ? "__plan" : "__next"),
        stores_(options.stores ? options.stores : PostgresStores(options.postgres)) {}

  Status Run() {
    report_->schema = target_.store.schema;
    report_->to_fingerprint = ModelFingerprint(target_);
    report_->sample = options_.sample;
    report_->estimated = options_.plan_only && options_.sample < 1.0;
    DENORMD_RETURN_IF_ERROR(Prepare());
    if (!report_->had_model) return Status::Ok();
    if (report_->change.empty()) {
      report_->to_epoch = report_->from_epoch;
      return Status::Ok();
    }
    DENORMD_RETURN_IF_ERROR(CheckNames());
    if (!options_.plan_only) {
      DENORMD_RETURN_IF_ERROR(MarkApplying());
      Step("apply_marked");
    }
    Status status = Build();
    if (status.ok()) status = lock_->Check();
    if (options_.plan_only) {
      if (status.ok()) status = Count();
      Status cleaned = RemoveBuilt();
      return status.ok() ? cleaned : status;
    }
    DENORMD_RETURN_IF_ERROR(status);
    Step("apply_built");
    DENORMD_RETURN_IF_ERROR(CatchUp());
    DENORMD_RETURN_IF_ERROR(lock_->Check());
    // Counted before the switch, so that the writers do not wait for it: the
    // changes the switch itself catches up are not in the counts (on a store
    // without traffic there are none, and the counts are plan's).
    DENORMD_RETURN_IF_ERROR(Count());
    DENORMD_RETURN_IF_ERROR(Switch());
    return DropOldRelations();
  }

 private:
  void Step(const char* name) {
    if (options_.at_step) options_.at_step(name);
    CrashPoint(name);
  }

  void Progress(const std::string& line) {
    if (options_.progress) options_.progress(line);
  }

  // Step 1: the lock, the stored model, the comparison, leftovers.
  Status Prepare() {
    // The lock first: the model read below is the one this command
    // changes, and no apply, rebuild or plan changes it meanwhile.
    control_ = stores_(target_);
    DENORMD_RETURN_IF_ERROR(
        control_->LockAdministration(options_.plan_only ? "plan" : "apply", &lock_));
    StoredModel stored;
    DENORMD_RETURN_IF_ERROR(control_->ReadModel(&stored));
    if (stored.epoch == 0) {
      // Nothing recorded: the first start records this model, with nothing
      // to build. Apply does that start.
      report_->had_model = false;
      if (options_.plan_only) return Status::Ok();
      DENORMD_RETURN_IF_ERROR(control_->Open());
      report_->to_epoch = control_->stored_model().epoch;
      return Status::Ok();
    }
    report_->from_epoch = stored.epoch;
    report_->from_fingerprint = stored.fingerprint;
    std::vector<ConfigError> errors;
    // Without the feed: the file's feed may publish a collection only the
    // new model has (and the live store writes no outbox rows itself here).
    std::optional<Config> running = WithModel(
        target_, stored.yaml, "the projections schema " + target_.store.schema + " runs (epoch " +
                                  std::to_string(stored.epoch) + ")",
        &errors, /*without_feed=*/true);
    if (!running) {
      std::string text;
      for (const ConfigError& error : errors) text += "\n  " + error.ToString("");
      return Status::InvalidInput(
          "the store's recorded projections do not read back with this file's other settings:" +
          text);
    }
    running_ = std::make_unique<Config>(std::move(*running));
    live_ = stores_(*running_);
    DENORMD_RETURN_IF_ERROR(live_->Open(StoreAdministration::OpenMode::kInspect));
    if (!stored.applying.empty() && !options_.plan_only) {
      DENORMD_RETURN_IF_ERROR(RemoveLeftovers(stored.applying));
      report_->cleaned_leftovers = true;
    }
    report_->change = CompareModels(*running_, target_);
    return Status::Ok();
  }

  // "<collection>__next" must fit PostgreSQL's 63-byte names, with its
  // index suffixes, and not be a collection of either model.
  Status CheckNames() {
    for (const std::string& collection : report_->change.collections_rebuilt) {
      const std::string name = collection + suffix_ + "_by_number";
      if (name.size() > 63) {
        return Status::InvalidInput("collection " + collection +
                                    ": its name is too long to build beside the old one (" +
                                    name + " is over PostgreSQL's 63 bytes)");
      }
    }
    for (const Config* config : {static_cast<const Config*>(running_.get()), &target_}) {
      for (const std::string& collection : config->CollectionNames()) {
        if (collection.size() > suffix_.size() &&
            collection.compare(collection.size() - suffix_.size(), suffix_.size(), suffix_) == 0) {
          return Status::InvalidInput("collection " + collection + ": names ending in " + suffix_ +
                                      " are reserved for `denormd apply`");
        }
      }
    }
    return Status::Ok();
  }

  // The target's projections of the collections to rebuild, each writing
  // "<collection><suffix>"; no change feed (the switch captures).
  Config ShadowConfig() const {
    Config shadow = target_;
    shadow.feed.reset();
    shadow.projections.clear();
    const std::vector<std::string>& rebuilt = report_->change.collections_rebuilt;
    for (ProjectionConfig projection : target_.projections) {
      if (!std::binary_search(rebuilt.begin(), rebuilt.end(), projection.collection)) continue;
      projection.collection += suffix_;
      shadow.projections.push_back(std::move(projection));
    }
    return shadow;
  }

  // Step 2.
  Status MarkApplying() {
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.StartObject();
    w.Key("fingerprint");
    w.String(report_->to_fingerprint.c_str());
    w.Key("suffix");
    w.String(suffix_.c_str());
    w.Key("collections");
    w.StartArray();
    for (const std::string& collection : report_->change.collections_rebuilt) {
      w.String(collection.c_str());
    }
    w.EndArray();
    w.Key("started_at");
    w.Int64(static_cast<int64_t>(std::time(nullptr)));
    w.EndObject();
    return live_->MarkApplying(buffer.GetString());
  }

  // What an unfinished apply (killed) left: its tables, its journal, its
  // mark. The index rows it built are removed by Build's first step.
  Status RemoveLeftovers(const std::string& applying) {
    Progress("removing what an unfinished apply left (" +
             std::to_string(RecordedCollections(applying)) + " tables, its journal)");
    return live_->AbandonApply(nullptr);
  }

  // Steps 3 and 4.
  Status Build() {
    running_plan_ = std::make_unique<ProjectionPlan>(*running_);
    target_plan_ = std::make_unique<ProjectionPlan>(target_);
    shadow_config_ = std::make_unique<Config>(ShadowConfig());
    shadow_plan_ = std::make_unique<ProjectionPlan>(*shadow_config_);
    shadow_applier_ = std::make_unique<BatchApplier>(*shadow_plan_);
    shadow_ = stores_(*shadow_config_);
    // Tables an earlier plan (or apply) left when killed go first, whichever
    // collections they were: the build starts empty.
    DENORMD_RETURN_IF_ERROR(live_->DropBuiltCollections(suffix_));
    DENORMD_RETURN_IF_ERROR(shadow_->Open(StoreAdministration::OpenMode::kBuild));

    // Index rows of relations the running model does not keep (an earlier
    // plan's or a killed apply's) are stale: removed before building.
    DENORMD_RETURN_IF_ERROR(live_->RemoveRelationsExcept(RunningRelations()));
    std::set<std::string> types;
    for (const auto& relation : SplitRelations(report_->change.relations_added)) {
      types.insert(relation.first);
    }
    reindex_types_.assign(types.begin(), types.end());
    MaintenanceOptions options;
    options.page_size = kPageSize;
    options.on_page = [this](const std::string& what, uint64_t n) {
      if (n % (kPageSize * 20) == 0) Progress(what + ": " + FormatCount(n) + " entities");
    };
    auto start = std::chrono::steady_clock::now();
    if (!reindex_types_.empty()) {
      Progress("building the index rows of " +
               std::to_string(report_->change.relations_added.size()) + " new relations");
      DENORMD_RETURN_IF_ERROR(
          ReindexTypes(live_.get(), reindex_types_, RowsOfBoth(), LinkedOfBoth(), options,
                       &report_->entities_reindexed));
    }
    report_->index_seconds = Since(start);
    Step("apply_indexed");

    start = std::chrono::steady_clock::now();
    options.on_page = [this](const std::string& projection, uint64_t units) {
      if (units % (kPageSize * 20) == 0) {
        Progress("building " + projection + ": " + FormatCount(units) + " units");
      }
    };
    if (options_.sample < 1.0) {
      const double fraction = options_.sample;
      options.unit_filter = [fraction](const std::string& unit) { return InSample(unit, fraction); };
    }
    for (const std::string& collection : report_->change.collections_rebuilt) {
      Progress("building collection " + collection + " into " + collection + suffix_);
    }
    BatchStats stats;
    DENORMD_RETURN_IF_ERROR(Rebuild(*shadow_plan_, shadow_.get(), options, &stats));
    report_->documents_built = stats.documents_written;
    report_->build_seconds = Since(start);
    report_->estimated_seconds =
        report_->index_seconds + report_->build_seconds / std::max(options_.sample, 1e-6);
    return Status::Ok();
  }

  // The relations the running model keeps.
  std::vector<RelationName> RunningRelations() const {
    std::vector<RelationName> out;
    for (const std::string& type : running_->entities) {
      for (const Relation* relation : running_plan_->ForType(type).relations) {
        out.push_back({type, relation->name()});
      }
    }
    return out;
  }

  // An entity's index rows under both models: the running model's (its
  // batches keep those) and the target's (built here).
  IndexRowsOf RowsOfBoth() const {
    return [this](const EntityRecord& record) {
      std::vector<ReferenceRow> rows = running_plan_->ReferenceRowsOf(record);
      std::set<std::tuple<std::string, std::string, std::string>> seen;
      for (const ReferenceRow& row : rows) seen.insert({row.relation->name(), row.target, row.sort});
      for (ReferenceRow& row : target_plan_->ReferenceRowsOf(record)) {
        if (seen.insert({row.relation->name(), row.target, row.sort}).second) {
          rows.push_back(std::move(row));
        }
      }
      return rows;
    };
  }

  // The relations kept through a link of both models, each name once: a
  // reindex restores the rows of both (the running model's batches keep its
  // own).
  std::vector<const Relation*> LinkedOfBoth() const {
    std::vector<const Relation*> out;
    std::set<std::pair<std::string, std::string>> seen;
    for (const ProjectionPlan* plan : {running_plan_.get(), target_plan_.get()}) {
      for (const Relation* relation : plan->linked_relations()) {
        if (seen.insert({relation->entity_type(), relation->name()}).second) {
          out.push_back(relation);
        }
      }
    }
    return out;
  }

  // Applies journaled changes to what was built, in `txn` (of shadow_):
  // their entities' new index rows first, then every unit they affect
  // recomputed from the source as it is now.
  Status ApplyJournal(StoreTransaction& txn, const std::vector<SourceRows::JournaledChange>& taken) {
    if (taken.empty()) return Status::Ok();
    std::set<EntityKey> keys;
    for (const auto& change : taken) {
      if (std::binary_search(reindex_types_.begin(), reindex_types_.end(), change.key.type)) {
        keys.insert(change.key);
      }
    }
    uint64_t reindexed = 0;
    DENORMD_RETURN_IF_ERROR(RewriteIndexRows(
        txn, std::vector<EntityKey>(keys.begin(), keys.end()), RowsOfBoth(), LinkedOfBoth(),
        &reindexed));
    std::vector<EntityChange> changes;
    for (const auto& change : taken) changes.push_back({change.key, &change.before, &change.after});
    BatchStats stats;
    DENORMD_RETURN_IF_ERROR(shadow_applier_->Refresh(txn, changes, &stats));
    report_->journal_changes += taken.size();
    return Status::Ok();
  }

  // The journal is taken in pages of this many changes (one transaction each
  // while batches go on; several in the switch's transaction), so that no
  // round holds more than a page in memory, however long the build took.
  size_t JournalPage() const { return std::max<size_t>(options_.journal_page, 1); }

  // Step 5.
  Status CatchUp() {
    for (int round = 1; round <= kMaxCatchUpRounds; ++round) {
      std::vector<SourceRows::JournaledChange> taken;
      {
        std::unique_ptr<StoreTransaction> txn;
        DENORMD_RETURN_IF_ERROR(shadow_->Begin(&txn));
        DENORMD_RETURN_IF_ERROR(txn->locks().LockWriters(/*exclusive=*/false));
        DENORMD_RETURN_IF_ERROR(txn->source().TakeJournal(JournalPage(), &taken));
        DENORMD_RETURN_IF_ERROR(ApplyJournal(*txn, taken));
        DENORMD_RETURN_IF_ERROR(txn->Commit());
      }  // ended before the step: a test runs batches there
      Step("apply_caught_up");
      Progress("catch-up round " + std::to_string(round) + ": " + FormatCount(taken.size()) +
               " changes");
      if (taken.size() < kSwitchBelowChanges) return Status::Ok();
    }
    return Status::Ok();  // the switch takes the rest
  }

  // Counts what replacing the live collections with the built ones writes,
  // deletes and leaves (per collection, into report_->collections).
  Status Count() {
    report_->collections.clear();
    const double f = report_->estimated ? options_.sample : 1.0;
    for (const std::string& collection : report_->change.collections_rebuilt) {
      CollectionCounts counts;
      counts.collection = collection;
      BuiltComparison built;
      DENORMD_RETURN_IF_ERROR(live_->CompareBuilt(collection, suffix_, &built));
      if (f < 1.0) {
        counts.written = static_cast<uint64_t>(built.written / f + 0.5);
        counts.unchanged = static_cast<uint64_t>(built.unchanged / f + 0.5);
        const double matched_all = built.matched / f;
        counts.deleted = matched_all >= built.live
                             ? 0
                             : static_cast<uint64_t>(built.live - matched_all + 0.5);
      } else {
        counts.written = built.written;
        counts.unchanged = built.unchanged;
        counts.deleted = built.live - built.matched;
      }
      report_->collections.push_back(counts);
    }
    for (const std::string& collection : report_->change.collections_dropped) {
      CollectionCounts counts;
      counts.collection = collection;
      counts.dropped = true;
      DENORMD_RETURN_IF_ERROR(live_->CountDocuments(collection, &counts.deleted));
      report_->collections.push_back(counts);
      // The feed publishes every collection when it has a default topic.
      if (target_.feed && !target_.feed->topic.empty()) {
        report_->warnings.push_back(
            "collection " + collection + " is on the change feed (topic " + target_.feed->topic +
            "); dropping it publishes no deletes, so its " + CountOf(counts.deleted, "document") +
            " stay with the feed's consumers until they remove them (docs/configuration.md, "
            "\"Changing projections\")");
      }
    }
    return Status::Ok();
  }

  // plan: what it built goes again (only its own tables: a table of such
  // a name that is not denormd's stays, and made the build fail).
  Status RemoveBuilt() {
    if (!live_) return Status::Ok();
    DENORMD_RETURN_IF_ERROR(live_->DropBuiltCollections(suffix_));
    return running_plan_ ? live_->RemoveRelationsExcept(RunningRelations()) : Status::Ok();
  }

  // Step 6.
  Status Switch() {
    const auto start = std::chrono::steady_clock::now();
    std::unique_ptr<StoreTransaction> txn;
    DENORMD_RETURN_IF_ERROR(shadow_->Begin(&txn));
    Progress("switching: waiting for the running batches to commit");
    DENORMD_RETURN_IF_ERROR(txn->locks().LockWriters(/*exclusive=*/true));
    // The rest of the journal, a page at a time (in order: each page is
    // applied before the next is taken).
    uint64_t switched_changes = 0;
    for (;;) {
      std::vector<SourceRows::JournaledChange> taken;
      DENORMD_RETURN_IF_ERROR(txn->source().TakeJournal(JournalPage(), &taken));
      if (taken.empty()) break;
      DENORMD_RETURN_IF_ERROR(ApplyJournal(*txn, taken));
      switched_changes += taken.size();
    }
    ModelSwitch change;
    change.from_epoch = report_->from_epoch;
    change.suffix = suffix_;
    change.rebuilt = report_->change.collections_rebuilt;
    change.dropped = report_->change.collections_dropped;
    change.captured = CapturedCollections();
    change.capture_source = "apply epoch " + std::to_string(report_->from_epoch + 1);
    change.model_yaml = target_.model_yaml;
    change.model_fingerprint = report_->to_fingerprint;
    change.index_fingerprint = target_plan_->IndexFingerprint();
    const uint64_t epoch = report_->from_epoch + 1;
    bool switched = false;
    DENORMD_RETURN_IF_ERROR(shadow_->SwitchModel(*txn, change, &switched));
    if (!switched) {
      return Status::Fatal("the store's epoch is no longer " +
                           std::to_string(report_->from_epoch) +
                           " (another command changed the model while this apply built): "
                           "nothing switched");
    }
    Step("apply_switching");
    // The lock is still held (its connection did not end): nothing else
    // can have started changing the model.
    DENORMD_RETURN_IF_ERROR(lock_->Check());
    DENORMD_RETURN_IF_ERROR(txn->Commit());
    report_->switch_ms = Since(start) * 1000;
    report_->to_epoch = epoch;
    Progress("switched to epoch " + std::to_string(epoch) + " (" +
             FormatCount(switched_changes) + " changes caught up while the writers waited)");
    return Status::Ok();
  }

  // The change feed: the rebuilt collections it publishes, whose documents
  // the switch writes or deletes go to the outbox like a batch's, so that a
  // consumer mirroring the collection follows the switch.
  std::vector<std::string> CapturedCollections() const {
    std::vector<std::string> out;
    if (!target_.feed) return out;
    for (const std::string& collection : target_.PublishedCollections()) {
      if (std::binary_search(report_->change.collections_rebuilt.begin(),
                             report_->change.collections_rebuilt.end(), collection)) {
        out.push_back(collection);
      }
    }
    return out;
  }

  // Step 7: rows no model keeps any more.
  Status DropOldRelations() {
    return live_->RemoveRelations(SplitRelations(report_->change.relations_dropped));
  }

  const Config& target_;
  const ReconfigureOptions& options_;
  ReconfigureReport* report_;
  const std::string suffix_;
  const StoreFactory stores_;
  std::unique_ptr<StoreAdministration> control_;
  std::unique_ptr<AdministrationLock> lock_;  // held from Prepare on
  std::unique_ptr<Config> running_;
  std::unique_ptr<StoreAdministration> live_;
  std::unique_ptr<ProjectionPlan> running_plan_;
  std::unique_ptr<ProjectionPlan> target_plan_;
  std::unique_ptr<Config> shadow_config_;
  std::unique_ptr<ProjectionPlan> shadow_plan_;
  std::unique_ptr<BatchApplier> shadow_applier_;
  std::unique_ptr<StoreAdministration> shadow_;
  std::vector<std::string> reindex_types_;  // ascending
};

void WriteStrings(JsonWriter& w, const char* key,
                  const std::vector<std::string>& items) {
  w.Key(key);
  w.StartArray();
  for (const std::string& item : items) WriteJsonString(w, item);
  w.EndArray();
}

}  // namespace

Status Reconfigure(const Config& target, const ReconfigureOptions& options,
                   ReconfigureReport* report) {
  if (!(options.sample > 0 && options.sample <= 1)) {
    return Status::InvalidInput("--sample must be above 0 and at most 1");
  }
  Reconfiguration reconfiguration(target, options, report);
  return reconfiguration.Run();
}

std::string FormatReport(const ReconfigureReport& r, bool plan, const std::string& file) {
  std::ostringstream out;
  if (!r.had_model) {
    out << "schema " << r.schema << " has no recorded projections yet: "
        << (plan ? "apply records " + file + "'s (nothing to build)"
                 : "recorded " + file + "'s as epoch " + std::to_string(r.to_epoch))
        << "\n";
    return out.str();
  }
  if (r.cleaned_leftovers) out << "removed what an unfinished apply left\n";
  if (!r.changes()) {
    out << "schema " << r.schema << " already runs these projections (epoch " << r.from_epoch
        << ", fingerprint " << r.from_fingerprint << "): nothing to change\n";
    return out.str();
  }
  out << (plan ? "plan" : "applied") << " for schema " << r.schema << ": epoch " << r.from_epoch
      << " (" << r.from_fingerprint << ") -> " << (plan ? "next" : std::to_string(r.to_epoch))
      << " (" << r.to_fingerprint << ")\n";
  const ModelChange& c = r.change;
  for (const std::string& e : c.entities_added) out << "  + entity " << e << "\n";
  for (const std::string& e : c.entities_removed) out << "  - entity " << e << "\n";
  if (!c.projections.empty()) out << "projections:\n";
  for (const ProjectionChange& p : c.projections) {
    const char mark = p.kind == ProjectionChange::Kind::kAdded     ? '+'
                      : p.kind == ProjectionChange::Kind::kRemoved ? '-'
                                                                   : '~';
    out << "  " << mark << " " << p.name << " (collection " << p.collection << ") "
        << ProjectionChangeKindName(p.kind) << "\n";
    for (const std::string& d : p.details) out << "      " << d << "\n";
  }
  if (!c.relations_added.empty() || !c.relations_dropped.empty()) out << "reference index:\n";
  for (const std::string& rel : c.relations_added) out << "  + relation " << rel << " (built)\n";
  for (const std::string& rel : c.relations_dropped) out << "  - relation " << rel << " (dropped)\n";
  if (!r.collections.empty()) {
    out << "documents" << (r.estimated ? " (estimated from a " +
                                             std::to_string(static_cast<int>(r.sample * 100)) +
                                             " % sample)"
                                       : "")
        << (plan ? " apply would write:" : " written by the switch:") << "\n";
    char line[256];
    std::snprintf(line, sizeof line, "  %-28s %12s %12s %12s\n", "collection", "written", "deleted",
                  "unchanged");
    out << line;
    uint64_t w = 0, d = 0, u = 0;
    for (const CollectionCounts& cc : r.collections) {
      std::snprintf(line, sizeof line, "  %-28s %12s %12s %12s%s\n", cc.collection.c_str(),
                    FormatCount(cc.written).c_str(), FormatCount(cc.deleted).c_str(),
                    FormatCount(cc.unchanged).c_str(), cc.dropped ? "  (dropped)" : "");
      out << line;
      w += cc.written;
      d += cc.deleted;
      u += cc.unchanged;
    }
    std::snprintf(line, sizeof line, "  %-28s %12s %12s %12s\n", "total", FormatCount(w).c_str(),
                  FormatCount(d).c_str(), FormatCount(u).c_str());
    out << line;
  }
  for (const std::string& warning : r.warnings) out << "warning: " << warning << "\n";
  char timing[256];
  if (plan) {
    std::snprintf(timing, sizeof timing,
                  "time: index %.2f s, %s documents built in %.2f s; apply would take about "
                  "%.1f s plus its catch-up\n",
                  r.index_seconds, FormatCount(r.documents_built).c_str(), r.build_seconds,
                  r.estimated_seconds);
    out << timing << "apply it with: denormd apply -c " << file << "\n";
  } else {
    std::snprintf(timing, sizeof timing,
                  "time: index %.2f s (%s entities), build %.2f s (%s documents), %s changes "
                  "caught up, switch %.0f ms\n",
                  r.index_seconds, FormatCount(r.entities_reindexed).c_str(), r.build_seconds,
                  FormatCount(r.documents_built).c_str(), FormatCount(r.journal_changes).c_str(),
                  r.switch_ms);
    out << timing;
  }
  return out.str();
}

std::string ReportJson(const ReconfigureReport& r, bool plan) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("command");
  w.String(plan ? "plan" : "apply");
  WriteMember(w, "schema", r.schema);
  w.Key("changes");
  w.Bool(r.changes() || !r.had_model);
  WriteMember(w, "from_epoch", r.from_epoch);
  if (!plan) {
    WriteMember(w, "to_epoch", r.to_epoch);
  }
  WriteMember(w, "from_fingerprint", r.from_fingerprint);
  WriteMember(w, "to_fingerprint", r.to_fingerprint);
  WriteStrings(w, "entities_added", r.change.entities_added);
  WriteStrings(w, "entities_removed", r.change.entities_removed);
  w.Key("projections");
  w.StartArray();
  for (const ProjectionChange& p : r.change.projections) {
    w.StartObject();
    WriteMember(w, "name", p.name);
    WriteMember(w, "collection", p.collection);
    w.Key("change");
    w.String(ProjectionChangeKindName(p.kind));
    WriteStrings(w, "details", p.details);
    w.EndObject();
  }
  w.EndArray();
  WriteStrings(w, "collections_rebuilt", r.change.collections_rebuilt);
  WriteStrings(w, "collections_dropped", r.change.collections_dropped);
  WriteStrings(w, "warnings", r.warnings);
  WriteStrings(w, "relations_added", r.change.relations_added);
  WriteStrings(w, "relations_dropped", r.change.relations_dropped);
  w.Key("documents");
  w.StartObject();
  uint64_t written = 0, deleted = 0, unchanged = 0;
  for (const CollectionCounts& c : r.collections) {
    w.Key(c.collection.c_str());
    w.StartObject();
    WriteMember(w, "written", c.written);
    WriteMember(w, "deleted", c.deleted);
    WriteMember(w, "unchanged", c.unchanged);
    w.Key("dropped");
    w.Bool(c.dropped);
    w.EndObject();
    written += c.written;
    deleted += c.deleted;
    unchanged += c.unchanged;
  }
  w.EndObject();
  w.Key("total");
  w.StartObject();
  WriteMember(w, "written", written);
  WriteMember(w, "deleted", deleted);
  WriteMember(w, "unchanged", unchanged);
  w.EndObject();
  w.Key("estimated");
  w.Bool(r.estimated);
  w.Key("sample");
  w.Double(r.sample);
  WriteMember(w, "entities_reindexed", r.entities_reindexed);
  WriteMember(w, "documents_built", r.documents_built);
  w.Key("index_seconds");
  w.Double(r.index_seconds);
  w.Key("build_seconds");
  w.Double(r.build_seconds);
  if (plan) {
    w.Key("estimated_seconds");
    w.Double(r.estimated_seconds);
  } else {
    WriteMember(w, "journal_changes", r.journal_changes);
    w.Key("switch_ms");
    w.Double(r.switch_ms);
  }
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

}  // namespace denormd
