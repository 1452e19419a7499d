#include "formats/input_decoder.h"

#include "formats/format_registry.h"

namespace denormd {

InputDecoder::InputDecoder(const Config& config) : native_(config) {
  if (!config.kafka) return;
  for (const TopicInput& input : config.kafka->inputs) {
    std::unique_ptr<Decoder> decoder = FormatOf(input).MakeDecoder(config, input);
    if (!input.IsPattern()) {
      by_name_.emplace(input.topic, std::move(decoder));
      continue;
    }
    try {
      by_pattern_.emplace_back(std::regex(input.topic, std::regex::ECMAScript), std::move(decoder));
    } catch (const std::regex_error&) {
      // Refused by the config parser; a hand-made Config may still hold one.
    }
  }
}

const Decoder& InputDecoder::ForTopic(const std::string& topic) const {
  if (topic.empty()) return native_;
  auto it = by_name_.find(topic);
  if (it != by_name_.end()) return *it->second;
  for (const auto& [pattern, decoder] : by_pattern_) {
    if (std::regex_match(topic, pattern)) return *decoder;
  }
  return native_;
}

Status InputDecoder::Decode(const RawRecord& record, std::vector<EntityEvent>* events,
                            bool* skipped) const {
  return ForTopic(record.topic).Decode(record, events, skipped);
}

}  // namespace denormd
