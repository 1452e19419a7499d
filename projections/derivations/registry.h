// The derivation kinds the engine knows, and the config loaders that use
// them.
#ifndef DENORMD_PROJECTIONS_DERIVATIONS_REGISTRY_H_
#define DENORMD_PROJECTIONS_DERIVATIONS_REGISTRY_H_

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "projections/derivation.h"

namespace denormd {

// Every kind, in the order `check` names them (registry.cc lists them).
const std::vector<const DerivationKind*>& BuiltinDerivationKinds();
// The same, as the syntax config/ parses with.
const DerivationSyntaxes& BuiltinDerivations();
// The kind named `name`; null when there is none.
const DerivationKind* FindDerivationKind(const std::string& name);

// The Derivation of a scalar field (a path, a "{template}" or {value: ...}).
std::unique_ptr<Derivation> ScalarField(const Expression& expression);

// The words given, without the empty ones, joined by spaces: how the kinds
// build DerivationSpec::Normalized().
std::string JoinWords(std::initializer_list<std::string> words);

// LoadConfig / ParseConfig / WithModel (config/config.h) with the built-in
// kinds.
std::optional<Config> LoadConfig(const std::string& file, std::vector<ConfigError>* errors);
std::optional<Config> ParseConfig(const std::string& yaml_text, const std::string& file,
                                  std::vector<ConfigError>* errors);
std::optional<Config> WithModel(const Config& base, const std::string& model_yaml,
                                const std::string& origin, std::vector<ConfigError>* errors,
                                bool without_feed = false);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_DERIVATIONS_REGISTRY_H_
