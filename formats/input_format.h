// InputFormat: one way the records of a topic become entity events. A format
// owns, in its one file under formats/:
//   - its config keys: its syntax (config/input_format_syntax.h: the value
//     of `format` naming it, the keys it adds to a topic map) parsed into its
//     InputSettings, reported with their places like every config error;
//   - its decoder: what each record of its topics (a tombstone included)
//     becomes;
//   - its version rule: where each event's version comes from (native: the
//     event's own "version"; Debezium: source.lsn), applied by its decoder
//     and stated in its header;
//   - what the Kafka source must know of its topics.
// formats/format_registry.cc lists the formats, one line each; nothing else
// names them.
//
// Immutable; shared by threads.
#ifndef DENORMD_FORMATS_INPUT_FORMAT_H_
#define DENORMD_FORMATS_INPUT_FORMAT_H_

#include <memory>

#include "config/config.h"
#include "config/input_format_syntax.h"
#include "formats/decoder.h"

namespace denormd {

class InputFormat : public InputFormatSyntax {
 public:
  // The decoder of the records of `input`, an entry of config.kafka->inputs
  // whose format is this one (its settings, when set, parsed by this
  // format's Parse). Borrows both, which must outlive the decoder.
  virtual std::unique_ptr<Decoder> MakeDecoder(const Config& config,
                                               const TopicInput& input) const = 0;
  // Whether its topics may be created after denormd subscribed (Kafka Connect
  // creates a table's topic with the table's first row): the Kafka source
  // then looks for new topics every few seconds rather than every few
  // minutes.
  virtual bool TopicsAppearLater() const { return false; }
};

}  // namespace denormd

#endif  // DENORMD_FORMATS_INPUT_FORMAT_H_
