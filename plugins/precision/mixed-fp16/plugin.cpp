// 'mixed-fp16' precision recipe: weights fp16, gradients fp16, master weights fp32,
// optimizer states fp32, activations fp16.
#include <memplan/support/precision_recipe.hpp>

namespace {

struct MixedFp16Traits {
  static constexpr const char* name = "mixed-fp16";
  static constexpr const char* version = "1.2.1";
  static constexpr const char* summary = "Mixed precision (Micikevicius et al. 2017): fp16 weights and gradients, fp32 master weights and states";
  static constexpr memplan::support::RecipeDefaults defaults{"fp16", "fp16", "fp32", "fp32", "fp16"};
};

}  // namespace

using MixedFp16Precision = memplan::support::PrecisionRecipe<MixedFp16Traits>;
MEMPLAN_PLUGIN(MixedFp16Precision)
