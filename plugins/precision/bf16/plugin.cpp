// 'bf16' precision recipe: weights bf16, gradients bf16, master weights none,
// optimizer states bf16, activations bf16.
#include <memplan/support/precision_recipe.hpp>

namespace {

struct Bf16Traits {
  static constexpr const char* name = "bf16";
  static constexpr const char* version = "1.2.1";
  static constexpr const char* summary = "Pure bf16: weights, gradients and optimizer states in bf16, no master copy";
  static constexpr memplan::support::RecipeDefaults defaults{"bf16", "bf16", "none", "bf16", "bf16"};
};

}  // namespace

using Bf16Precision = memplan::support::PrecisionRecipe<Bf16Traits>;
MEMPLAN_PLUGIN(Bf16Precision)
