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
#include "connectors/postgres_sql.h"
#include "connectors/postgres_store.h"
#include "formats/format_registry.h"
#include "projections/batch_applier.h"
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

// A live row `l` and a built row `s` are the same document (a pk that
// changed makes another document).
constexpr const char* kSameDocument =
    " l.projection = s.projection and l.id = s.id and coalesce(l.pk, '') = coalesce(s.pk, '')";

std::string Ident(const std::string& name) {
  std::string out = "\"";
  for (char c : name) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string Literal(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Which units a sample takes (the same in every run).
bool InSample(const std::string& unit, double fraction) {
  return static_cast<double>(Fnv1a64(unit) % 1000000) < fraction * 1000000;
}

// The indexes CreateTables makes for a collection, by name suffix.
const char* const kCollectionIndexSuffixes[] = {"_by_pk", "_by_lo", "_by_seq", "_by_number",
                                                "_key"};

// ("type", "relation") pairs of "<type> <relation>" strings.
std::vector<std::pair<std::string, std::string>> SplitRelations(
    const std::vector<std::string>& relations) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& relation : relations) {
    const size_t space = relation.find(' ');
    out.push_back({relation.substr(0, space), relation.substr(space + 1)});
  }
  return out;
}

// "(type, field) in (...)" over index rows, false for an empty list.
std::string RelationCondition(const std::vector<std::pair<std::string, std::string>>& relations) {
  if (relations.empty()) return "false";
  std::string list;
  for (const auto& relation : relations) {
    list += (list.empty() ? "" : ", ") + std::string("(") + Literal(relation.first) + ", " +
            Literal(relation.second) + ")";
  }
  return "(type, field) in (" + list + ")";
}

class Reconfiguration {
 public:
  Reconfiguration(const Config& target, const ReconfigureOptions& options,
                  ReconfigureReport* report)
      : target_(target),
        options_(options),
        report_(report),
        suffix_(options.plan_only ? "__plan" : "__next"),
        schema_(Ident(target.store.schema)) {}

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
    DENORMD_RETURN_IF_ERROR(AdministrationLock::Acquire(
        target_, options_.postgres, options_.plan_only ? "plan" : "apply", &lock_));
    control_ = std::make_unique<PostgresStore>(target_, options_.postgres);
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
    live_ = std::make_unique<PostgresStore>(*running_, options_.postgres);
    DENORMD_RETURN_IF_ERROR(live_->Open(PostgresStore::OpenMode::kInspect));
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

  std::string Table(const std::string& collection) const {
    return schema_ + "." + Ident(collection);
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
    const std::string s = schema_;
    return live_->Execute("lock table " + s + ".writers in exclusive mode;"
                          " delete from " + s + ".apply_journal;"
                          " insert into " + s + ".meta (key, value) values ('applying', " +
                          Literal(buffer.GetString()) + ") on conflict (key) do update"
                          " set value = excluded.value");
  }

  // What an unfinished apply (killed) left: its tables, its journal, its
  // mark. The index rows it built are removed by Build's first step.
  Status RemoveLeftovers(const std::string& applying) {
    // The recorded collections (a JSON array of strings).
    std::vector<std::string> rows;
    DENORMD_RETURN_IF_ERROR(live_->Execute(
        "select x from jsonb_array_elements_text(" + Literal(applying) +
            "::jsonb->'collections') x",
        &rows));
    Progress("removing what an unfinished apply left (" + std::to_string(rows.size()) +
             " tables, its journal)");
    DENORMD_RETURN_IF_ERROR(DropTablesEndingIn("__next"));
    return live_->Execute("lock table " + schema_ + ".writers in exclusive mode;"
                          " delete from " + schema_ + ".meta where key = 'applying';"
                          " delete from " + schema_ + ".apply_journal");
  }

  // Drops every table of the schema whose name ends in `suffix` and that
  // carries denormd's mark of ownership (what a killed plan or apply built;
  // collection names never end so). Another's table of such a name stays.
  Status DropTablesEndingIn(const std::string& suffix) {
    std::vector<std::string> tables;
    DENORMD_RETURN_IF_ERROR(live_->Execute(
        "select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace"
        " where n.nspname = " + Literal(target_.store.schema) + " and c.relkind = 'r'"
        " and right(c.relname, " + std::to_string(suffix.size()) + ") = " + Literal(suffix) +
            " and obj_description(c.oid, 'pg_class') = " + Literal(kOwnershipMark),
        &tables));
    return DropOwnTables(tables);
  }

  // Drops those of `tables` (unquoted names in the schema) that exist and
  // carry denormd's mark of ownership; leaves any other alone.
  Status DropOwnTables(const std::vector<std::string>& tables) {
    std::string sql;
    for (const std::string& table : tables) {
      const std::string name = Literal(Table(table));
      sql += "do $$ begin if obj_description(to_regclass(" + name + "), 'pg_class') = " +
             Literal(kOwnershipMark) + " then execute 'drop table ' || " + name +
             "; end if; end $$;";
    }
    return sql.empty() ? Status::Ok() : live_->Execute(sql);
  }

  // Steps 3 and 4.
  Status Build() {
    running_plan_ = std::make_unique<ProjectionPlan>(*running_);
    target_plan_ = std::make_unique<ProjectionPlan>(target_);
    shadow_config_ = std::make_unique<Config>(ShadowConfig());
    shadow_plan_ = std::make_unique<ProjectionPlan>(*shadow_config_);
    shadow_applier_ = std::make_unique<BatchApplier>(*shadow_plan_);
    shadow_ = std::make_unique<PostgresStore>(*shadow_config_, options_.postgres);
    // Tables an earlier plan (or apply) left when killed go first, whichever
    // collections they were: the build starts empty.
    DENORMD_RETURN_IF_ERROR(DropTablesEndingIn(suffix_));
    DENORMD_RETURN_IF_ERROR(shadow_->Open(PostgresStore::OpenMode::kBuild));

    // Index rows of relations the running model does not keep (an earlier
    // plan's or a killed apply's) are stale: removed before building.
    DENORMD_RETURN_IF_ERROR(live_->Execute(DeleteRowsOfOtherRelations()));
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

  // The statements that delete the index rows (and counters) of every
  // relation the running model does not keep.
  std::string DeleteRowsOfOtherRelations() const {
    std::vector<std::string> running_relations;
    for (const std::string& type : running_->entities) {
      for (const Relation* relation : running_plan_->ForType(type).relations) {
        running_relations.push_back(type + " " + relation->name());
      }
    }
    const std::string keep = RelationCondition(SplitRelations(running_relations));
    return "delete from " + schema_ + ".refs where not " + keep + "; delete from " + schema_ +
           ".ref_counts where not " + keep + ";";
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
      std::unique_ptr<StoreTransaction> txn;
      DENORMD_RETURN_IF_ERROR(shadow_->Begin(&txn));
      DENORMD_RETURN_IF_ERROR(txn->locks().LockWriters(/*exclusive=*/false));
      std::vector<SourceRows::JournaledChange> taken;
      DENORMD_RETURN_IF_ERROR(txn->source().TakeJournal(JournalPage(), &taken));
      DENORMD_RETURN_IF_ERROR(ApplyJournal(*txn, taken));
      DENORMD_RETURN_IF_ERROR(txn->Commit());
      Step("apply_caught_up");
      Progress("catch-up round " + std::to_string(round) + ": " + FormatCount(taken.size()) +
               " changes");
      if (taken.size() < kSwitchBelowChanges) return Status::Ok();
    }
    return Status::Ok();  // the switch takes the rest
  }

  // Counts, in `txn`, what replacing the live tables with the built ones
  // writes, deletes and leaves (per collection, into report_->collections).
  Status CountIn(StoreTransaction& txn) {
    report_->collections.clear();
    const double f = report_->estimated ? options_.sample : 1.0;
    for (const std::string& collection : report_->change.collections_rebuilt) {
      CollectionCounts counts;
      counts.collection = collection;
      const std::string live = Table(collection), built = Table(collection + suffix_);
      std::vector<std::string> rows;
      DENORMD_RETURN_IF_ERROR(txn.ExecuteSql(
          "select to_regclass(" + Literal(live) + ") is not null", &rows));
      const bool exists = !rows.empty() && rows[0] == "t";
      rows.clear();
      const std::string join = kSameDocument;
      if (exists) {
        DENORMD_RETURN_IF_ERROR(txn.ExecuteSql(
            "select count(*) filter (where l.id is null or l.doc is distinct from s.doc),"
            " count(*) filter (where l.id is not null and l.doc = s.doc),"
            " count(l.id), (select count(*) from " + live + ")"
            " from " + built + " s left join " + live + " l on" + join,
            &rows));
      } else {
        DENORMD_RETURN_IF_ERROR(
            txn.ExecuteSql("select count(*), 0, 0, 0 from " + built, &rows));
      }
      uint64_t written = 0, unchanged = 0, matched = 0, live_total = 0;
      std::sscanf(rows[0].c_str(), "%lu\t%lu\t%lu\t%lu", &written, &unchanged, &matched,
                  &live_total);
      if (f < 1.0) {
        counts.written = static_cast<uint64_t>(written / f + 0.5);
        counts.unchanged = static_cast<uint64_t>(unchanged / f + 0.5);
        const double matched_all = matched / f;
        counts.deleted = matched_all >= live_total ? 0 : static_cast<uint64_t>(live_total - matched_all + 0.5);
      } else {
        counts.written = written;
        counts.unchanged = unchanged;
        counts.deleted = live_total - matched;
      }
      report_->collections.push_back(counts);
    }
    for (const std::string& collection : report_->change.collections_dropped) {
      CollectionCounts counts;
      counts.collection = collection;
      counts.dropped = true;
      std::vector<std::string> rows;
      DENORMD_RETURN_IF_ERROR(txn.ExecuteSql(
          "select to_regclass(" + Literal(Table(collection)) + ") is not null", &rows));
      if (!rows.empty() && rows[0] == "t") {
        rows.clear();
        DENORMD_RETURN_IF_ERROR(txn.ExecuteSql("select count(*) from " + Table(collection), &rows));
      } else {
        rows = {"0"};
      }
      counts.deleted = std::strtoull(rows[0].c_str(), nullptr, 10);
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

  // Counts in a transaction of its own (rolled back: it only reads).
  Status Count() {
    std::unique_ptr<StoreTransaction> txn;
    DENORMD_RETURN_IF_ERROR(shadow_->Begin(&txn));
    return CountIn(*txn);
  }

  // plan: what it built goes again (only its own tables: a table of such
  // a name that is not denormd's stays, and made the build fail).
  Status RemoveBuilt() {
    if (!live_) return Status::Ok();
    std::vector<std::string> built;
    for (const std::string& collection : report_->change.collections_rebuilt) {
      built.push_back(collection + suffix_);
    }
    DENORMD_RETURN_IF_ERROR(DropOwnTables(built));
    return running_plan_ ? live_->Execute(DeleteRowsOfOtherRelations()) : Status::Ok();
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
    std::string sql = CaptureSwitchedDocuments();
    for (const std::string& collection : report_->change.collections_dropped) {
      sql += "drop table if exists " + Table(collection) + ";";
    }
    for (const std::string& collection : report_->change.collections_rebuilt) {
      sql += "drop table if exists " + Table(collection) + ";";
      sql += "alter table " + Table(collection + suffix_) + " rename to " + Ident(collection) + ";";
      for (const char* index : kCollectionIndexSuffixes) {
        sql += "alter index if exists " + schema_ + "." + Ident(collection + suffix_ + index) +
               " rename to " + Ident(collection + index) + ";";
      }
    }
    const uint64_t epoch = report_->from_epoch + 1;
    // Compare and set: the switch is only from the epoch Prepare read.
    std::vector<std::string> moved;
    DENORMD_RETURN_IF_ERROR(txn->ExecuteSql(
        "update " + schema_ + ".meta set value = " + Literal(std::to_string(epoch)) +
            " where key = 'epoch' and value = " + Literal(std::to_string(report_->from_epoch)) +
            " returning value",
        &moved));
    if (moved.size() != 1) {
      return Status::Fatal("the store's epoch is no longer " +
                           std::to_string(report_->from_epoch) +
                           " (another command changed the model while this apply built): "
                           "nothing switched");
    }
    sql += "insert into " + schema_ + ".meta (key, value) values"
           " ('model', " + Literal(target_.model_yaml) + "),"
           " ('model_fingerprint', " + Literal(report_->to_fingerprint) + "),"
           " ('index', " + Literal(target_plan_->IndexFingerprint()) + ")"
           " on conflict (key) do update set value = excluded.value;"
           " delete from " + schema_ + ".meta where key = 'applying';";
    DENORMD_RETURN_IF_ERROR(txn->ExecuteSql(sql, nullptr));
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

  // The change feed: the documents the switch writes or deletes in a
  // published collection go to the outbox like a batch's (when the store
  // has one), so that a consumer mirroring the collection follows the switch.
  std::string CaptureSwitchedDocuments() const {
    if (!target_.feed) return "";
    std::string sql;
    const std::string source = Literal("apply epoch " + std::to_string(report_->from_epoch + 1));
    for (const std::string& collection : target_.PublishedCollections()) {
      if (!std::binary_search(report_->change.collections_rebuilt.begin(),
                              report_->change.collections_rebuilt.end(), collection)) {
        continue;
      }
      const std::string live = Table(collection), built = Table(collection + suffix_);
      const std::string join = kSameDocument;
      const std::string insert = " insert into " + schema_ +
                                 ".outbox (collection, id, pk, doc, source) select " +
                                 Literal(collection) + ", ";
      // A new collection: every document is new.
      sql += "do $$ begin if to_regclass(" + Literal(schema_ + ".outbox") + ") is null then"
             " return; end if; if to_regclass(" + Literal(live) + ") is null then" +
             insert + "s.id, s.pk, s.doc, " + source + " from " + built + " s; else" +
             insert + "s.id, s.pk, s.doc, " + source + " from " + built + " s left join " + live +
             " l on" + join + " where l.id is null or l.doc is distinct from s.doc;" +
             insert + "l.id, l.pk, null, " + source + " from " + live +
             " l where not exists (select 1 from " + built + " s where" + join + ");"
             " end if; end $$;";
    }
    return sql;
  }

  // Step 7: rows no model keeps any more.
  Status DropOldRelations() {
    if (report_->change.relations_dropped.empty()) return Status::Ok();
    const std::string gone = RelationCondition(SplitRelations(report_->change.relations_dropped));
    return live_->Execute("delete from " + schema_ + ".refs where " + gone + "; delete from " +
                          schema_ + ".ref_counts where " + gone);
  }

  const Config& target_;
  const ReconfigureOptions& options_;
  ReconfigureReport* report_;
  const std::string suffix_;
  const std::string schema_;  // quoted
  std::unique_ptr<AdministrationLock> lock_;  // held from Prepare on
  std::unique_ptr<PostgresStore> control_;
  std::unique_ptr<Config> running_;
  std::unique_ptr<PostgresStore> live_;
  std::unique_ptr<ProjectionPlan> running_plan_;
  std::unique_ptr<ProjectionPlan> target_plan_;
  std::unique_ptr<Config> shadow_config_;
  std::unique_ptr<ProjectionPlan> shadow_plan_;
  std::unique_ptr<BatchApplier> shadow_applier_;
  std::unique_ptr<PostgresStore> shadow_;
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
  w.Key("schema");
  WriteJsonString(w, r.schema);
  w.Key("changes");
  w.Bool(r.changes() || !r.had_model);
  w.Key("from_epoch");
  w.Uint64(r.from_epoch);
  if (!plan) {
    w.Key("to_epoch");
    w.Uint64(r.to_epoch);
  }
  w.Key("from_fingerprint");
  WriteJsonString(w, r.from_fingerprint);
  w.Key("to_fingerprint");
  WriteJsonString(w, r.to_fingerprint);
  WriteStrings(w, "entities_added", r.change.entities_added);
  WriteStrings(w, "entities_removed", r.change.entities_removed);
  w.Key("projections");
  w.StartArray();
  for (const ProjectionChange& p : r.change.projections) {
    w.StartObject();
    w.Key("name");
    WriteJsonString(w, p.name);
    w.Key("collection");
    WriteJsonString(w, p.collection);
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
    w.Key("written");
    w.Uint64(c.written);
    w.Key("deleted");
    w.Uint64(c.deleted);
    w.Key("unchanged");
    w.Uint64(c.unchanged);
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
  w.Key("written");
  w.Uint64(written);
  w.Key("deleted");
  w.Uint64(deleted);
  w.Key("unchanged");
  w.Uint64(unchanged);
  w.EndObject();
  w.Key("estimated");
  w.Bool(r.estimated);
  w.Key("sample");
  w.Double(r.sample);
  w.Key("entities_reindexed");
  w.Uint64(r.entities_reindexed);
  w.Key("documents_built");
  w.Uint64(r.documents_built);
  w.Key("index_seconds");
  w.Double(r.index_seconds);
  w.Key("build_seconds");
  w.Double(r.build_seconds);
  if (plan) {
    w.Key("estimated_seconds");
    w.Double(r.estimated_seconds);
  } else {
    w.Key("journal_changes");
    w.Uint64(r.journal_changes);
    w.Key("switch_ms");
    w.Double(r.switch_ms);
  }
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

}  // namespace denormd
