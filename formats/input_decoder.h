// InputDecoder: the decoder of every input of a config. A record is decoded
// with the format of its Kafka topic (source.kafka.topics: the first entry
// whose name equals the topic, else the first pattern that matches it; the
// decoder the format makes, formats/input_format.h); records of event logs
// (no topic), and of topics no entry names, use the native format.
//
// Pure and thread-safe like every Decoder.
#ifndef DENORMD_FORMATS_INPUT_DECODER_H_
#define DENORMD_FORMATS_INPUT_DECODER_H_

#include <map>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "formats/decoder.h"
#include "formats/native_format.h"

namespace denormd {

class InputDecoder : public Decoder {
 public:
  // Borrows `config`, which must outlive the decoder. Its topic patterns
  // were checked by the config parser.
  explicit InputDecoder(const Config& config);
  Status Decode(const RawRecord& record, std::vector<EntityEvent>* events,
                bool* skipped) const override;

  // The decoder of records of `topic`.
  const Decoder& ForTopic(const std::string& topic) const;

 private:
  NativeDecoder native_;
  std::map<std::string, std::unique_ptr<Decoder>> by_name_;
  std::vector<std::pair<std::regex, std::unique_ptr<Decoder>>> by_pattern_;
};

}  // namespace denormd

#endif  // DENORMD_FORMATS_INPUT_DECODER_H_
