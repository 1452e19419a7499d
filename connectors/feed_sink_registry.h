// The feed sinks denormd knows (connectors/feed_sink.h: FeedSinkKind).
#ifndef DENORMD_CONNECTORS_FEED_SINK_REGISTRY_H_
#define DENORMD_CONNECTORS_FEED_SINK_REGISTRY_H_

#include <vector>

#include "connectors/feed_sink.h"

namespace denormd {

// Every kind (feed_sink_registry.cc lists them); the first is the default.
const std::vector<const FeedSinkKind*>& BuiltinFeedSinks();
// The kind that publishes a config's feed: the first, Kafka (the only one;
// no config key chooses another).
const FeedSinkKind& DefaultFeedSink();

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_FEED_SINK_REGISTRY_H_
