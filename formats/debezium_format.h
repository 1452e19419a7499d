// The Debezium input format: change events of one database table, as the
// Debezium PostgreSQL connector writes them to Kafka through Kafka Connect's
// JsonConverter, with or without its schema wrapper
// ({"schema": ..., "payload": ...}; both are accepted, record by record).
//
// One record of the table's topic becomes at most one entity event:
//   op c, r, u   upsert of the row (`after`, every column; json_columns decoded)
//   op d         delete (only the key is read: under the default replica
//                identity `before` holds the key columns and filler values)
//   null value   a tombstone (log compaction's marker after a delete): skipped,
//                counted in BatchStats::skipped
//   op t         TRUNCATE: a dead letter whose reason says what to do (the
//                truncated rows are not deleted; deletes of every stored
//                entity of the type at the truncate's lsn resync exactly)
// Anything else (not JSON, no or unknown op, no usable id, a field of the
// wrong type, no source.lsn) is a dead letter whose reason names what is
// wrong and where.
//
// The entity type is DebeziumSettings::entity, or the table name (the topic
// name's last dot-separated part). The id is made of the key columns
// (DebeziumSettings::id_columns, or every column of the record key in its
// order):
// one column gives its value's text; several give each value's text with '\'
// and ':' escaped by a '\', joined with ':' ({"book_id": "b1", "author_id":
// "a:1"} -> "b1:a\:1"). A value's text: a string as it is, an integer in
// decimal, true/false; null and other types have none (a dead letter). A
// column missing from the key is read from the row (`after`, or `before` for
// a delete), so that a table without a primary key can name its id columns.
//
// The version is source.lsn, the PostgreSQL log position of the change:
//   - streamed changes: the LSN of the change's own WAL record. It increases
//     from one change of a row to the next (a row is changed by one
//     transaction at a time, and pgoutput sends transactions in commit
//     order), and Kafka Connect's redeliveries after a crash repeat it
//     exactly, so a redelivered or older event is stale and skipped.
//   - snapshot (op r): every event of one snapshot carries the snapshot's
//     consistent point, lower than any change streamed after it; a later
//     snapshot (a new slot) has a greater one. A snapshot row is therefore
//     replaced by every change streamed after the snapshot, and never
//     replaces one.
//   - events sharing an LSN: besides a snapshot's, only the two halves of a
//     primary-key update (d of the old key, c of the new key), which are
//     different entities.
// Caveat: a transaction still open when the connector's replication slot is
// created can commit after the snapshot with change LSNs below the
// snapshot's; its changes would then be stale. Create the connector (its
// slot) while no transaction writing the captured tables is open, or run
// `denormd verify` after the snapshot. docs/configuration.md, "Debezium".
//
// Its config keys (docs/configuration.md, "Input formats, Debezium"), read by
// DebeziumFormat() in debezium_format.cc, its entry in
// formats/format_registry.cc: entity, id_columns and json_columns. Its topics
// may appear after the subscription (InputFormat::TopicsAppearLater).
//
// Pure and thread-safe like every Decoder.
#ifndef DENORMD_FORMATS_DEBEZIUM_FORMAT_H_
#define DENORMD_FORMATS_DEBEZIUM_FORMAT_H_

#include <string>
#include <vector>

#include "config/config.h"
#include "formats/decoder.h"

namespace denormd {

// The settings of one `format: debezium` topic.
struct DebeziumSettings : InputSettings {
  // The entity type of the table's rows; "" = the table name as it is: the
  // last dot-separated part of the topic name ("app.public.books" -> "books").
  std::string entity;
  // The columns whose values make the entity id, in this order; empty = every
  // column of the record key (the primary key), in the key's order.
  std::vector<std::string> id_columns;
  // Columns whose values are strings holding JSON (json/jsonb columns, which
  // Debezium sends as text): decoded into JSON values.
  std::vector<std::string> json_columns;

  std::string Normalized() const override;
};

// The settings of `input`, a topic of format debezium (the defaults when it
// has none: a hand-made Config).
const DebeziumSettings& DebeziumSettingsOf(const TopicInput& input);

class DebeziumDecoder : public Decoder {
 public:
  // Borrows `config` and `settings` (those of one of its topics), which
  // must outlive the decoder.
  DebeziumDecoder(const Config& config, const DebeziumSettings& settings)
      : config_(config), settings_(settings) {}
  Status Decode(const RawRecord& record, std::vector<EntityEvent>* events,
                bool* skipped) const override;

 private:
  const Config& config_;
  const DebeziumSettings& settings_;
};

// The entity id of several key values' texts, as described above.
std::string JoinIdParts(const std::vector<std::string>& parts);

}  // namespace denormd

#endif  // DENORMD_FORMATS_DEBEZIUM_FORMAT_H_
