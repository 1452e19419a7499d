// The input formats denormd knows (formats/input_format.h), and the config
// loaders that use them with the derivation kinds.
#ifndef DENORMD_FORMATS_FORMAT_REGISTRY_H_
#define DENORMD_FORMATS_FORMAT_REGISTRY_H_

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "formats/input_format.h"

namespace denormd {

// Every format, in the order messages name them; the first (native) is the
// default (format_registry.cc lists them).
const std::vector<const InputFormat*>& BuiltinInputFormats();
// The built-in derivation kinds (projections/derivations/registry.h) and
// input formats, as config/ parses with them.
const ConfigSyntax& BuiltinConfigSyntax();

// The format `input` was parsed with; the default when it has none (a
// hand-made Config). Every format of the ConfigSyntax a Config is parsed
// with must be an InputFormat, as BuiltinConfigSyntax()'s are.
const InputFormat& FormatOf(const TopicInput& input);

// LoadConfig / ParseConfig / WithModel (config/config.h) with
// BuiltinConfigSyntax().
std::optional<Config> LoadConfig(const std::string& file, std::vector<ConfigError>* errors);
std::optional<Config> ParseConfig(const std::string& yaml_text, const std::string& file,
                                  std::vector<ConfigError>* errors);
std::optional<Config> WithModel(const Config& base, const std::string& model_yaml,
                                const std::string& origin, std::vector<ConfigError>* errors,
                                bool without_feed = false);

}  // namespace denormd

#endif  // DENORMD_FORMATS_FORMAT_REGISTRY_H_
