// Scalar fields: a path ("images[].thumbnail"), a "{template}" string, or
// {value: literal}. They read only their root entity, so they depend on no
// other entity and read nothing from the store. (Their syntax is part of
// config/, because select maps use it too.)
#include "projections/derivations/registry.h"
#include "projections/selection.h"

namespace denormd {

namespace {

class ScalarDerivation : public Derivation {
 public:
  explicit ScalarDerivation(const Expression& expression) : expression_(expression) {}

  bool Render(const EntityRecord& root, const DerivationReads* /*reads*/, JsonValue* out,
              JsonAllocator& allocator) const override {
    return EvalScalar(expression_, root.key.id, *root.data, out, allocator);
  }

  // A scalar reads only its root: its definition is its rendering.
  bool Define(const EntityRecord& root, SourceView& /*source*/, JsonValue* out,
              JsonAllocator& allocator) const override {
    return Render(root, nullptr, out, allocator);
  }

 private:
  const Expression& expression_;
};

}  // namespace

std::unique_ptr<Derivation> ScalarField(const Expression& expression) {
  return std::make_unique<ScalarDerivation>(expression);
}

}  // namespace denormd
