// The derivation kinds the engine knows. The config loaders that use them
// (with the input formats) are in formats/format_registry.h.
#ifndef DENORMD_PROJECTIONS_DERIVATIONS_REGISTRY_H_
#define DENORMD_PROJECTIONS_DERIVATIONS_REGISTRY_H_

#include <cstdint>
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

// `limit` (the first N members), when the map has it: an integer >= 1, into
// *out; *out unchanged when the map has none. False after reporting.
bool ReadLimit(ExpressionReader& reader, std::optional<uint64_t>* out);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_DERIVATIONS_REGISTRY_H_
