#include "tests/fuzz/fuzz_targets.h"

#include <exception>
#include <optional>

#include "formats/format_registry.h"
#include "projections/limits.h"
#include "projections/projection_plan.h"

namespace denormd {
namespace fuzz {

std::string CheckEventDecoding(const Decoder& decoder, const Config& config,
                               const std::string& input, std::vector<EntityEvent>* accepted) {
  RawRecord record;
  record.at = {"fuzz", 0, 1};
  record.value = input;
  std::vector<EntityEvent> events;
  bool skipped = false;
  Status status;
  try {
    status = decoder.Decode(record, &events, &skipped);
  } catch (const std::exception& e) {
    return std::string("the decoder threw: ") + e.what();
  } catch (...) {
    return "the decoder threw";
  }
  if (!status.ok()) {
    if (!status.IsInvalidInput()) return "not InvalidInput but " + status.ToString();
    if (status.message().empty()) return "a refusal without a reason";
    return "";
  }
  if (skipped) return "";
  for (const EntityEvent& event : events) {
    if (!config.HasEntity(event.key.type)) return "accepted unknown type \"" + event.key.type + "\"";
    if (event.key.id.empty()) return "accepted an empty id";
    if (event.key.id.size() > kMaxIdBytes) return "accepted an id over the limit";
    if (event.op == EventOp::kUpsert && (!event.data || !event.data->IsObject())) {
      return "accepted an upsert whose data is not an object";
    }
    if (event.op == EventOp::kDelete && event.data) return "a delete carries data";
  }
  accepted->insert(accepted->end(), events.begin(), events.end());
  return "";
}

std::string CheckConfigParsing(const std::string& yaml) {
  std::vector<ConfigError> errors;
  std::optional<Config> config;
  try {
    config = ParseConfig(yaml, "fuzz.yaml", &errors);
  } catch (const std::exception& e) {
    return std::string("the parser threw: ") + e.what();
  } catch (...) {
    return "the parser threw";
  }
  if (config) {
    if (!errors.empty()) return "a config and errors: " + errors[0].ToString("fuzz.yaml");
    try {
      ProjectionPlan plan(*config);
      (void)plan.IndexFingerprint();
    } catch (const std::exception& e) {
      return std::string("the plan threw: ") + e.what();
    }
    return "";
  }
  if (errors.empty()) return "no config and no error";
  for (const ConfigError& error : errors) {
    if (error.message.empty()) return "an error without a message at " + error.where;
    if (error.place.line < 0 || error.place.column < 0) return "an error at a negative place";
  }
  return "";
}

}  // namespace fuzz
}  // namespace denormd
