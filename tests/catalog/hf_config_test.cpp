// [model] hf_config = "path/config.json" (issue 3): a Hugging Face config
// gives the same model as the matching preset, so the same estimate, for
// every family memplan reads (llama, mistral, mixtral, qwen2, gpt2, bert); and
// every way a config can be wrong is an error naming the file, the field and
// the fix. The fixtures are written from the public config.json files
// (tests/catalog/fixtures/README.md).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "memplan/core/model.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string fixtures() { return source_dir() + "/tests/catalog/fixtures"; }

std::string replaced(std::string text, std::string_view from, std::string_view to) {
  const size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("no '" + std::string(from) + "' in the text");
  return text.replace(at, from.size(), to);
}

// Training (ZeRO-3 over 8 GPUs, Korthikanti activations) and serving (KV cache
// and forward transients): between them they read every model field plugins
// see.
constexpr std::string_view kTrain = R"(mode = "train"
[model]
MODEL
[batch]
micro_batch = 2
seq_len = 512
grad_accum = 4
[precision]
use = "mixed-bf16"
[optimizer]
use = "adamw"
[activations]
use = "megatron"
flash_attention = true
[[strategy]]
use = "data-parallel"
size = 8
[[strategy]]
use = "zero"
stage = 3
[[strategy]]
use = "recompute"
policy = "selective"
[hardware]
gpu = "h100-sxm-80gb"
)";

constexpr std::string_view kInfer = R"(mode = "infer"
[model]
MODEL
[batch]
micro_batch = 8
seq_len = 512
[precision]
use = "bf16"
[activations]
use = "inference"
[hardware]
gpu = "h100-sxm-80gb"
)";

void expect_same_model(const ModelSpec& a, const ModelSpec& b) {
  const memplan_model x = to_abi_model(a, 0), y = to_abi_model(b, 0);
  EXPECT_EQ(x.has_architecture, y.has_architecture);
  EXPECT_EQ(x.layers, y.layers);
  EXPECT_EQ(x.hidden, y.hidden);
  EXPECT_EQ(x.heads, y.heads);
  EXPECT_EQ(x.kv_heads, y.kv_heads);
  EXPECT_EQ(x.head_dim, y.head_dim);
  EXPECT_EQ(x.ffn_hidden, y.ffn_hidden);
  EXPECT_EQ(x.vocab, y.vocab);
  EXPECT_EQ(x.gated_mlp, y.gated_mlp);
  EXPECT_EQ(x.tied_embeddings, y.tied_embeddings);
  EXPECT_EQ(x.experts, y.experts);
  EXPECT_EQ(x.experts_top_k, y.experts_top_k);
  EXPECT_EQ(x.expert_ffn_hidden, y.expert_ffn_hidden);
  EXPECT_EQ(x.sliding_window, y.sliding_window);
  EXPECT_EQ(x.global_attention_every, y.global_attention_every);
  EXPECT_EQ(x.max_context, y.max_context);
  EXPECT_EQ(x.layer_norm, y.layer_norm);
  EXPECT_EQ(x.layer_norms, y.layer_norms);
  EXPECT_EQ(x.attn_logit_softcapping, y.attn_logit_softcapping);
  EXPECT_EQ(x.final_logit_softcapping, y.final_logit_softcapping);
  EXPECT_EQ(x.norm_scale_fp32, y.norm_scale_fp32);
}

void expect_same_estimate(const Evaluation& a, const Evaluation& b) {
  EXPECT_EQ(a.breakdown().params_total, b.breakdown().params_total);
  EXPECT_EQ(a.breakdown().params_trainable, b.breakdown().params_trainable);
  EXPECT_EQ(a.breakdown().components, b.breakdown().components);
  EXPECT_EQ(a.breakdown().timeline, b.breakdown().timeline);
  EXPECT_EQ(a.breakdown().sum, b.breakdown().sum);
  EXPECT_EQ(a.breakdown().peak, b.breakdown().peak);
  EXPECT_EQ(a.breakdown().peak_phase, b.breakdown().peak_phase);
  const auto& x = a.estimator().plan().items;
  const auto& y = b.estimator().plan().items;
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(Estimator::display_name(x[i]), Estimator::display_name(y[i]));
    EXPECT_EQ(x[i].role, y[i].role);
    EXPECT_EQ(x[i].device, y[i].device);
    EXPECT_EQ(x[i].bytes(), y[i].bytes()) << Estimator::display_name(x[i]);
  }
}

struct Family {
  const char* preset;  // also the fixture folder
  double params;       // transformers' num_parameters()
};

void PrintTo(const Family& family, std::ostream* out) { *out << family.preset; }

class SameAsPreset : public ::testing::TestWithParam<Family> {};

TEST_P(SameAsPreset, TrainingAndServing) {
  const Family family = GetParam();
  const std::string scenario = fixtures() + "/scenario.toml";  // hf_config is relative to its folder
  const std::string from_preset = "preset = \"" + std::string(family.preset) + "\"";
  const std::string from_config = "hf_config = \"" + std::string(family.preset) + "/config.json\"";
  for (std::string_view base : {kTrain, kInfer}) {
    SCOPED_TRACE(base == kTrain ? "train" : "infer");
    const Evaluation preset = evaluate(replaced(std::string(base), "MODEL", from_preset), scenario);
    const Evaluation config = evaluate(replaced(std::string(base), "MODEL", from_config), scenario);
    EXPECT_EQ(config.breakdown().params_total, family.params);
    EXPECT_EQ(config.breakdown().params_trainable, base == kTrain ? family.params : 0.0);
    expect_same_estimate(preset, config);
    expect_same_model(preset.estimator().scenario().model, config.estimator().scenario().model);
    EXPECT_EQ(config.estimator().scenario().model.hf_config, fixtures() + "/" + family.preset + "/config.json");
    EXPECT_EQ(config.estimator().scenario().model.preset, "");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Families, SameAsPreset,
    ::testing::Values(Family{"llama-2-7b", 6'738'415'616.0}, Family{"llama-2-13b", 13'015'864'320.0},
                      Family{"llama-2-70b", 68'976'648'192.0}, Family{"llama-3.1-8b", 8'030'261'248.0},
                      Family{"llama-3.1-70b", 70'553'706'496.0}, Family{"llama-3.1-405b", 405'853'388'800.0},
                      Family{"llama-3.2-1b", 1'235'814'400.0}, Family{"llama-3.2-3b", 3'212'749'824.0},
                      Family{"mistral-7b", 7'241'732'096.0}, Family{"mixtral-8x7b", 46'702'792'704.0},
                      Family{"mixtral-8x22b", 140'630'071'296.0}, Family{"qwen2-0.5b", 494'032'768.0},
                      Family{"qwen2-7b", 7'615'616'512.0}, Family{"qwen2-72b", 72'706'203'648.0},
                      Family{"gpt2-xl", 1'557'611'200.0}, Family{"bert-large-uncased", 335'141'888.0},
                      Family{"qwen3-4b", 4'022'468'096.0}, Family{"qwen3-30b-a3b", 30'532'122'624.0},
                      Family{"qwen1.5-moe-a2.7b", 14'315'784'192.0}, Family{"phi-3-mini-4k", 3'821'079'552.0},
                      // Hand counts in the preset files and in the tests below.
                      Family{"gemma-2-9b", 9'241'705'984.0}, Family{"gemma-2-27b", 27'227'128'320.0},
                      Family{"olmo-2-7b", 7'298'617'344.0}, Family{"mistral-nemo-12b", 12'247'782'400.0},
                      Family{"mistral-small-24b", 23'572'403'200.0}, Family{"phi-4", 14'659'507'200.0},
                      Family{"qwen2.5-7b", 7'615'616'512.0}, Family{"qwen2.5-72b-instruct", 72'706'203'648.0},
                      Family{"gpt-oss-20b", 20'914'757'184.0}, Family{"gpt-oss-120b", 116'829'156'672.0},
                      // Latent attention (latent_attention_test.cpp has the hand counts).
                      Family{"deepseek-v2-lite", 15'706'484'224.0}, Family{"deepseek-v3", 671'026'419'200.0},
                      Family{"qwen3-0.6b", 596'049'920.0}, Family{"qwen3-8b", 8'190'735'360.0},
                      Family{"qwen3-32b", 32'762'123'264.0}, Family{"qwen3-235b-a22b", 235'093'634'560.0},
                      Family{"phi-3.5-mini", 3'821'079'552.0},
                      Family{"llama-4-scout-17b-16e", 107'769'861'120.0},
                      // OPT (hand counts in the preset files; HfConfig.OptThreeFiftyM derives 350m's).
                      Family{"opt-125m", 125'239'296.0}, Family{"opt-350m", 331'196'416.0},
                      Family{"opt-1.3b", 1'315'758'080.0}, Family{"opt-6.7b", 6'658'473'984.0},
                      Family{"opt-13b", 12'853'473'280.0}, Family{"opt-66b", 65'719'701'504.0}),
    [](const ::testing::TestParamInfo<Family>& info) {
      std::string name = info.param.preset;
      for (char& c : name)
        if (c == '-' || c == '.') c = '_';
      return name;
    });

// The fields that differ between families, read from the fixtures.
TEST(HfConfig, FamilyFields) {
  const std::string scenario = fixtures() + "/scenario.toml";
  auto model = [&](const char* folder) {
    return evaluate(replaced(std::string(kInfer), "MODEL", "hf_config = \"" + std::string(folder) + "/config.json\""),
                    scenario)
        .estimator()
        .scenario()
        .model;
  };
  const ModelSpec mistral = model("mistral-7b");
  EXPECT_EQ(mistral.sliding_window, 4096);
  EXPECT_EQ(mistral.max_context, 32768);
  const ModelSpec mixtral = model("mixtral-8x22b");
  EXPECT_EQ(mixtral.sliding_window, 0);  // null
  EXPECT_EQ(mixtral.experts, 8);
  EXPECT_EQ(mixtral.experts_top_k, 2);
  EXPECT_EQ(mixtral.expert_ffn_hidden, 16384);
  EXPECT_EQ(mixtral.ffn_hidden, 0);
  const ModelSpec qwen = model("qwen2-7b");
  EXPECT_TRUE(qwen.qkv_bias);
  EXPECT_FALSE(qwen.output_bias);
  EXPECT_EQ(qwen.sliding_window, 0);  // use_sliding_window false
  const ModelSpec llama = model("llama-3.2-3b");
  EXPECT_EQ(llama.head_dim, 128);
  EXPECT_TRUE(llama.tied_embeddings);
  const ModelSpec gpt2 = model("gpt2-xl");
  EXPECT_EQ(gpt2.ffn_hidden, 6400);  // n_inner null: 4 x n_embd
  EXPECT_EQ(gpt2.position_embeddings, 1024);
  EXPECT_TRUE(gpt2.tied_embeddings);
  EXPECT_EQ(gpt2.norm, NormKind::layernorm);
  EXPECT_EQ(gpt2.activation, MlpActivation::gelu_new);  // activation_function "gelu_new"
  const ModelSpec bert = model("bert-large-uncased");
  EXPECT_EQ(bert.type_vocab, 2);
  EXPECT_TRUE(bert.embedding_norm);
  EXPECT_FALSE(bert.final_norm);
  EXPECT_TRUE(bert.pooler);
  EXPECT_EQ(bert.output_head, OutputHead::none);
}

// A config written to a temporary folder, with `edit` applied to the
// Llama 2 7B fixture's text, loaded through a scenario beside it.
class ConfigFile {
 public:
  explicit ConfigFile(const std::string& text) : path_(dir_.write("config.json", text)) {}
  const std::string& path() const { return path_; }
  std::string scenario() const { return dir_.path() + "/s.toml"; }
  std::string error(std::string_view base = kInfer, std::string_view extra = "") const {
    return error_of(replaced(std::string(base), "MODEL", "hf_config = \"config.json\"" + std::string(extra)),
                    scenario());
  }
  Evaluation evaluation(std::string_view extra = "") const {
    return evaluate(replaced(std::string(kInfer), "MODEL", "hf_config = \"config.json\"" + std::string(extra)),
                    scenario());
  }

 private:
  TempDir dir_;
  std::string path_;
};

std::string fixture_text(const std::string& folder) {
  std::ifstream in(fixtures() + "/" + folder + "/config.json");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Issue 12: today's families, read from real config.json files
// (tests/catalog/fixtures/README.md gives each source), each against its
// published parameter total or a hand count from the config written here.
ModelSpec fixture_model(const char* folder) {
  return evaluate(replaced(std::string(kInfer), "MODEL", "hf_config = \"" + std::string(folder) + "/config.json\""),
                  fixtures() + "/scenario.toml")
      .estimator()
      .scenario()
      .model;
}

double fixture_total(const char* folder) {
  return evaluate(replaced(std::string(kTrain), "MODEL", "hf_config = \"" + std::string(folder) + "/config.json\""),
                  fixtures() + "/scenario.toml")
      .breakdown()
      .params_total;
}

TEST(HfConfig, Qwen3) {
  // Qwen/Qwen3-4B: h 2560, 36 layers, 32 q heads and 8 kv heads of 128, MLP
  // 9728, vocabulary 151,936, tied. Per layer: q 2560 x 4096 = 10,485,760,
  // k and v 2560 x 1024 = 2,621,440 each, o 10,485,760, q_norm + k_norm
  // 2 x 128 = 256, MLP 3 x 2560 x 9728 = 74,711,040, norms 2 x 2560 = 5,120:
  // 100,930,816; x 36 = 3,633,509,376; + embedding 151,936 x 2560 =
  // 388,956,160 + final norm 2,560 = 4,022,468,096 (the model card: 4.0B).
  EXPECT_EQ(fixture_total("qwen3-4b"), 4'022'468'096.0);
  const ModelSpec qwen3 = fixture_model("qwen3-4b");
  EXPECT_EQ(qwen3.qk_norm, QkNorm::head);
  EXPECT_EQ(qwen3.head_dim, 128);
  EXPECT_FALSE(qwen3.qkv_bias);
  EXPECT_TRUE(qwen3.tied_embeddings);
  EXPECT_EQ(qwen3.max_context, 40960);
}

TEST(HfConfig, Qwen3Moe) {
  // Qwen/Qwen3-30B-A3B: h 2048, 48 layers, 32 q heads and 4 kv heads of 128,
  // 128 experts of 768 (top 8), vocabulary 151,936, untied. Per layer: q
  // 2048 x 4096 = 8,388,608, k and v 2048 x 512 = 1,048,576 each, o
  // 8,388,608, q/k norms 256, router 2048 x 128 = 262,144, experts 128 x 3 x
  // 2048 x 768 = 603,979,776, norms 4,096: 623,120,640; x 48 =
  // 29,909,790,720; + embedding and head 2 x 151,936 x 2048 = 622,329,856 +
  // final norm 2,048 = 30,532,122,624 (the model card: 30.5B).
  EXPECT_EQ(fixture_total("qwen3-30b-a3b"), 30'532'122'624.0);
  const ModelSpec moe = fixture_model("qwen3-30b-a3b");
  EXPECT_EQ(moe.experts, 128);
  EXPECT_EQ(moe.experts_top_k, 8);
  EXPECT_EQ(moe.expert_ffn_hidden, 768);  // moe_intermediate_size, not intermediate_size (6144)
  EXPECT_EQ(moe.ffn_hidden, 0);
  EXPECT_EQ(moe.shared_expert_ffn_hidden, 0);
  EXPECT_EQ(moe.qk_norm, QkNorm::head);
}

TEST(HfConfig, Qwen2MoeSharedExpert) {
  // Qwen/Qwen1.5-MoE-A2.7B: h 2048, 24 layers, 16 heads of 128, 60 experts of
  // 1408 (top 4), a shared expert of 5632 with a sigmoid gate, vocabulary
  // 151,936, untied. Per layer: q, k, v, o 4 x 2048^2 = 16,777,216 + q, k, v
  // biases 3 x 2048 = 6,144, router 2048 x 60 = 122,880, experts 60 x 3 x
  // 2048 x 1408 = 519,045,120, shared expert 3 x 2048 x 5632 = 34,603,008,
  // its gate 2,048, norms 4,096: 570,560,512; x 24 = 13,693,452,288; +
  // embedding and head 2 x 151,936 x 2048 = 622,329,856 + final norm 2,048 =
  // 14,315,784,192 (the model card: 14.3B in total, 2.7B activated).
  EXPECT_EQ(fixture_total("qwen1.5-moe-a2.7b"), 14'315'784'192.0);
  const ModelSpec moe = fixture_model("qwen1.5-moe-a2.7b");
  EXPECT_EQ(moe.experts, 60);
  EXPECT_EQ(moe.experts_top_k, 4);
  EXPECT_EQ(moe.expert_ffn_hidden, 1408);
  EXPECT_EQ(moe.shared_expert_ffn_hidden, 5632);
  EXPECT_TRUE(moe.shared_expert_gate);
  EXPECT_TRUE(moe.qkv_bias);
  EXPECT_FALSE(moe.output_bias);
}

TEST(HfConfig, Phi3FusedProjections) {
  // microsoft/Phi-3-mini-4k-instruct: qkv_proj (3072 -> 3 x 3072) and
  // gate_up_proj (3072 -> 2 x 8192) hold the weights of separate q, k, v and
  // gate, up projections. Per layer: attention 4 x 3072^2 = 37,748,736, MLP
  // 3 x 3072 x 8192 = 75,497,472, norms 6,144: 113,252,352; x 32 =
  // 3,624,075,264; + embedding and head 2 x 32,064 x 3072 = 197,001,216 +
  // final norm 3,072 = 3,821,079,552 (the count keras-hub publishes for it).
  EXPECT_EQ(fixture_total("phi-3-mini-4k"), 3'821'079'552.0);
  const ModelSpec phi = fixture_model("phi-3-mini-4k");
  EXPECT_EQ(phi.sliding_window, 2047);
  EXPECT_FALSE(phi.tied_embeddings);
}

TEST(HfConfig, Gemma3MultimodalReadsTextConfig) {
  // google/gemma-3-12b-it's text_config (the vision tower is not counted):
  // h 3840, 48 layers, 16 q heads and 8 kv heads of 256, MLP 15360,
  // vocabulary 262,208, tied. Per layer: q 3840 x 4096 = 15,728,640, k and v
  // 3840 x 2048 = 7,864,320 each, o 15,728,640, q/k norms 2 x 256 = 512, MLP
  // 3 x 3840 x 15360 = 176,947,200, 4 norms 4 x 3840 = 15,360: 224,148,992;
  // x 48 = 10,759,151,616; + embedding 262,208 x 3840 = 1,006,878,720 + final
  // norm 3,840 = 11,766,034,176 (hand count; the published 12.2B adds the
  // SigLIP vision tower and the projector).
  const std::string scenario = fixtures() + "/scenario.toml";
  const Evaluation gemma =
      evaluate(replaced(std::string(kTrain), "MODEL", "hf_config = \"gemma-3-12b/config.json\""), scenario);
  EXPECT_EQ(gemma.breakdown().params_total, 11'766'034'176.0);
  const ModelSpec model = gemma.estimator().scenario().model;
  EXPECT_EQ(model.layer_norms, 4);
  EXPECT_EQ(model.qk_norm, QkNorm::head);
  EXPECT_TRUE(model.tied_embeddings);
  EXPECT_EQ(model.sliding_window, 1024);
  EXPECT_EQ(model.global_attention_every, 6);
  // The report warns that the vision tower is left out.
  const auto& warnings = gemma.estimator().scenario().warnings;
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("vision tower"), std::string::npos) << warnings[0];
  // The text model alone (model_type gemma3_text) is the same model, without the warning.
  std::string text = fixture_text("gemma-3-12b");
  const size_t open = text.find("\"text_config\": {") + std::string("\"text_config\": ").size();
  const size_t close = text.find('}', text.find("\"vocab_size\"", open));
  const ConfigFile alone(text.substr(open, close - open + 1));
  const Evaluation text_only = alone.evaluation();
  EXPECT_EQ(text_only.breakdown().params_total, 11'766'034'176.0);
  EXPECT_TRUE(text_only.estimator().scenario().warnings.empty());
}

// The published totals below are rounded (the model card or the Hugging Face
// page's size): the hand count must round to them, within half a unit of the
// last digit given.
void expect_rounds_to(double count, double published, double unit) {
  EXPECT_NEAR(count, published, unit / 2) << "published " << published;
}

TEST(HfConfig, Gemma) {
  // google/gemma-2b (GemmaForCausalLM): h 2048, 18 layers, 8 q heads and 1 kv
  // head of 256 (multi-query), gated GELU MLP 16384, vocabulary 256,000, tied,
  // 2 norms per layer. Per layer: q 2048 x 2048 = 4,194,304, k and v 2048 x
  // 256 = 524,288 each, o 4,194,304, MLP 3 x 2048 x 16384 = 100,663,296, norms
  // 4,096: 110,104,576; x 18 = 1,981,882,368; + final norm 2,048 =
  // 1,981,884,416 (the Gemma report's non-embedding count, Table 2); +
  // embedding 256,000 x 2048 = 524,288,000 = 2,506,172,416 (2.51B).
  EXPECT_EQ(fixture_total("gemma-2b"), 2'506'172'416.0);
  // The report's embedding count, 524,550,144, is of 256,128 rows; the
  // checkpoint has 256,000: 256,000 x 2048 + 1,981,884,416.
  EXPECT_EQ(fixture_total("gemma-2b"), 256'000.0 * 2048 + 1'981'884'416.0);
  expect_rounds_to(2'506'172'416.0, 2.51e9, 0.01e9);
  const ModelSpec gemma = fixture_model("gemma-2b");
  EXPECT_EQ(gemma.kv_heads, 1);
  EXPECT_EQ(gemma.head_dim, 256);
  EXPECT_EQ(gemma.mlp, MlpKind::swiglu);  // gate_proj, up_proj, down_proj
  EXPECT_TRUE(gemma.tied_embeddings);     // absent: GemmaConfig's true
  EXPECT_EQ(gemma.layer_norms, 2);
  EXPECT_EQ(gemma.qk_norm, QkNorm::none);
  EXPECT_EQ(gemma.sliding_window, 0);
  EXPECT_EQ(gemma.max_context, 8192);
  // head_dim absent: GemmaConfig's 256, not hidden / heads.
  EXPECT_EQ(ConfigFile(replaced(fixture_text("gemma-2b"), "\"head_dim\": 256,", "")).evaluation().breakdown()
                .params_total,
            2'506'172'416.0);
}

TEST(HfConfig, Gemma2) {
  // Hand counts beside gemma-2-9b.toml and gemma-2-27b.toml, equal to the
  // Gemma 2 report's embedding and non-embedding parameters (arXiv
  // 2408.00118, Table 2: 9B 917,504,000 + 8,324,201,984, 27B 1,179,648,000 +
  // 26,047,480,320); the Hugging Face pages give 9.24B and 27.2B.
  EXPECT_EQ(fixture_total("gemma-2-9b"), 917'504'000.0 + 8'324'201'984.0);
  EXPECT_EQ(fixture_total("gemma-2-27b"), 1'179'648'000.0 + 26'047'480'320.0);
  expect_rounds_to(fixture_total("gemma-2-9b"), 9.24e9, 0.01e9);
  expect_rounds_to(fixture_total("gemma-2-27b"), 27.2e9, 0.1e9);
  const ModelSpec gemma = fixture_model("gemma-2-27b");
  EXPECT_EQ(gemma.head_dim, 128);  // not 4608 / 32 = 144
  EXPECT_EQ(gemma.layer_norms, 4);
  EXPECT_TRUE(gemma.tied_embeddings);
  // Gemma2DecoderLayer: is_sliding = not bool(layer_idx % 2): layers 0, 2, 4,
  // ... windowed, 1, 3, 5, ... global = (i + 1) % 2 == 0.
  EXPECT_EQ(gemma.sliding_window, 4096);
  EXPECT_EQ(gemma.global_attention_every, 2);
  // Four norms: the 27B with Gemma's two would have 46 x 2 x 4608 fewer.
  ModelSpec two = gemma;
  two.layer_norms = 2;
  EXPECT_EQ(27'227'128'320.0 - count_parameters(parameter_inventory(two)), 46 * 2 * 4608.0);

  const std::string text = fixture_text("gemma-2-9b");
  // sliding_window absent: Gemma2Config's 4096; null: every layer global.
  EXPECT_EQ(ConfigFile(replaced(text, "\"sliding_window\": 4096,", "")).evaluation().estimator().scenario()
                .model.sliding_window,
            4096);
  const ModelSpec global = ConfigFile(replaced(text, "\"sliding_window\": 4096,", "\"sliding_window\": null,"))
                               .evaluation()
                               .estimator()
                               .scenario()
                               .model;
  EXPECT_EQ(global.sliding_window, 0);
  EXPECT_EQ(global.global_attention_every, 0);
  // Soft-capping: the config's 50.0 and 30.0; absent, Gemma2Config's defaults (the same); null, none.
  EXPECT_EQ(gemma.attn_logit_softcapping, 50.0);
  EXPECT_EQ(gemma.final_logit_softcapping, 30.0);
  const auto capped = [&](const std::string& from, const std::string& to) {
    return ConfigFile(replaced(text, from, to)).evaluation().estimator().scenario().model;
  };
  EXPECT_EQ(capped("\"final_logit_softcapping\": 30.0,", "").final_logit_softcapping, 30.0);
  EXPECT_EQ(capped("\"final_logit_softcapping\": 30.0,", "\"final_logit_softcapping\": null,").final_logit_softcapping,
            0.0);
  EXPECT_EQ(capped("\"attn_logit_softcapping\": 50.0,", "\"attn_logit_softcapping\": null,").attn_logit_softcapping,
            0.0);
  // layer_types (newer transformers write it): Gemma 2's alternation is read,
  // another pattern is an error naming the first layer that differs (the
  // rule read_layer_types applies to gpt-oss too).
  std::string types = "\"layer_types\": [";
  for (int i = 0; i < 42; ++i)
    types += std::string(i ? ", " : "") + (i % 2 ? "\"full_attention\"" : "\"sliding_attention\"");
  types += "],";
  EXPECT_EQ(ConfigFile(replaced(text, "\"max_position_embeddings\"", types + " \"max_position_embeddings\""))
                .evaluation()
                .estimator()
                .scenario()
                .model.global_attention_every,
            2);
  const std::string swapped = replaced(types, "\"sliding_attention\", \"full_attention\"",
                                       "\"full_attention\", \"sliding_attention\"");
  const ConfigFile wrong(replaced(text, "\"max_position_embeddings\"", swapped + " \"max_position_embeddings\""));
  EXPECT_EQ(wrong.error(), wrong.path() +
                               ": error: Hugging Face config: \"layer_types\" makes layer 1 sliding attention, which "
                               "is not the pattern memplan models (a window on every layer but every Nth, layer i "
                               "full when (i + 1) % N == 0; here N would be 1 from the first full layer); describe "
                               "the model with [model] keys (sliding_window, global_attention_every) instead of "
                               "hf_config");
  const ConfigFile short_list(replaced(text, "\"max_position_embeddings\"",
                                       "\"layer_types\": [\"sliding_attention\"], \"max_position_embeddings\""));
  EXPECT_EQ(short_list.error(), short_list.path() +
                                    ": error: Hugging Face config: \"layer_types\" has 1 entries for 42 layers "
                                    "(\"num_hidden_layers\"); give one per layer");
  const ConfigFile no_kv(replaced(text, "\"num_key_value_heads\": 8,", ""));
  EXPECT_EQ(no_kv.error(), no_kv.path() +
                               ": error: Hugging Face config: \"num_key_value_heads\" is missing (the key/value "
                               "heads; model_type \"gemma2\" needs it); add it to the file");
}

TEST(HfConfig, Olmo2) {
  // allenai/OLMo-2-1124-7B: hand count beside olmo-2-7b.toml (7.3B).
  expect_rounds_to(fixture_total("olmo-2-7b"), 7.3e9, 0.1e9);
  // allenai/OLMo-2-1124-13B: h 5120, 40 layers, 40 heads (no grouping), MLP
  // 13824, vocabulary 100,352, untied. Per layer: attention 4 x 5120^2 =
  // 104,857,600, q/k norms over the projections 5120 + 5120 = 10,240, MLP 3 x
  // 5120 x 13824 = 212,336,640, norms 10,240: 317,214,720; x 40 =
  // 12,688,588,800; + embedding and head 2 x 100,352 x 5120 = 1,027,604,480 +
  // final norm 5,120 = 13,716,198,400 (13.7B).
  EXPECT_EQ(fixture_total("olmo-2-13b"), 13'716'198'400.0);
  expect_rounds_to(13'716'198'400.0, 13.7e9, 0.1e9);
  const ModelSpec olmo = fixture_model("olmo-2-13b");
  EXPECT_EQ(olmo.qk_norm, QkNorm::full);  // q_norm of heads x head_dim, k_norm of kv_heads x head_dim
  EXPECT_EQ(olmo.layer_norms, 2);         // post_attention_layernorm, post_feedforward_layernorm
  EXPECT_FALSE(olmo.tied_embeddings);
  EXPECT_FALSE(olmo.qkv_bias);
  EXPECT_EQ(olmo.max_context, 4096);
  // The q/k norms are the full widths: per head (as Qwen3) they would be 2 x 128.
  ModelSpec per_head = olmo;
  per_head.qk_norm = QkNorm::head;
  EXPECT_EQ(13'716'198'400.0 - count_parameters(parameter_inventory(per_head)), 40 * (10240.0 - 256));
}

// OLMo 3 7B (allenai/Olmo-3-7B-*): OLMo 2 7B's shape with dolma2's 100,278
// entries and a 65,536-token context, three windowed layers of 4,096 tokens
// in four (Olmo3Config's defaults). Written here from the OLMo 2 fixture: the
// parameters are 7,298,617,344 - 2 x 74 x 4096 = 7,298,011,136, the count
// transformers 5.17's Olmo3ForCausalLM gave on the H100
// (validation/measured/h100-2026-11-27-trainer.jsonl line 2, param_count).
TEST(HfConfig, Olmo3) {
  std::string text = replaced(fixture_text("olmo-2-7b"), "\"olmo2\"", "\"olmo3\"");
  text = replaced(text, "\"vocab_size\": 100352", "\"vocab_size\": 100278");
  text = replaced(text, "\"max_position_embeddings\": 4096", "\"max_position_embeddings\": 65536");
  const Evaluation olmo3 = ConfigFile(text).evaluation();
  EXPECT_EQ(olmo3.breakdown().params_total, 7'298'011'136.0);
  const ModelSpec& spec = olmo3.estimator().scenario().model;
  EXPECT_EQ(spec.sliding_window, 4096);  // absent: Olmo3Config's default
  EXPECT_EQ(spec.global_attention_every, 4);
  EXPECT_EQ(spec.qk_norm, QkNorm::full);
  EXPECT_EQ(spec.max_context, 65536);
  // The layer_types list spelled out reads the same; a null window leaves every layer global.
  std::string types = "\"layer_types\": [";
  for (int i = 0; i < 32; ++i)
    types += std::string(i ? ", " : "") + ((i + 1) % 4 ? "\"sliding_attention\"" : "\"full_attention\"");
  types += "],";
  const ModelSpec listed =
      ConfigFile(replaced(text, "\"hidden_act\"", types + " \"sliding_window\": 4096, \"hidden_act\""))
          .evaluation().estimator().scenario().model;
  EXPECT_EQ(listed.global_attention_every, 4);
  EXPECT_EQ(listed.sliding_window, 4096);
  const ModelSpec global =
      ConfigFile(replaced(text, "\"hidden_act\"", "\"sliding_window\": null, \"hidden_act\""))
          .evaluation().estimator().scenario().model;
  EXPECT_EQ(global.sliding_window, 0);
  EXPECT_EQ(global.global_attention_every, 0);
}

TEST(HfConfig, MistralExplicitHeadDim) {
  // mistralai/Mistral-Nemo-Base-2407: head_dim 128 with hidden 5120 and 32
  // heads (not 5120 / 32 = 160): q and o are 5120 x 4096. Hand count beside
  // mistral-nemo-12b.toml: 12,247,782,400 (12.2B).
  EXPECT_EQ(fixture_total("mistral-nemo-12b"), 12'247'782'400.0);
  expect_rounds_to(12'247'782'400.0, 12.2e9, 0.1e9);
  const ModelSpec nemo = fixture_model("mistral-nemo-12b");
  EXPECT_EQ(nemo.head_dim, 128);
  EXPECT_EQ(nemo.sliding_window, 0);  // null
  EXPECT_EQ(nemo.max_context, 128000);
  // Without head_dim the heads would be 160 wide: q, k, v, o grow by 40 x
  // (2 x 5120 x 1024 + 2 x 5120 x 256) = 524,288,000.
  const std::string text = fixture_text("mistral-nemo-12b");
  EXPECT_EQ(ConfigFile(replaced(text, "\"head_dim\": 128,", "")).evaluation().breakdown().params_total,
            12'247'782'400.0 + 524'288'000.0);
  // Mistral Small 3 (2501): the same attention, MLP 32768 (23.6B).
  expect_rounds_to(fixture_total("mistral-small-24b"), 23.6e9, 0.1e9);
  EXPECT_EQ(fixture_model("mistral-small-24b").head_dim, 128);
}

TEST(HfConfig, PhiFourAndQwenTwoPointFive) {
  // microsoft/phi-4 (phi3, fused projections as Phi-3): 14.7B; Qwen/Qwen2.5-7B:
  // the model card's 7.61B (6.53B without the embedding and the head).
  expect_rounds_to(fixture_total("phi-4"), 14.7e9, 0.1e9);
  const ModelSpec phi = fixture_model("phi-4");
  EXPECT_EQ(phi.kv_heads, 10);
  EXPECT_EQ(phi.sliding_window, 0);
  // The card cuts 7.6156B to 7.61 but rounds 6.5256B to 6.53: within one unit
  // of the last digit (0.01B), not half.
  EXPECT_EQ(fixture_total("qwen2.5-7b"), 7'615'616'512.0);
  EXPECT_NEAR(7'615'616'512.0, 7.61e9, 0.01e9);
  EXPECT_NEAR(7'615'616'512.0 - 2 * 152'064.0 * 3584, 6.53e9, 0.01e9);
  // Qwen/Qwen2.5-72B-Instruct: the hand count beside qwen2.5-72b-instruct.toml
  // is also the sum of the checkpoint's safetensors tensors that a public
  // model report lists (72,706,203,648); the card says 72.7B.
  EXPECT_EQ(fixture_total("qwen2.5-72b-instruct"), 72'706'203'648.0);
  expect_rounds_to(72'706'203'648.0, 72.7e9, 0.1e9);
  EXPECT_EQ(fixture_model("qwen2.5-72b-instruct").sliding_window, 0);  // use_sliding_window false
}

// Issue 12 presets: the hand counts beside qwen3-0.6b.toml, qwen3-8b.toml,
// qwen3-32b.toml, qwen3-235b-a22b.toml and phi-3.5-mini.toml against the
// model cards' rounded totals (Qwen3-0.6B "0.6B, 0.44B non-embedding";
// Qwen3-8B 8.2B, 6.95B; Qwen3-32B 32.8B, 31.2B; Qwen3-235B-A22B 235B in
// total, 22B activated; Phi-3.5-mini-instruct 3.8B), within half a unit of
// the last digit given.
TEST(HfConfig, QwenThreeSizesAndPhiThreePointFive) {
  // Embedding (and untied head) rows x hidden, subtracted for the non-embedding figures.
  EXPECT_EQ(fixture_total("qwen3-0.6b"), 596'049'920.0);
  expect_rounds_to(596'049'920.0, 0.6e9, 0.1e9);
  expect_rounds_to(596'049'920.0 - 151'936.0 * 1024, 0.44e9, 0.01e9);  // tied: one matrix
  EXPECT_TRUE(fixture_model("qwen3-0.6b").tied_embeddings);
  EXPECT_EQ(fixture_total("qwen3-8b"), 8'190'735'360.0);
  expect_rounds_to(8'190'735'360.0, 8.2e9, 0.1e9);
  expect_rounds_to(8'190'735'360.0 - 2 * 151'936.0 * 4096, 6.95e9, 0.01e9);
  EXPECT_EQ(fixture_total("qwen3-32b"), 32'762'123'264.0);
  expect_rounds_to(32'762'123'264.0, 32.8e9, 0.1e9);
  expect_rounds_to(32'762'123'264.0 - 2 * 151'936.0 * 5120, 31.2e9, 0.1e9);
  // Qwen3-235B-A22B: activated, 8 of the 128 experts of 3 x 4096 x 1536 on each of the 94 layers.
  EXPECT_EQ(fixture_total("qwen3-235b-a22b"), 235'093'634'560.0);
  expect_rounds_to(235'093'634'560.0, 235e9, 1e9);
  expect_rounds_to(235'093'634'560.0 - 94 * 120 * 3 * 4096.0 * 1536, 22e9, 1e9);
  const ModelSpec moe = fixture_model("qwen3-235b-a22b");
  EXPECT_EQ(moe.experts, 128);
  EXPECT_EQ(moe.experts_top_k, 8);
  EXPECT_EQ(moe.expert_ffn_hidden, 1536);
  EXPECT_EQ(moe.kv_heads, 4);
  // Phi-3.5-mini: Phi-3-mini's weights (3,821,079,552, 3.8B), a 131072 context
  // and a window (262144) longer than it.
  EXPECT_EQ(fixture_total("phi-3.5-mini"), 3'821'079'552.0);
  expect_rounds_to(3'821'079'552.0, 3.8e9, 0.1e9);
  const ModelSpec phi = fixture_model("phi-3.5-mini");
  EXPECT_EQ(phi.sliding_window, 262144);
  EXPECT_EQ(phi.max_context, 131072);
}

// Llama 4 Scout (meta-llama/Llama-4-Scout-17B-16E, model_type llama4): the
// language model in text_config, read as transformers' modeling_llama4.py
// builds it (hand count beside llama-4-scout-17b-16e.toml).
TEST(HfConfig, LlamaFourScout) {
  const Evaluation scout = evaluate(
      replaced(std::string(kInfer), "MODEL", "hf_config = \"llama-4-scout-17b-16e/config.json\""),
      fixtures() + "/scenario.toml");
  EXPECT_EQ(scout.breakdown().params_total, 107'769'861'120.0);
  const ModelSpec model = scout.estimator().scenario().model;
  EXPECT_EQ(model.experts, 16);
  EXPECT_EQ(model.experts_top_k, 1);
  EXPECT_EQ(model.expert_ffn_hidden, 8192);         // intermediate_size
  EXPECT_EQ(model.shared_expert_ffn_hidden, 8192);  // Llama4TextMoe.shared_expert: intermediate_size too
  EXPECT_FALSE(model.shared_expert_gate);
  EXPECT_EQ(model.dense_layers, 0);  // interleave_moe_layer_step 1: every layer MoE
  EXPECT_EQ(model.ffn_hidden, 0);    // intermediate_size_mlp (16384) sizes no layer
  EXPECT_EQ(model.qk_norm, QkNorm::none);  // Llama4TextL2Norm has no weight
  EXPECT_FALSE(model.qkv_bias);
  EXPECT_FALSE(model.tied_embeddings);
  EXPECT_EQ(model.max_context, 262144);
  // Chunked local attention is not a window: every layer's cache is global.
  EXPECT_EQ(model.sliding_window, 0);
  EXPECT_EQ(model.global_attention_every, 0);
  // The vision tower and projector by hand (Llama4VisionModel, Llama4MultiModalProjector, vision_config): class
  // embedding 1408, positions 577 x 1408 = 812,416, patch embedding 588 x 1408 = 827,904, layernorm_pre and
  // _post 4 x 1408; 34 layers of q, k, v, o 4 x (1408^2 + 1408), fc1 1408 x 5632 + 5632, fc2 5632 x 1408 +
  // 1408, 2 LayerNorms 4 x 1408: 23,807,872 each; adapter 5632 x 4096 + 4096 x 4096 = 39,845,888; projector
  // 4096 x 5120 = 20,971,520: 871,932,416. With it, the safetensors total of
  // meta-llama/Llama-4-Scout-17B-16E-Instruct, 108,641,793,536 (Meta's model card: 109B).
  const double vision = 1408 + 577 * 1408.0 + 588 * 1408.0 + 4 * 1408 +
                        34 * (4 * (1408.0 * 1408 + 1408) + 1408.0 * 5632 + 5632 + 5632.0 * 1408 + 1408 + 4 * 1408) +
                        5632.0 * 4096 + 4096.0 * 4096 + 4096.0 * 5120;
  EXPECT_EQ(vision, 871'932'416.0);
  EXPECT_EQ(107'769'861'120.0 + vision, 108'641'793'536.0);
  expect_rounds_to(108'641'793'536.0, 109e9, 1e9);
  // Active per token (one routed expert, the shared expert): Meta's 17B.
  expect_rounds_to(107'769'861'120.0 - 48 * 15 * 3 * 5120.0 * 8192, 17e9, 1e9);
  // One warning says what is left out: the vision tower, and chunked attention counted as global.
  const auto& warnings = scout.estimator().scenario().warnings;
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("the vision tower and the multimodal projector are not in the estimate"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("\"attention_chunk_size\" 8192: 36 of the 48 layers attend within chunks"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("counts every layer's KV cache as global"), std::string::npos) << warnings[0];

  // The text model alone (model_type llama4_text, Llama4ForCausalLM): the same model, the chunk warning only.
  const std::string text = fixture_text("llama-4-scout-17b-16e");
  const size_t open = text.find("\"text_config\": {") + std::string("\"text_config\": ").size();
  const size_t close = text.find('}', text.find("\"vocab_size\"", open));
  const std::string alone = text.substr(open, close - open + 1);
  const Evaluation text_only = ConfigFile(alone).evaluation();
  EXPECT_EQ(text_only.breakdown().params_total, 107'769'861'120.0);
  ASSERT_EQ(text_only.estimator().scenario().warnings.size(), 1u);
  EXPECT_EQ(text_only.estimator().scenario().warnings[0].find("vision"), std::string::npos);
  // Without attention_chunk_size (null): no warning.
  EXPECT_TRUE(ConfigFile(replaced(alone, "\"attention_chunk_size\": 8192", "\"attention_chunk_size\": null"))
                  .evaluation()
                  .estimator()
                  .scenario()
                  .warnings.empty());

  // moe_layers from layer 2 on: two dense first layers of intermediate_size_mlp (dense_layers). Each loses
  // the router, 16 experts and the shared expert (81,920 + 2,013,265,920 + 125,829,120) and gains an MLP of
  // 3 x 5120 x 16384 = 251,658,240.
  const std::string from_two = replaced(alone, "\"moe_layers\": [\n      0,\n      1,\n", "\"moe_layers\": [\n");
  const Evaluation two = ConfigFile(from_two).evaluation();
  EXPECT_EQ(two.breakdown().params_total,
            107'769'861'120.0 - 2 * (81'920.0 + 2'013'265'920.0 + 125'829'120.0 - 251'658'240.0));
  EXPECT_EQ(two.estimator().scenario().model.dense_layers, 2);
  EXPECT_EQ(two.estimator().scenario().model.ffn_hidden, 16384);

  // Llama 4 Maverick alternates dense and MoE layers (interleave_moe_layer_step 2): an error.
  const ConfigFile maverick(replaced(replaced(alone, "\"moe_layers\"", "\"unused_moe_layers\""),
                                     "\"interleave_moe_layer_step\": 1", "\"interleave_moe_layer_step\": 2"));
  EXPECT_EQ(maverick.error(),
            maverick.path() +
                ": error: Hugging Face config: \"interleave_moe_layer_step\" 2 makes layer 1 a MoE layer and layer 2 "
                "after it dense (Llama 4 Maverick alternates them), which memplan cannot model: its MoE layers are "
                "all alike and only the first layers may be dense (dense_layers); set \"interleave_moe_layer_step\" "
                "to 1 (and \"moe_layers\" to every layer from the first MoE one), or describe the model with [model] "
                "keys instead of hf_config");
  const ConfigFile gap(replaced(alone, "\"moe_layers\": [\n      0,\n      1,\n", "\"moe_layers\": [\n      0,\n"));
  EXPECT_NE(gap.error().find("\"moe_layers\" makes layer 0 a MoE layer and layer 1 after it dense"),
            std::string::npos)
      << gap.error();
  // The multimodal config without its text_config.
  EXPECT_NE(ConfigFile(replaced(text, "\"text_config\"", "\"text_configs\"")).error().find(
                "\"text_config\" is missing (the language model of Llama 4"),
            std::string::npos);
}

// Llama 3.3 70B has Llama 3.1 70B's architecture: its preset is the model the
// llama-3.1-70b config gives.
TEST(HfConfig, LlamaThreePointThreeIsLlamaThreePointOneSeventy) {
  const Evaluation preset =
      evaluate(replaced(std::string(kTrain), "MODEL", "preset = \"llama-3.3-70b\""), fixtures() + "/scenario.toml");
  const Evaluation config = evaluate(
      replaced(std::string(kTrain), "MODEL", "hf_config = \"llama-3.1-70b/config.json\""), fixtures() + "/scenario.toml");
  expect_same_model(preset.estimator().scenario().model, config.estimator().scenario().model);
  expect_same_estimate(preset, config);
  expect_rounds_to(preset.breakdown().params_total, 70.6e9, 0.1e9);
}

std::string llama2(std::string_view from, std::string_view to);

// Elements of the inventory by item name (all layers).
double inventory_elements(const ModelSpec& spec, std::string_view name) {
  double total = 0;
  for (const PlanItem& item : parameter_inventory(spec))
    if (item.name_view() == name) total += item.elements * item.count;
  return total;
}

TEST(HfConfig, GptOss) {
  // openai/gpt-oss-120b (transformers' models/gpt_oss): h 2880, 36 layers, 64
  // q heads and 8 kv heads of 64, q, k, v, o biases, a sink per head, 128
  // experts of 2880 (top 4) with biases, a biased router, vocabulary 201,088,
  // untied. Per layer: q 2880 x 4096 + 4096 = 11,800,576, k and v 2880 x 512
  // + 512 = 1,475,072 each, o 4096 x 2880 + 2880 = 11,799,360, sinks 64
  // (attention 26,550,144), router 2880 x 128 + 128 = 368,768, experts 128 x
  // 3 x 2880^2 = 3,185,049,600 and their biases 128 x (2 x 2880 + 2880) =
  // 1,105,920, norms 5,760: 3,213,080,192; x 36 = 115,670,886,912; +
  // embedding and head 2 x 201,088 x 2880 = 1,158,266,880 + final norm 2,880
  // = 116,829,156,672.
  EXPECT_EQ(fixture_total("gpt-oss-120b"), 116'829'156'672.0);
  const ModelSpec big = fixture_model("gpt-oss-120b");
  EXPECT_EQ(big.experts, 128);
  EXPECT_EQ(big.experts_top_k, 4);
  EXPECT_EQ(big.expert_ffn_hidden, 2880);
  EXPECT_EQ(big.head_dim, 64);
  EXPECT_EQ(big.kv_heads, 8);
  EXPECT_TRUE(big.qkv_bias && big.output_bias && big.attention_sinks && big.router_bias && big.expert_bias);
  EXPECT_FALSE(big.tied_embeddings);
  EXPECT_EQ(big.sliding_window, 128);
  EXPECT_EQ(big.global_attention_every, 2);  // layer_types: sliding, full, sliding, ...
  EXPECT_EQ(big.max_context, 131072);
  // The model card (OpenAI 2025, "gpt-oss-120b & gpt-oss-20b Model Card",
  // arXiv 2508.10925, Table 1) rounds to 0.01B: MLP (router and experts)
  // 114.71B, attention 0.96B, embedding and unembedding 1.16B, total 116.83B.
  const double mlp = inventory_elements(big, "moe.router") + inventory_elements(big, "moe.experts") +
                     inventory_elements(big, "moe.experts_bias");
  EXPECT_EQ(mlp, 114'714'874'368.0);  // (368,768 + 3,186,155,520) x 36
  EXPECT_NEAR(mlp / 1e9, 114.71, 0.005);
  double attention = 0;
  for (const char* name : {"attn.q", "attn.k", "attn.v", "attn.o", "attn.sinks"})
    attention += inventory_elements(big, name);
  EXPECT_EQ(attention, 955'805'184.0);  // 26,550,144 x 36
  EXPECT_NEAR(attention / 1e9, 0.96, 0.005);
  EXPECT_EQ(inventory_elements(big, "attn.sinks"), 36 * 64.0);
  EXPECT_NEAR((inventory_elements(big, "embed_tokens") + inventory_elements(big, "lm_head")) / 1e9, 1.16, 0.005);
  EXPECT_NEAR(116'829'156'672.0 / 1e9, 116.83, 0.005);

  // openai/gpt-oss-20b: the same layer with 32 experts, 24 layers. Per layer
  // 26,550,144 + router 2880 x 32 + 32 = 92,192 + experts 32 x (3 x 2880^2 +
  // 3 x 2880) = 796,538,880 + norms 5,760 = 823,186,976; x 24 =
  // 19,756,487,424 + 1,158,269,760 = 20,914,757,184 (the model card: 20.91B;
  // MLP 19.12B, attention 0.64B).
  EXPECT_EQ(fixture_total("gpt-oss-20b"), 20'914'757'184.0);
  const ModelSpec small = fixture_model("gpt-oss-20b");
  EXPECT_EQ(small.experts, 32);
  const double small_mlp = inventory_elements(small, "moe.router") + inventory_elements(small, "moe.experts") +
                           inventory_elements(small, "moe.experts_bias");
  EXPECT_NEAR(small_mlp / 1e9, 19.12, 0.005);
  EXPECT_NEAR((inventory_elements(small, "attn.q") + inventory_elements(small, "attn.k") +
               inventory_elements(small, "attn.v") + inventory_elements(small, "attn.o") +
               inventory_elements(small, "attn.sinks")) / 1e9,
              0.64, 0.005);

  // The sinks are per head (split with the heads), the expert biases belong to the experts.
  for (const PlanItem& item : parameter_inventory(big)) {
    if (item.name_view() == "attn.sinks") {
      EXPECT_EQ(item.param_class, MEMPLAN_CLASS_ATTENTION);
    }
    if (item.name_view() == "moe.experts_bias") {
      EXPECT_EQ(item.param_class, MEMPLAN_CLASS_EXPERT);
    }
    if (item.name_view() == "moe.router") {
      EXPECT_EQ(item.param_class, MEMPLAN_CLASS_ROUTER);
    }
  }
}

// transformers' layer_types in memplan's terms: a window on every layer but
// every Nth (layer i full when (i + 1) % N == 0); anything else is an error.
TEST(HfConfig, LayerTypes) {
  const std::string base = fixture_text("gpt-oss-20b");
  const size_t open = base.find("\"layer_types\": [");
  const size_t close = base.find(']', open);
  auto with_types = [&](const std::string& types) {
    std::string text = base;
    return text.replace(open, close - open + 1, "\"layer_types\": [" + types + "]");
  };
  auto repeat = [](const std::string& group, int times) {
    std::string out;
    for (int i = 0; i < times; ++i) out += (out.empty() ? "" : ", ") + group;
    return out;
  };
  const std::string s = "\"sliding_attention\"", f = "\"full_attention\"";
  {  // every third layer full: N = 3
    const ModelSpec model = ConfigFile(with_types(repeat(s + ", " + s + ", " + f, 8))).evaluation()
                                .estimator().scenario().model;
    EXPECT_EQ(model.sliding_window, 128);
    EXPECT_EQ(model.global_attention_every, 3);
  }
  {  // every layer windowed
    const ModelSpec model = ConfigFile(with_types(repeat(s, 24))).evaluation().estimator().scenario().model;
    EXPECT_EQ(model.sliding_window, 128);
    EXPECT_EQ(model.global_attention_every, 0);
  }
  {  // every layer full: no window
    const ModelSpec model = ConfigFile(with_types(repeat(f, 24))).evaluation().estimator().scenario().model;
    EXPECT_EQ(model.sliding_window, 0);
    EXPECT_EQ(model.global_attention_every, 0);
  }
  {  // no layer_types: GptOssConfig's default alternation
    std::string text = base;
    text.replace(open, close - open + 2, "");
    const ModelSpec model = ConfigFile(text).evaluation().estimator().scenario().model;
    EXPECT_EQ(model.global_attention_every, 2);
  }
  const ConfigFile irregular(with_types(f + ", " + repeat(s + ", " + f, 11) + ", " + s));
  EXPECT_EQ(irregular.error(),
            irregular.path() +
                ": error: Hugging Face config: \"layer_types\" makes layer 1 sliding attention, which is not the "
                "pattern memplan models (a window on every layer but every Nth, layer i full when (i + 1) % N == 0; "
                "here N would be 1 from the first full layer); describe the model with [model] keys "
                "(sliding_window, global_attention_every) instead of hf_config");
  const ConfigFile short_list(with_types(repeat(s + ", " + f, 11)));
  EXPECT_EQ(short_list.error(), short_list.path() +
                                    ": error: Hugging Face config: \"layer_types\" has 22 entries for 24 layers "
                                    "(\"num_hidden_layers\"); give one per layer");
  const ConfigFile unknown(with_types(repeat(s + ", \"chunked_attention\"", 12)));
  EXPECT_EQ(unknown.error(), unknown.path() +
                                 ": error: Hugging Face config: \"layer_types\" holds the string "
                                 "\"chunked_attention\"; memplan reads \"sliding_attention\" and \"full_attention\" "
                                 "layers");
  std::string no_window = with_types(repeat(s + ", " + f, 12));
  no_window.replace(no_window.find("\"sliding_window\": 128"), 21, "\"sliding_window\": null");
  EXPECT_NE(ConfigFile(no_window).error().find(
                "\"layer_types\" has sliding_attention layers but \"sliding_window\" is null"),
            std::string::npos);
}

// quantization_config: the checkpoint's format as facts for plugins
// (model.quantization.*), read from each quantizer's own fields.
TEST(HfConfig, QuantizationConfig) {
  // gpt-oss: MXFP4 experts; attention, router, embedding and head kept in 16 bits.
  const WeightFormat gpt_oss = fixture_model("gpt-oss-120b").weight_format;
  EXPECT_EQ(gpt_oss.method, "mxfp4");
  EXPECT_EQ(gpt_oss.unquantized, "attention,router,embeddings,lm_head");
  EXPECT_EQ(gpt_oss.bits, 0);
  EXPECT_EQ(gpt_oss.group_size, 0);
  EXPECT_EQ(fixture_model("llama-2-7b").weight_format.method, "");  // none declared
  auto format_of = [](const std::string& quantization) {
    return ConfigFile(llama2("\"hidden_act\"", "\"quantization_config\": " + quantization + ", \"hidden_act\""))
        .evaluation()
        .estimator()
        .scenario()
        .model.weight_format;
  };
  // TheBloke/Llama-2-7B-GPTQ (AutoGPTQ): bits, group_size, desc_act, sym.
  const WeightFormat gptq = format_of(
      R"({"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": false, "sym": true, )"
      R"("true_sequential": true, "model_name_or_path": null, "model_file_base_name": "model", "quant_method": "gptq"})");
  EXPECT_EQ(gptq.method, "gptq");
  EXPECT_EQ(gptq.bits, 4);
  EXPECT_EQ(gptq.group_size, 128);
  EXPECT_EQ(gptq.unquantized, "");
  // GPTQ per channel: group_size -1.
  EXPECT_EQ(format_of(R"({"bits": 8, "group_size": -1, "quant_method": "gptq"})").group_size, -1);
  // TheBloke/Llama-2-7B-AWQ (AutoAWQ): w_bit and q_group_size in older configs.
  const WeightFormat awq = format_of(R"({"quant_method": "awq", "zero_point": true, "q_group_size": 64, "w_bit": 4, )"
                                     R"("version": "gemm"})");
  EXPECT_EQ(awq.method, "awq");
  EXPECT_EQ(awq.bits, 4);
  EXPECT_EQ(awq.group_size, 64);
  // deepseek-ai/DeepSeek-V3: block-scaled 8-bit floats, 128 x 128 blocks.
  const WeightFormat blocks = format_of(
      R"({"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]})");
  EXPECT_EQ(blocks.method, "fp8");
  EXPECT_EQ(blocks.block_elements, 16384);
  // bitsandbytes: load_in_4bit / load_in_8bit give the bits; the 4-bit type and double quantization.
  const WeightFormat bnb = format_of(R"({"quant_method": "bitsandbytes", "load_in_4bit": true, )"
                                     R"("bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true, )"
                                     R"("llm_int8_skip_modules": ["lm_head"]})");
  EXPECT_EQ(bnb.bits, 4);
  EXPECT_EQ(bnb.value_type, "nf4");
  EXPECT_TRUE(bnb.double_quant);
  EXPECT_EQ(bnb.unquantized, "lm_head");
  EXPECT_EQ(format_of(R"({"quant_method": "bitsandbytes", "load_in_8bit": true})").bits, 8);
  // Modules kept unquantized, by the parts they name.
  EXPECT_EQ(format_of(R"({"quant_method": "gptq", "modules_to_not_convert": ["lm_head", "model.layers.0.mlp", )"
                      R"("model.layers.*.self_attn.o_proj", "model.norm"]})")
                .unquantized,
            "attention,mlp,lm_head");
  // A quantization_config memplan cannot read does not stop the estimate (the
  // model ran the same before memplan read them): the warning names the field,
  // and the model declares no format.
  auto unread = [&](const std::string& quantization) {
    const ModelSpec model = ConfigFile(llama2("\"hidden_act\"", "\"quantization_config\": " + quantization +
                                                                   ", \"hidden_act\""))
                                .evaluation()
                                .estimator()
                                .scenario()
                                .model;
    EXPECT_EQ(model.weight_format.method, "") << quantization;
    return model.hf_note;
  };
  const std::string tail = "), so the model declares no weight format to plugins that would take it";
  EXPECT_EQ(unread(R"({"bits": 4})"),
            "its quantization_config is not read (\"quantization_config\" has no \"quant_method\" (the weight format, "
            "such as \"gptq\"); add it, or remove quantization_config" + tail);
  EXPECT_EQ(unread(R"({"quant_method": "fp8", "weight_block_size": [128, 0]})"),
            "its quantization_config is not read (\"weight_block_size\" must be an array of positive integers (such "
            "as [128, 128]), not an array; correct it in the file" + tail);
  EXPECT_EQ(unread(R"({"quant_method": "gptq", "group_size": 0})"),
            "its quantization_config is not read (\"group_size\" must be a positive integer or -1 (one scale per "
            "row), not the integer 0; correct it in the file" + tail);
  // Beyond an int64 (no wrap to -1), and a block of more than 10^9 elements.
  EXPECT_NE(unread(R"({"quant_method": "gptq", "group_size": 18446744073709551615})")
                .find("\"group_size\" must be a positive integer or -1"),
            std::string::npos);
  EXPECT_NE(unread(R"({"quant_method": "fp8", "weight_block_size": [1000000, 1000000]})")
                .find("\"weight_block_size\" must be an array of positive integers"),
            std::string::npos);
}

TEST(HfConfig, MoeWithDenseLayersIsAnError) {
  const std::string moe = fixture_text("qwen3-30b-a3b");
  EXPECT_NE(ConfigFile(replaced(moe, "\"mlp_only_layers\": []", "\"mlp_only_layers\": [0]")).error().find(
                "\"mlp_only_layers\" lists 1 dense layers"),
            std::string::npos);
  EXPECT_NE(ConfigFile(replaced(moe, "\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 2")).error().find(
                "\"decoder_sparse_step\" is 2"),
            std::string::npos);
  EXPECT_NE(ConfigFile(replaced(fixture_text("gemma-3-12b"), "\"text_config\"", "\"text_configs\"")).error().find(
                "\"text_config\" is missing"),
            std::string::npos);
}

std::string llama2(std::string_view from, std::string_view to) {
  return replaced(fixture_text("llama-2-7b"), from, to);
}

// Keys in [model] override what the config gives, as they do a preset's.
TEST(HfConfig, InlineKeysOverride) {
  const ConfigFile config(fixture_text("llama-2-7b"));
  // 16 of Llama 2 7B's 32 layers: 16 x 202,383,360 fewer.
  EXPECT_EQ(config.evaluation("\nlayers = 16").breakdown().params_total, 6'738'415'616.0 - 16 * 202'383'360.0);
  EXPECT_EQ(config.evaluation("\nmax_context = 2048").estimator().scenario().model.max_context, 2048);
}

TEST(HfConfig, PathIsRelativeToTheScenario) {
  TempDir dir;
  dir.write("models/llama/config.json", fixture_text("llama-2-7b"));
  const std::string scenario = dir.path() + "/scenarios/s.toml";
  const Evaluation evaluation =
      evaluate(replaced(std::string(kInfer), "MODEL", "hf_config = \"../models/llama/config.json\""), scenario);
  EXPECT_EQ(evaluation.breakdown().params_total, 6'738'415'616.0);
  EXPECT_EQ(evaluation.estimator().scenario().model.hf_config, dir.path() + "/models/llama/config.json");
}

TEST(HfConfig, MistralWindowDefaults) {
  // Absent: MistralConfig's default of 4096; null: no window; a number: that window.
  const std::string mistral = fixture_text("mistral-7b");
  EXPECT_EQ(ConfigFile(replaced(mistral, "\"sliding_window\": 4096,", "")).evaluation().estimator().scenario()
                .model.sliding_window,
            4096);
  EXPECT_EQ(ConfigFile(replaced(mistral, "\"sliding_window\": 4096", "\"sliding_window\": null"))
                .evaluation()
                .estimator()
                .scenario()
                .model.sliding_window,
            0);
  EXPECT_EQ(ConfigFile(replaced(mistral, "\"sliding_window\": 4096", "\"sliding_window\": 8192"))
                .evaluation()
                .estimator()
                .scenario()
                .model.sliding_window,
            8192);
}

TEST(HfConfig, QwenSlidingWindowOnEveryLayer) {
  const std::string qwen = replaced(fixture_text("qwen2-0.5b"), "\"use_sliding_window\": false",
                                    "\"use_sliding_window\": true");
  // max_window_layers 24 of 24 layers: no layer is windowed.
  EXPECT_EQ(ConfigFile(qwen).evaluation().estimator().scenario().model.sliding_window, 0);
  // 0: every layer is.
  const std::string all = replaced(qwen, "\"max_window_layers\": 24", "\"max_window_layers\": 0");
  EXPECT_EQ(ConfigFile(all).evaluation().estimator().scenario().model.sliding_window, 131072);
  // Some layers only: not modelled.
  const ConfigFile some(replaced(qwen, "\"max_window_layers\": 24", "\"max_window_layers\": 20"));
  EXPECT_EQ(some.error(), some.path() +
                              ": error: Hugging Face config: \"use_sliding_window\" is true with \"max_window_layers\" "
                              "20 of 24 layers: only the layers from there on are windowed, which memplan cannot "
                              "model (it windows every layer, or all but every Nth); set \"max_window_layers\" to 0 "
                              "to window every layer, or \"use_sliding_window\" to false to count every layer as "
                              "global");
}

TEST(HfConfig, LlamaBiases) {
  // attention_bias: q, k, v and o (4 x 4096 per layer); mlp_bias: gate, up, down (2 x 11008 + 4096).
  const ConfigFile attention(llama2("\"hidden_act\"", "\"attention_bias\": true, \"hidden_act\""));
  EXPECT_EQ(attention.evaluation().breakdown().params_total, 6'738'415'616.0 + 32 * 4 * 4096.0);
  const ConfigFile mlp(llama2("\"hidden_act\"", "\"mlp_bias\": true, \"hidden_act\""));
  EXPECT_EQ(mlp.evaluation().breakdown().params_total, 6'738'415'616.0 + 32 * (2 * 11008.0 + 4096));
}

TEST(HfConfig, UnsupportedModelType) {
  // The OPT-13B fixture relabelled as BLOOM, a family memplan does not read.
  const ConfigFile config(replaced(fixture_text("opt-13b"), "\"model_type\": \"opt\"", "\"model_type\": \"bloom\""));
  EXPECT_EQ(config.error(),
            config.path() +
                ": error: Hugging Face config: model_type \"bloom\" is not supported; memplan reads \"bert\", "
                "\"deepseek_v2\", \"deepseek_v3\", \"gemma\", \"gemma2\", \"gemma3\", \"gemma3_text\", \"gpt2\", "
                "\"gpt_oss\", \"llama\", \"llama4\", \"llama4_text\", \"mistral\", \"mixtral\", \"olmo2\", \"olmo3\", "
                "\"opt\", \"phi3\", \"qwen2\", \"qwen2_moe\", "
                "\"qwen3\" and \"qwen3_moe\" configs. For another model, remove 'hf_config' "
                "and describe the architecture with [model] keys (layers, hidden, heads, ...)");
}

// facebook/opt-350m (fixture opt-350m): h = 1024, f = 4096 (ffn_dim), 24
// layers, 16 heads, V = 50272, word_embed_proj_dim e = 512,
// max_position_embeddings 2048, do_layer_norm_before false. Summing the
// shapes of transformers' OPTForCausalLM (modeling_opt.py):
//   per layer: q_proj, k_proj, v_proj, out_proj 4 x (h x h + h) = 4,198,400;
//   fc1 h x f + f = 4,198,400; fc2 f x h + h = 4,195,328; self_attn_layer_norm
//   and final_layer_norm 2 x 2h = 4,096: 12,596,224; x 24 = 302,309,376
//   embed_tokens V x e = 50272 x 512 = 25,739,264
//   embed_positions (2048 + 2) x h = 2,099,200 (OPTLearnedPositionalEmbedding's offset 2)
//   project_in e x h = 524,288 and project_out h x e = 524,288 (no bias)
//   no decoder final_layer_norm (do_layer_norm_before false); lm_head tied to embed_tokens
//   total 302,309,376 + 25,739,264 + 2,099,200 + 1,048,576 = 331,196,416
// (the model's 331,196,416 parameters; 662,392,832 bytes in fp16).
TEST(HfConfig, OptThreeFiftyM) {
  EXPECT_EQ(fixture_total("opt-350m"), 331'196'416.0);
  EXPECT_EQ(24 * 12'596'224.0 + 50272.0 * 512 + 2050.0 * 1024 + 2 * 512.0 * 1024, 331'196'416.0);
  const ModelSpec opt = fixture_model("opt-350m");
  EXPECT_EQ(opt.hidden, 1024);
  EXPECT_EQ(opt.embedding_dim, 512);
  EXPECT_EQ(opt.ffn_hidden, 4096);
  EXPECT_EQ(opt.position_embeddings, 2050);
  EXPECT_EQ(opt.max_context, 2048);
  EXPECT_FALSE(opt.final_norm);  // post-LN
  EXPECT_TRUE(opt.tied_embeddings);
  EXPECT_TRUE(opt.qkv_bias && opt.output_bias && opt.mlp_bias);
  EXPECT_EQ(opt.mlp, MlpKind::gelu);  // fc1, fc2 (ReLU: the same weights)
  EXPECT_EQ(opt.norm, NormKind::layernorm);
  std::map<std::string, std::pair<double, int32_t>> items;  // elements x count, class
  for (const PlanItem& item : parameter_inventory(opt))
    items[std::string(item.name_view())] = {item.elements * item.count, item.param_class};
  EXPECT_EQ(items.at("embed_tokens"), std::make_pair(50272.0 * 512, int32_t{MEMPLAN_CLASS_EMBEDDING}));
  EXPECT_EQ(items.at("project_in"), std::make_pair(512.0 * 1024, int32_t{MEMPLAN_CLASS_OTHER}));
  EXPECT_EQ(items.at("project_out"), std::make_pair(1024.0 * 512, int32_t{MEMPLAN_CLASS_OTHER}));
  EXPECT_EQ(items.count("final_norm"), 0u);
  EXPECT_EQ(items.count("lm_head"), 0u);
  // The other sizes: word_embed_proj_dim equals hidden_size, no projections, pre-LN with a final LayerNorm.
  const ModelSpec opt13 = fixture_model("opt-13b");
  EXPECT_EQ(opt13.embedding_dim, 0);
  EXPECT_TRUE(opt13.final_norm);
  EXPECT_EQ(opt13.position_embeddings, 2050);
}

// What OPTConfig's switches change, on the OPT-350m fixture.
TEST(HfConfig, OptSwitches) {
  const std::string opt = fixture_text("opt-350m");
  const double total = 331'196'416.0;
  // An untied head reads the projected state: lm_head of e x V.
  EXPECT_EQ(ConfigFile(replaced(opt, "\"use_cache\"", "\"tie_word_embeddings\": false, \"use_cache\""))
                .evaluation().breakdown().params_total,
            total + 512.0 * 50272);
  // enable_bias false: no biases on q, k, v, out_proj (4h), fc1 (f) and fc2 (h) in 24 layers.
  EXPECT_EQ(ConfigFile(replaced(opt, "\"use_cache\"", "\"enable_bias\": false, \"use_cache\""))
                .evaluation().breakdown().params_total,
            total - 24 * (4 * 1024.0 + 4096 + 1024));
  // Pre-LN: the decoder's final LayerNorm (2h) appears, unless _remove_final_layer_norm.
  const std::string pre_ln = replaced(opt, "\"do_layer_norm_before\": false", "\"do_layer_norm_before\": true");
  EXPECT_EQ(ConfigFile(pre_ln).evaluation().breakdown().params_total, total + 2 * 1024.0);
  EXPECT_EQ(ConfigFile(replaced(pre_ln, "\"use_cache\"", "\"_remove_final_layer_norm\": true, \"use_cache\""))
                .evaluation().breakdown().params_total,
            total);
  // word_embed_proj_dim absent: OPTConfig's default, hidden_size (no projections; the embedding h wide).
  const double unprojected = total - 2 * 512.0 * 1024 + 50272.0 * (1024 - 512);
  EXPECT_EQ(ConfigFile(replaced(opt, ",\n  \"word_embed_proj_dim\": 512", "")).evaluation().breakdown().params_total,
            unprojected);
  EXPECT_EQ(ConfigFile(replaced(opt, "\"word_embed_proj_dim\": 512", "\"word_embed_proj_dim\": 1024"))
                .evaluation().breakdown().params_total,
            unprojected);
  // A [model] key overrides the config's width.
  EXPECT_EQ(ConfigFile(opt).evaluation("\nembedding_dim = 256").breakdown().params_total,
            total + 50272.0 * (256 - 512) + 2 * 1024.0 * (256 - 512));
}

TEST(HfConfig, OptErrors) {
  const std::string opt = fixture_text("opt-350m");
  auto with = [&](std::string_view value) {
    return ConfigFile(replaced(opt, "\"word_embed_proj_dim\": 512", "\"word_embed_proj_dim\": " + std::string(value)));
  };
  for (const auto& [value, described] : {std::pair<std::string_view, std::string_view>{"0", "the integer 0"},
                                         {"-512", "the integer -512"},
                                         {"\"512\"", "the string \"512\""},
                                         {"512.0", "the number 512.0"}}) {
    const ConfigFile config = with(value);
    EXPECT_EQ(config.error(), config.path() + ": error: Hugging Face config: \"word_embed_proj_dim\" must be a "
                                              "positive integer, not " + std::string(described) +
                                  "; correct it in the file");
  }
  {
    const ConfigFile config = with("2048");
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"word_embed_proj_dim\" 2048 is wider than "
                                  "\"hidden_size\" 1024: memplan models a token embedding narrower than the hidden "
                                  "state (OPT-350m: 512 with 1024); correct it in the file, or describe the model "
                                  "with [model] keys instead of hf_config");
  }
  {
    const ConfigFile config(replaced(opt, "\"ffn_dim\": 4096,", ""));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"ffn_dim\" is missing (the MLP's inner width; "
                                  "model_type \"opt\" needs it); add it to the file");
  }
  {
    const ConfigFile config(replaced(opt, "\"max_position_embeddings\": 2048,", ""));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"max_position_embeddings\" is missing (the learned "
                                  "positions; model_type \"opt\" needs it); add it to the file");
  }
  {
    const ConfigFile config(replaced(opt, "\"do_layer_norm_before\": false", "\"do_layer_norm_before\": 0"));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"do_layer_norm_before\" must be true or false, not "
                                  "the integer 0; correct it in the file");
  }
  {
    const ConfigFile config(
        replaced(opt, "\"use_cache\"", "\"layer_norm_elementwise_affine\": false, \"use_cache\""));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"layer_norm_elementwise_affine\" is false: memplan "
                                  "counts a LayerNorm's scale and shift (2 x hidden_size each) and cannot model "
                                  "LayerNorms without weights; set it to true or describe the model with [model] "
                                  "keys instead of hf_config");
  }
}

TEST(HfConfig, MissingAndMistypedFields) {
  {
    const ConfigFile config(llama2("\"num_hidden_layers\": 32,", ""));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"num_hidden_layers\" is missing (the number of "
                                  "layers; model_type \"llama\" needs it); add it to the file");
  }
  {
    const ConfigFile config(llama2("\"hidden_size\": 4096", "\"hidden_size\": \"4096\""));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"hidden_size\" must be a positive integer, not the "
                                  "string \"4096\"; correct it in the file");
  }
  {
    const ConfigFile config(llama2("\"vocab_size\": 32000", "\"vocab_size\": null"));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"vocab_size\" must be a positive integer, not null; "
                                  "correct it in the file");
  }
  {
    const ConfigFile config(llama2("\"intermediate_size\": 11008", "\"intermediate_size\": 11008.0"));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"intermediate_size\" must be a positive integer, "
                                  "not the number 11008.0; correct it in the file");
  }
  {
    const ConfigFile config(llama2("\"num_key_value_heads\": 32", "\"num_key_value_heads\": -8"));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"num_key_value_heads\" must be a positive integer, "
                                  "not the integer -8; correct it in the file");
  }
  {
    const ConfigFile config(llama2("\"tie_word_embeddings\": false", "\"tie_word_embeddings\": \"false\""));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"tie_word_embeddings\" must be true or false, not "
                                  "the string \"false\"; correct it in the file");
  }
  {
    const ConfigFile config(llama2("\"hidden_act\": \"silu\"", "\"hidden_act\": [\"silu\"]"));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"hidden_act\" must be a string, not an array; "
                                  "correct it in the file");
  }
  {
    const ConfigFile config(llama2("\"model_type\": \"llama\",", ""));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"model_type\" is missing (the architecture family, "
                                  "such as \"llama\"); add it to the file");
  }
  {
    const ConfigFile config(replaced(fixture_text("mixtral-8x7b"), "\"num_local_experts\": 8,", ""));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"num_local_experts\" is missing (the experts per "
                                  "layer; model_type \"mixtral\" needs it); add it to the file");
  }
  {
    const ConfigFile config(replaced(fixture_text("gpt2-xl"), "\"n_positions\": 1024,", ""));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"n_positions\" is missing (the learned positions; "
                                  "model_type \"gpt2\" needs it); add it to the file");
  }
  {
    const ConfigFile config(replaced(fixture_text("bert-large-uncased"), "\"type_vocab_size\": 2",
                                     "\"type_vocab_size\": true"));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"type_vocab_size\" must be a positive integer, not "
                                  "the boolean true; correct it in the file");
  }
}

TEST(HfConfig, UnsupportedVariants) {
  {
    const ConfigFile config(replaced(fixture_text("bert-large-uncased"), "\"position_embedding_type\": \"absolute\"",
                                     "\"position_embedding_type\": \"relative_key\""));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"position_embedding_type\" is \"relative_key\": "
                                  "memplan models BERT's absolute position embeddings only; set it to \"absolute\" or "
                                  "describe the model with [model] keys instead of hf_config");
  }
  {
    const ConfigFile config(replaced(fixture_text("gpt2-xl"), "\"n_positions\": 1024,",
                                     "\"n_positions\": 1024, \"add_cross_attention\": true,"));
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: \"add_cross_attention\" is true: memplan does not "
                                  "model GPT-2 with cross-attention layers; set it to false or describe the model "
                                  "with [model] keys instead of hf_config");
  }
}

TEST(HfConfig, NotAConfig) {
  {
    const ConfigFile config("{\n  \"model_type\": \"llama\",\n  \"hidden_size\": 4096,,\n}\n");
    EXPECT_EQ(config.error(), config.path() +
                                  ":3:23: error: invalid JSON in the Hugging Face config: syntax error while parsing "
                                  "object key - unexpected ','; expected string literal");
  }
  {
    const ConfigFile config("[1, 2]");
    EXPECT_EQ(config.error(), config.path() +
                                  ": error: Hugging Face config: the file holds an array, not a JSON object; "
                                  "'hf_config' names a transformers config.json");
  }
}

TEST(HfConfig, ScenarioErrors) {
  TempDir dir;
  const std::string scenario = dir.path() + "/s.toml";
  EXPECT_EQ(error_of(replaced(std::string(kInfer), "MODEL", "hf_config = \"nope/config.json\""), scenario),
            scenario + ":3:13: error: in [model], 'hf_config' names a file that cannot be read: " + dir.path() +
                "/nope/config.json (it does not exist); paths are relative to the scenario file's folder");
  dir.write("models/README", "");
  EXPECT_EQ(error_of(replaced(std::string(kInfer), "MODEL", "hf_config = \"models\""), scenario),
            scenario + ":3:13: error: in [model], 'hf_config' names a file that cannot be read: " + dir.path() +
                "/models (it is a folder, not a file); paths are relative to the scenario file's folder");
  EXPECT_EQ(error_of(replaced(std::string(kInfer), "MODEL",
                              "preset = \"llama-2-7b\"\nhf_config = \"llama-2-7b/config.json\""),
                     fixtures() + "/s.toml"),
            fixtures() + "/s.toml:4:13: error: in [model], 'hf_config' conflicts with 'preset'; give one of them "
                         "(keys in [model] may override either)");
  EXPECT_EQ(error_of(replaced(std::string(kInfer), "MODEL", "hf_config = \"llama-2-7b/config.json\"\nparams = 7e9"),
                     fixtures() + "/s.toml"),
            fixtures() + "/s.toml:2:1: error: [model] gives both 'params' and architecture keys; give one or the "
                         "other (a preset or an hf_config counts as architecture)");
  EXPECT_EQ(error_of(replaced(std::string(kInfer), "MODEL", "hf_config = 7"), scenario),
            scenario + ":3:13: error: in [model], 'hf_config' must be a string, not an integer");
}

}  // namespace
}  // namespace memplan::testing
