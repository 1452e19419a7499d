// The sections of a configuration file, each read by its own functions over
// one ConfigReader (config_reader.h). Private to config/; ParseConfig
// (config.cc) calls them in the order that lets later sections check against
// earlier ones: entities first, the feed last.
//
// Each function reports every problem through the reader and fills what it
// could read; none throws (yaml-cpp's own exceptions are caught by
// ParseConfig).
#ifndef DENORMD_CONFIG_CONFIG_SECTIONS_H_
#define DENORMD_CONFIG_CONFIG_SECTIONS_H_

#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/config_reader.h"

namespace denormd {
namespace config_internal {

// The source: source.kafka, its topics and their input formats, whose own
// keys the formats read (config/sources.cc). Call after ReadEntities: a
// format may check the entity types a topic names (Debezium's `entity`).
void ReadSource(ConfigReader& reader, const Item& item, Config* config);
// A map of librdkafka properties (source.kafka.properties,
// feed.properties), appended in file order; each value must be a scalar.
void ReadKafkaProperties(ConfigReader& reader, const Item& item,
                         std::vector<std::pair<std::string, std::string>>* out);

// The run-time settings (config/runtime.cc): store, batch, retention,
// limits, log.
void ReadStore(ConfigReader& reader, const Item& item, Config* config);
void ReadBatch(ConfigReader& reader, const Item& item, Config* config);
void ReadRetention(ConfigReader& reader, const Item& item, Config* config);
void ReadLimits(ConfigReader& reader, const Item& item, Config* config);
void ReadLog(ConfigReader& reader, const Item& item, Config* config);
// The feed section, then what it can only be checked against once the rest of
// the file is read (the collections, source.kafka's brokers, the store's
// schema) and its defaults: call it last.
void ReadFeed(ConfigReader& reader, const Item& item, Config* config);

// The model (config/projections.cc): the entity types, declared to the
// reader so that every later section checks the types it names; then the
// projections, with the checks across them (collections shared by several).
void ReadEntities(ConfigReader& reader, const Item& item, Config* config);
void ReadProjections(ConfigReader& reader, const Item& item, Config* config);

// Expressions (config/expressions.cc): a field of an entity projection
// (`in_select` false) or an entry of a select map (true: paths, templates and
// {value: ...} only). `root_type` is the projection's entity type, handed to
// a derivation kind. True when it read without a problem.
bool ReadExpression(ConfigReader& reader, const Item& item, bool in_select,
                    const std::string& root_type, Expression* out);
// select: a list of field names or a map of name: expression.
bool ReadSelection(ConfigReader& reader, const Item& item, Selection* out);

}  // namespace config_internal
}  // namespace denormd

#endif  // DENORMD_CONFIG_CONFIG_SECTIONS_H_
