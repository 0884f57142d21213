// 'mixed-bf16' precision recipe: weights bf16, gradients bf16, master weights fp32,
// optimizer states fp32, activations bf16.
#include <memplan/support/precision_recipe.hpp>

namespace {

struct MixedBf16Traits {
  static constexpr const char* name = "mixed-bf16";
  static constexpr const char* version = "1.2.1";
  static constexpr const char* summary = "Mixed precision with bf16: bf16 weights and gradients, fp32 master weights and states";
  static constexpr memplan::support::RecipeDefaults defaults{"bf16", "bf16", "fp32", "fp32", "bf16"};
};

}  // namespace

using MixedBf16Precision = memplan::support::PrecisionRecipe<MixedBf16Traits>;
MEMPLAN_PLUGIN(MixedBf16Precision)
