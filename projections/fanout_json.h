// A fan-out statistic as JSON members: the one spelling the store's statement
// (connectors/postgres_stream_ledger.cc) and `denormd advise --json` share.
#ifndef DENORMD_PROJECTIONS_FANOUT_JSON_H_
#define DENORMD_PROJECTIONS_FANOUT_JSON_H_

#include "projections/json_writer.h"
#include "projections/store.h"

namespace denormd {

// Writes `stat`'s type, field, changes, documents, max_documents and max_id
// as members of the object being written (not its hour).
inline void WriteFanOutStatMembers(JsonWriter& w, const FanOutStat& stat) {
  WriteMember(w, "type", stat.type);
  WriteMember(w, "field", stat.field);
  WriteMember(w, "changes", stat.changes);
  WriteMember(w, "documents", stat.documents);
  WriteMember(w, "max_documents", stat.max_documents);
  WriteMember(w, "max_id", stat.max_id);
}

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_FANOUT_JSON_H_
