#include "projections/derivations/registry.h"

namespace denormd {

// One line per kind: its file under projections/derivations/ defines it.
const DerivationKind& CountKind();
const DerivationKind& IdsKind();
const DerivationKind& EmbedKind();
const DerivationKind& LookupKind();

const std::vector<const DerivationKind*>& BuiltinDerivationKinds() {
  static const std::vector<const DerivationKind*> kinds = {
      &CountKind(), &IdsKind(), &EmbedKind(), &LookupKind(),
  };
  return kinds;
}

const DerivationSyntaxes& BuiltinDerivations() {
  static const DerivationSyntaxes syntaxes(BuiltinDerivationKinds().begin(),
                                           BuiltinDerivationKinds().end());
  return syntaxes;
}

const DerivationKind* FindDerivationKind(const std::string& name) {
  for (const DerivationKind* kind : BuiltinDerivationKinds()) {
    if (kind->name() == name) return kind;
  }
  return nullptr;
}

std::string JoinWords(std::initializer_list<std::string> words) {
  std::string out;
  for (const std::string& word : words) {
    if (!word.empty()) out += (out.empty() ? "" : " ") + word;
  }
  return out;
}

bool ReadLimit(ExpressionReader& reader, std::optional<uint64_t>* out) {
  if (!reader.Has("limit")) return true;
  uint64_t limit = 0;
  if (!reader.ReadUint("limit", 1, &limit)) return false;
  *out = limit;
  return true;
}

}  // namespace denormd
