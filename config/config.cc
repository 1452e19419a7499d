// Parsing and validation of the denormd configuration (see config.h and
// docs/configuration.md): the file and its top level. The sections are read
// by config_sections.h's functions over a ConfigReader (config_reader.h), one
// file each: sources.cc, runtime.cc, projections.cc and expressions.cc; the
// model's canonical forms and ConfigChanges are in model.cc.
//
// The parser walks the YAML tree once, filling the plain structs of config.h
// and recording every problem it meets as a ConfigError; it never stops at the
// first one. Checks that need the whole file (entity types, collections shared
// by several projections) run after the walk. yaml-cpp exceptions are caught
// at the boundary: nothing here throws to the caller.
#include "config/config.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

#include "common/text.h"
#include "config/config_reader.h"
#include "config/config_sections.h"

namespace denormd {
namespace {

// Where the second YAML document of a text starts, or nullopt when it holds
// at most one. Counts with the event parser and stops after the second
// document: yaml-cpp 0.7's LoadAll never returns on some malformed texts (a
// line that starts with ",": the scanner yields empty documents without end),
// and a config must not hang the daemon that reads it.
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { last_start_ = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
  const YAML::Mark& last_start() const { return last_start_; }

 private:
  YAML::Mark last_start_ = YAML::Mark::null_mark();
};

std::optional<ConfigPlace> SecondDocumentPlace(const std::string& yaml_text) {
  std::istringstream in(yaml_text);
  YAML::Parser parser(in);
  DocumentCounter counter;
  if (!parser.HandleNextDocument(counter)) return std::nullopt;
  if (!parser.HandleNextDocument(counter)) return std::nullopt;
  const YAML::Mark& mark = counter.last_start();
  if (mark.is_null()) return ConfigPlace{};
  return ConfigPlace{mark.line + 1, mark.column + 1};
}

}  // namespace

namespace config_internal {
namespace {

const KeyList kTopKeys = {"source", "store", "batch", "retention", "limits", "log", "entities",
                          "projections", "feed"};

// Fills *config from the document `root`; problems go to `reader`.
void ReadSections(ConfigReader& reader, const YAML::Node& root, Config* config) {
  const Item top{root, "", PlaceOf(root)};
  if (root.IsNull()) {
    reader.Error(top, "the configuration is empty");
    return;
  }
  if (!root.IsMap()) {
    reader.Error(top, "the configuration must be a map with the keys " + JoinKeys(kTopKeys) +
                          ", found " + Describe(root));
    return;
  }
  const std::map<std::string, Item> keys = reader.ReadKeys(top, kTopKeys);
  const auto section = [&keys](const std::string& key) { return keys.find(key); };
  // Entities first: the source names entity types (errors are sorted into
  // file order at the end).
  if (reader.Require(top, keys, "entities")) {
    ReadEntities(reader, section("entities")->second, config);
  }
  if (section("source") != keys.end()) ReadSource(reader, section("source")->second, config);
  if (reader.Require(top, keys, "store")) ReadStore(reader, section("store")->second, config);
  if (section("batch") != keys.end()) ReadBatch(reader, section("batch")->second, config);
  if (section("retention") != keys.end()) {
    ReadRetention(reader, section("retention")->second, config);
  }
  if (section("limits") != keys.end()) ReadLimits(reader, section("limits")->second, config);
  if (section("log") != keys.end()) ReadLog(reader, section("log")->second, config);
  if (reader.Require(top, keys, "projections")) {
    ReadProjections(reader, section("projections")->second, config);
  }
  // Last: the feed is checked against the projections and the source.
  if (section("feed") != keys.end()) ReadFeed(reader, section("feed")->second, config);
}

}  // namespace
}  // namespace config_internal

std::optional<Config> WithModel(const Config& base, const std::string& model_yaml,
                                const std::string& origin, const ConfigSyntax& syntax,
                                std::vector<ConfigError>* errors, bool without_feed) {
  std::vector<ConfigError> local_errors;
  if (errors == nullptr) errors = &local_errors;
  errors->clear();
  std::string text;
  try {
    YAML::Node document = YAML::Load(base.source_text);
    const YAML::Node model = YAML::Load(model_yaml);
    if (!document.IsMap() || !model.IsMap()) {
      errors->push_back(ConfigError{{}, origin, "not a YAML mapping"});
      return std::nullopt;
    }
    for (const char* section : {"entities", "projections"}) {
      document.remove(section);
      if (model[section]) document[section] = model[section];
    }
    if (without_feed) document.remove("feed");
    YAML::Emitter out;
    out << document;
    text = out.c_str();
  } catch (const YAML::Exception& e) {
    errors->push_back(ConfigError{{}, origin, "cannot read: " + e.msg});
    return std::nullopt;
  }
  std::optional<Config> parsed = ParseConfig(text, origin, syntax, errors);
  if (!parsed) return std::nullopt;
  Config config = base;
  if (without_feed) config.feed.reset();
  config.entities = std::move(parsed->entities);
  config.projections = std::move(parsed->projections);
  config.model_yaml = std::move(parsed->model_yaml);
  return config;
}

bool Config::HasEntity(const std::string& type) const {
  return std::find(entities.begin(), entities.end(), type) != entities.end();
}

std::vector<std::string> Config::CollectionNames() const {
  std::vector<std::string> names;
  for (const ProjectionConfig& projection : projections) names.push_back(projection.collection);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

const ProjectionConfig* Config::FindProjection(const std::string& name) const {
  for (const ProjectionConfig& projection : projections) {
    if (projection.name == name) return &projection;
  }
  return nullptr;
}

std::vector<std::string> Config::PublishedCollections() const {
  std::vector<std::string> out;
  if (!feed) return out;
  for (const std::string& collection : CollectionNames()) {
    if (feed->TopicOf(collection) != nullptr) out.push_back(collection);
  }
  return out;
}

bool Config::HasPartitionKey(const std::string& collection) const {
  for (const ProjectionConfig& projection : projections) {
    if (projection.collection == collection && !projection.partition_key.empty()) return true;
  }
  return false;
}

const std::string* FeedConfig::TopicOf(const std::string& collection) const {
  for (const auto& entry : collections) {
    if (entry.first == collection) return &entry.second;
  }
  return topic.empty() ? nullptr : &topic;
}

std::string ConfigError::ToString(const std::string& file) const {
  std::string out = file;
  if (place.line > 0) {
    out += ":" + std::to_string(place.line);
    if (place.column > 0) out += ":" + std::to_string(place.column);
  }
  if (!out.empty()) out += ": ";
  if (!where.empty()) out += where + ": ";
  // The location and the message quote names from the file as written, and
  // YAML's "\0" or "\e" puts any byte into a name.
  return ControlsEscaped(out + message);
}

std::optional<Config> ParseConfig(const std::string& yaml_text, const std::string& file,
                                  const ConfigSyntax& syntax, std::vector<ConfigError>* errors) {
  std::vector<ConfigError> local_errors;
  if (errors == nullptr) errors = &local_errors;
  errors->clear();
  Config config;
  config.path = file;
  try {
    // YAML::Load reads the first document only; SecondDocumentPlace reports
    // any more without LoadAll (see there).
    const YAML::Node document = YAML::Load(yaml_text);
    if (const std::optional<ConfigPlace> second = SecondDocumentPlace(yaml_text)) {
      errors->push_back(
          ConfigError{*second, "", "the file holds several YAML documents; give one"});
    }
    config_internal::ConfigReader reader(syntax, errors);
    config_internal::ReadSections(reader, document, &config);
    config.source_text = yaml_text;
    if (document.IsMap()) {
      YAML::Emitter model;
      model << YAML::BeginMap;
      for (const char* section : {"entities", "projections"}) {
        if (document[section]) model << YAML::Key << section << YAML::Value << document[section];
      }
      model << YAML::EndMap;
      config.model_yaml = model.c_str();
    }
  } catch (const YAML::Exception& e) {
    const ConfigPlace place =
        e.mark.is_null() ? ConfigPlace{} : ConfigPlace{e.mark.line + 1, e.mark.column + 1};
    errors->push_back(ConfigError{place, "", "YAML syntax error: " + e.msg});
  } catch (const std::exception& e) {
    errors->push_back(ConfigError{{}, "", std::string("cannot parse: ") + e.what()});
  }
  if (errors->empty()) return config;
  // File order; errors without a place last. stable_sort keeps the walk's
  // order among errors at one place.
  std::stable_sort(errors->begin(), errors->end(), [](const ConfigError& a, const ConfigError& b) {
    const auto key = [](const ConfigError& e) {
      return std::make_pair(e.place.line > 0 ? e.place.line : INT_MAX, e.place.column);
    };
    return key(a) < key(b);
  });
  return std::nullopt;
}

std::optional<Config> LoadConfig(const std::string& file, const ConfigSyntax& syntax,
                                 std::vector<ConfigError>* errors) {
  std::vector<ConfigError> local_errors;
  if (errors == nullptr) errors = &local_errors;
  errors->clear();
  std::FILE* stream = std::fopen(file.c_str(), "rb");
  std::string text;
  int read_errno = stream ? 0 : errno;
  if (stream) {
    char buffer[65536];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, stream)) > 0) text.append(buffer, n);
    if (std::ferror(stream)) read_errno = errno ? errno : EIO;
    std::fclose(stream);
  }
  if (read_errno != 0) {
    errors->push_back(ConfigError{{}, "", "cannot read the config file: " +
                                              std::string(std::strerror(read_errno))});
    return std::nullopt;
  }
  return ParseConfig(text, file, syntax, errors);
}

}  // namespace denormd
