#include "connectors/feed_sink_registry.h"

namespace denormd {

// One line per kind: its file under connectors/ defines it.
const FeedSinkKind& KafkaFeedSinkKind();

const std::vector<const FeedSinkKind*>& BuiltinFeedSinks() {
  static const std::vector<const FeedSinkKind*> kinds = {
      &KafkaFeedSinkKind(),
  };
  return kinds;
}

const FeedSinkKind& DefaultFeedSink() { return *BuiltinFeedSinks().front(); }

}  // namespace denormd
