#include "formats/format_registry.h"

#include "projections/derivations/registry.h"

namespace denormd {

// One line per format: its file under formats/ defines it.
const InputFormat& NativeFormat();
const InputFormat& DebeziumFormat();

const std::vector<const InputFormat*>& BuiltinInputFormats() {
  static const std::vector<const InputFormat*> formats = {
      &NativeFormat(), &DebeziumFormat(),
  };
  return formats;
}

const ConfigSyntax& BuiltinConfigSyntax() {
  static const ConfigSyntax syntax{
      BuiltinDerivations(),
      InputFormatSyntaxes(BuiltinInputFormats().begin(), BuiltinInputFormats().end())};
  return syntax;
}

const InputFormat& FormatOf(const TopicInput& input) {
  if (input.format == nullptr) return *BuiltinInputFormats().front();
  return static_cast<const InputFormat&>(*input.format);
}

std::optional<Config> LoadConfig(const std::string& file, std::vector<ConfigError>* errors) {
  return LoadConfig(file, BuiltinConfigSyntax(), errors);
}

std::optional<Config> ParseConfig(const std::string& yaml_text, const std::string& file,
                                  std::vector<ConfigError>* errors) {
  return ParseConfig(yaml_text, file, BuiltinConfigSyntax(), errors);
}

std::optional<Config> WithModel(const Config& base, const std::string& model_yaml,
                                const std::string& origin, std::vector<ConfigError>* errors,
                                bool without_feed) {
  return WithModel(base, model_yaml, origin, BuiltinConfigSyntax(), errors, without_feed);
}

}  // namespace denormd
