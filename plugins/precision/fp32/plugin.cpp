// 'fp32' precision recipe: weights fp32, gradients fp32, master weights none,
// optimizer states fp32, activations fp32.
#include <memplan/support/precision_recipe.hpp>

namespace {

struct Fp32Traits {
  static constexpr const char* name = "fp32";
  static constexpr const char* version = "1.2.1";
  static constexpr const char* summary = "Full fp32 training: 4-byte weights, gradients, states and activations";
  static constexpr memplan::support::RecipeDefaults defaults{"fp32", "fp32", "none", "fp32", "fp32"};
};

}  // namespace

using Fp32Precision = memplan::support::PrecisionRecipe<Fp32Traits>;
MEMPLAN_PLUGIN(Fp32Precision)
