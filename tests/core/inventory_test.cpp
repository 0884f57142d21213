// Parameter inventory: the architecture -> parameter groups. Totals are the
// published counts (Hugging Face transformers' num_parameters() for the
// Llama 2 and Mixtral checkpoints), stored with each preset.
#include <gtest/gtest.h>

#include "memplan/core/model.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

double preset_params(const char* name) {
  const ModelPreset* preset = catalog().find_model(name);
  EXPECT_NE(preset, nullptr) << name;
  return preset ? count_parameters(parameter_inventory(preset->spec)) : 0;
}

TEST(Inventory, LlamaTwoSevenBillion) { EXPECT_EQ(preset_params("llama-2-7b"), 6'738'415'616.0); }
TEST(Inventory, LlamaTwoThirteenBillion) { EXPECT_EQ(preset_params("llama-2-13b"), 13'015'864'320.0); }
// Grouped-query attention: k and v are 8 heads x 128 wide.
TEST(Inventory, LlamaTwoSeventyBillionWithGroupedQueryAttention) {
  EXPECT_EQ(preset_params("llama-2-70b"), 68'976'648'192.0);
}
// 8 SwiGLU experts of 3 x 4096 x 14336 per layer, router 4096 x 8.
TEST(Inventory, MixtralEightBySevenBillion) { EXPECT_EQ(preset_params("mixtral-8x7b"), 46'702'792'704.0); }

TEST(Inventory, PresetsMatchTheirPublishedTotals) {
  for (const ModelPreset& preset : catalog().models()) {
    SCOPED_TRACE(preset.name);
    const double counted = count_parameters(parameter_inventory(preset.spec));
    // Exact counts are published for checkpoints; papers round (22B, 175B): 1%.
    EXPECT_NEAR(counted, preset.published_params, preset.published_params * 0.01);
  }
}

// GPT-3 175B, hand count: per layer 12h^2 + 13h (qkv 3h^2+3h, out h^2+h,
// MLP 8h^2+5h, two LayerNorms 4h); embeddings 51200h + 2048h; final LayerNorm 2h;
// the output layer is tied to the embedding.
TEST(Inventory, GptThreeHandCount) {
  const double h = 12288;
  const double expected = 96 * (12 * h * h + 13 * h) + 51200 * h + 2048 * h + 2 * h;
  EXPECT_EQ(preset_params("gpt3-175b"), expected);
}

TEST(Inventory, TiedEmbeddingsHaveNoLmHead) {
  ModelSpec spec = catalog().find_model("llama-2-7b")->spec;
  const double untied = count_parameters(parameter_inventory(spec));
  spec.tied_embeddings = true;
  EXPECT_EQ(untied - count_parameters(parameter_inventory(spec)), 32000.0 * 4096);
}

TEST(Inventory, IdenticalLayersAreOneItemWithACount) {
  const std::vector<PlanItem> items = parameter_inventory(catalog().find_model("llama-2-70b")->spec);
  for (const PlanItem& item : items)
    if (item.layer >= 0) {
      EXPECT_EQ(item.count, 80u) << item.name_view();
    }
  EXPECT_LE(items.size(), 12u);
}

TEST(Inventory, ParamsOnlyModelIsOneItem) {
  ModelSpec spec;
  spec.params_only = 7.5e9;
  const std::vector<PlanItem> items = parameter_inventory(spec);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].elements, 7.5e9);
  EXPECT_TRUE(items[0].flags & MEMPLAN_ITEM_TRAINABLE);
}

}  // namespace
}  // namespace memplan::testing
