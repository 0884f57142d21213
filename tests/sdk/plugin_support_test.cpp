// The plugin support library (sdk/support/include/memplan/support,
// memplan::plugin_support), header by header, against a small fake host: each
// expected figure is derived beside its assertion from a source or by hand.
// The helpers moved from plugins/ (step temporaries, tensor shapes, the
// element-wise optimizer, precision recipes, sharding) keep their own tests
// through the built-in plugins that use them (tests/optimizers,
// tests/precision, tests/strategies), with unchanged figures.
#include <memplan/support/backward_gradients.hpp>
#include <memplan/support/expert_padding.hpp>
#include <memplan/support/format.hpp>
#include <memplan/support/items.hpp>
#include <memplan/support/kv_heads.hpp>
#include <memplan/support/layout.hpp>
#include <memplan/support/optimizer_states.hpp>
#include <memplan/support/timeline.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace {

namespace sdk = memplan::sdk;
namespace support = memplan::support;

// What a plugin sees of a host, no more: a model, a plan array, integer
// attributes by handle, interned names, a fixed timeline. The ctx pointer the
// SDK passes back is the FakeHost itself.
class FakeHost {
 public:
  FakeHost() {
    table_.struct_size = sizeof table_;
    table_.abi_major = MEMPLAN_ABI_MAJOR;
    table_.abi_minor = MEMPLAN_ABI_MINOR;
    table_.report_error = [](memplan_ctx* ctx, const char*, const char* message) { self(ctx).error = message; };
    table_.model = [](memplan_ctx* ctx) -> const memplan_model* { return &self(ctx).model; };
    table_.workload = [](memplan_ctx* ctx) -> const memplan_workload* { return &self(ctx).workload; };
    table_.intern = [](memplan_ctx* ctx, const char* name) -> const char* {
      return self(ctx).names_.emplace_back(name).c_str();
    };
    table_.plan_items = [](memplan_ctx* ctx, size_t* count, size_t* stride) -> memplan_item* {
      *count = self(ctx).plan.size();
      *stride = sizeof(memplan_item);
      return self(ctx).plan.data();
    };
    table_.add_items = [](memplan_ctx* ctx, const memplan_item* items, size_t count) {
      self(ctx).plan.insert(self(ctx).plan.end(), items, items + count);
      return MEMPLAN_OK;
    };
    table_.attr_handle = [](memplan_ctx* ctx, const char* key) {
      std::vector<std::string>& keys = self(ctx).keys_;
      for (size_t i = 0; i < keys.size(); ++i)
        if (keys[i] == key) return static_cast<int32_t>(i);
      keys.emplace_back(key);
      return static_cast<int32_t>(keys.size() - 1);
    };
    table_.get_attr_int_at = [](memplan_ctx* ctx, int32_t handle, int64_t* out) {
      const auto& ints = self(ctx).ints_;
      const auto found = ints.find(self(ctx).keys_.at(static_cast<size_t>(handle)));
      if (found == ints.end()) return MEMPLAN_ABSENT;
      *out = found->second;
      return MEMPLAN_OK;
    };
    table_.timeline = [](memplan_ctx* ctx, memplan_timeline* out) {
      *out = self(ctx).timeline;
      return MEMPLAN_OK;
    };
    model.struct_size = sizeof model;
    workload.struct_size = sizeof workload;
    timeline.struct_size = sizeof timeline;
  }

  void set_int(const char* key, int64_t value) { ints_[key] = value; }
  sdk::Options options() { return sdk::Options(&table_, ctx()); }
  sdk::Context context() { return sdk::Context(&table_, ctx()); }

  memplan_model model{};
  memplan_workload workload{};
  memplan_timeline timeline{};
  std::vector<memplan_item> plan;
  std::string error;

 private:
  memplan_ctx* ctx() { return reinterpret_cast<memplan_ctx*>(this); }
  static FakeHost& self(memplan_ctx* ctx) { return *reinterpret_cast<FakeHost*>(ctx); }

  memplan_host table_{};
  std::deque<std::string> names_;  // a deque: interned names keep their address
  std::vector<std::string> keys_;
  std::map<std::string, int64_t> ints_;
};

memplan_item raw_item(sdk::Role role, sdk::Device device, double elements, double bytes_per_element,
                      uint32_t count = 1) {
  memplan_item item{};
  item.struct_size = sizeof item;
  item.name = "item";
  item.role = static_cast<int32_t>(role);
  item.device = static_cast<int32_t>(device);
  item.layer = -1;
  item.count = count;
  item.elements = elements;
  item.bytes_per_element = bytes_per_element;
  return item;
}

// ------------------------------------------------------------------ sdk.hpp: the host's structs

// A host built before a field of memplan_model existed hands a smaller struct
// (struct_size up to the fields it knows); the SDK copies that much and
// zero-fills the rest, so a plugin reads 0 for every later field, whatever
// lies in memory past it (sdk.hpp HostView::sized_copy; plugin_abi.h: "a
// smaller struct_size means 0"). The FakeHost's struct holds nonzero values
// past the cut to show they are not read.
TEST(SdkHostStructs, AnOlderHostsSmallerModelReadsAsZeroPastIt) {
  FakeHost host;
  host.model.layers = 32;
  host.model.shared_expert_ffn_hidden = 2048;
  host.model.layer_norms = 4;
  host.model.attn_logit_softcapping = 50;
  host.model.final_logit_softcapping = 30;
  host.model.norm_scale_fp32 = 1;
  // A host of the first ABI 1.3 landing: its struct ends after shared_expert_ffn_hidden.
  host.model.struct_size = static_cast<uint32_t>(offsetof(memplan_model, layer_norms));
  const memplan_model first = host.options().model();
  EXPECT_EQ(first.struct_size, sizeof(memplan_model));
  EXPECT_EQ(first.layers, 32);
  EXPECT_EQ(first.shared_expert_ffn_hidden, 2048);
  EXPECT_EQ(first.layer_norms, 0);
  EXPECT_EQ(first.attn_logit_softcapping, 0.0);
  EXPECT_EQ(first.final_logit_softcapping, 0.0);
  EXPECT_EQ(first.norm_scale_fp32, 0);
  // A host with the soft-capping fields but not norm_scale_fp32.
  host.model.struct_size = static_cast<uint32_t>(offsetof(memplan_model, norm_scale_fp32));
  const memplan_model capped = host.options().model();
  EXPECT_EQ(capped.layer_norms, 4);
  EXPECT_EQ(capped.final_logit_softcapping, 30.0);
  EXPECT_EQ(capped.norm_scale_fp32, 0);
  // The whole struct: every field as the host wrote it.
  host.model.struct_size = sizeof(memplan_model);
  EXPECT_EQ(host.options().model().norm_scale_fp32, 1);
}

// ------------------------------------------------------------------ kv_heads.hpp

// vLLM ModelConfig.get_num_kv_heads: max(1, total_num_kv_heads // tensor_parallel_size).
TEST(SupportKvHeads, FewerKvHeadsThanRanksKeepOneReplicatedHeadPerRank) {
  // 8 kv heads at tp 16: max(1, 8 // 16) = max(1, 0) = 1 head per rank; the
  // heads are shared out over 8 ranks, each head replicated on 16 / 8 = 2.
  EXPECT_EQ(support::kv_heads_per_rank(8, 16), 1);
  EXPECT_EQ(support::kv_ways<int64_t>(8, 16), 8);
  // A rank holds one of 8 heads: 1/8 of the k and v projections.
  EXPECT_EQ(support::kv_fraction(8, 16), 0.125);
  // Multi-query attention (Shazeer 2019, 1 kv head) at tp 8: the head on every rank.
  EXPECT_EQ(support::kv_heads_per_rank(1, 8), 1);
  EXPECT_EQ(support::kv_fraction(1, 8), 1.0);
}

TEST(SupportKvHeads, AtLeastAsManyKvHeadsAsRanksAreSharedOut) {
  // Llama-2-70B (grouped-query attention with 8 kv heads: num_key_value_heads
  // = 8 in meta-llama/Llama-2-70b-hf config.json) at tp 8: 8 // 8 = 1 head per
  // rank; at tp 4: 8 // 4 = 2.
  EXPECT_EQ(support::kv_heads_per_rank(8, 8), 1);
  EXPECT_EQ(support::kv_heads_per_rank(8, 4), 2);
  EXPECT_EQ(support::kv_fraction(8, 4), 0.25);  // 2 of 8 heads
  // Llama-2-7B (multi-head, 32 kv heads) at tp 8: 32 // 8 = 4, 1/8 of k and v.
  EXPECT_EQ(support::kv_heads_per_rank(32, 8), 4);
  EXPECT_EQ(support::kv_fraction(32, 8), 0.125);
  // One rank keeps every head.
  EXPECT_EQ(support::kv_heads_per_rank(8, 1), 8);
  EXPECT_EQ(support::kv_fraction(8, 1), 1.0);
}

TEST(SupportKvHeads, UnknownKvHeadsSplitLikeEveryProjectionAndUnevenSizesRoundUp) {
  // kv_heads 0: a model without architecture; split t ways like q.
  EXPECT_EQ(support::kv_ways<int64_t>(0, 4), 4);
  // The activation models keep shapes in doubles: the same comparison.
  EXPECT_EQ(support::kv_ways<double>(8.0, 16.0), 8.0);
  EXPECT_EQ(support::kv_ways<double>(8.0, 2.0), 2.0);
  // 12 kv heads at tp 8 (the tensor-parallel plugin refuses it): vLLM's floor
  // would give 12 // 8 = 1 and lose 4 heads; rounded up, ceil(1.5) = 2.
  EXPECT_EQ(support::kv_heads_per_rank(12, 8), 2);
}

// ------------------------------------------------------------ expert_padding.hpp

// vLLM's mxfp4 MoE on Marlin (mxfp4.py create_weights): a rank's intermediate
// size rounded up to 128, the hidden size to 256. gpt-oss-120b (h 2880,
// expert intermediate 2880, gated) at TP 4: 720 -> 768 a rank, 2880 -> 3072;
// a rank's matrices 768 x 3072 = 2,359,296 of the unsplit 2880 x 2880 =
// 8,294,400 (0.28444...), its biases 2 x 768 + 3072 / 4 = 2304 of 2 x 2880 +
// 2880 = 8640 (0.26666...).
TEST(SupportExpertPadding, ARanksShareIsPaddedForItsKernels) {
  memplan_model model{};
  model.hidden = 2880;
  model.expert_ffn_hidden = 2880;
  model.gated_mlp = 1;
  const support::ExpertPadding marlin{.intermediate = 128, .hidden = 256};
  EXPECT_DOUBLE_EQ(support::expert_share(model, false, 4, marlin), 2'359'296.0 / 8'294'400.0);
  EXPECT_DOUBLE_EQ(support::expert_share(model, true, 4, marlin), 2304.0 / 8640.0);
  // One rank: 2880 -> 2944 and 3072: 9,043,968 of 8,294,400.
  EXPECT_DOUBLE_EQ(support::expert_share(model, false, 1, marlin), 2944.0 * 3072.0 / 8'294'400.0);
  // Re-split from one rank's padded item to four ranks': 768 / 2944.
  EXPECT_DOUBLE_EQ(support::expert_resplit(model, false, 1, 4, marlin), 768.0 / 2944.0);
  // Triton's 64 on the intermediate alone: at TP 2, 1440 -> 1472 (1472 / 2880 of the matrices).
  const support::ExpertPadding triton{.intermediate = 64, .hidden = 1};
  EXPECT_DOUBLE_EQ(support::expert_share(model, false, 2, triton), 1472.0 / 2880.0);
  EXPECT_DOUBLE_EQ(support::expert_share(model, false, 1, triton), 1.0);  // 2880 = 45 x 64
  // No padding: 1 / split, and a re-split is the ratio of the splits.
  EXPECT_TRUE(support::ExpertPadding{}.none());
  EXPECT_DOUBLE_EQ(support::expert_share(model, true, 8, {}), 0.125);
  EXPECT_DOUBLE_EQ(support::expert_resplit(model, false, 4, 2, {}), 2.0);
}

// -------------------------------------------------------- backward_gradients.hpp

// The text 'zero' writes and 'comm-buffers' reads: the high point's gathered
// bytes, then "elements bytes" per step, whole numbers (the nearest: 2.5e-3
// and 0.4 write 0, 7.5 writes 8), a capacity kept between records.
TEST(SupportBackwardGradients, RoundTripsTheRecordInWholeNumbers) {
  using support::backward_gradients::Step;
  const std::vector<Step> steps{{28'325'376, 1'461'854'208}, {0.4, 2.5e-3}, {4'194'304, 7.5}};
  std::string text;
  support::backward_gradients::encode(65'536'000, steps, text);
  EXPECT_EQ(text, "65536000 28325376 1461854208 0 0 4194304 8");
  support::backward_gradients::Record record;
  ASSERT_TRUE(support::backward_gradients::decode(text, record));
  EXPECT_EQ(record.peak_gathered_bytes, 65'536'000);
  ASSERT_EQ(record.steps.size(), 3u);
  EXPECT_EQ(record.steps[0].elements, 28'325'376);
  EXPECT_EQ(record.steps[0].gathered_bytes, 1'461'854'208);
  EXPECT_EQ(record.steps[1].elements, 0);
  EXPECT_EQ(record.steps[2].gathered_bytes, 8);
  // 2^53 + 2 (a double's integers are exact up to 2^53, even ones up to 2^54): written and read back as is.
  support::backward_gradients::encode(9'007'199'254'740'994.0, std::vector<Step>{}, text);
  EXPECT_EQ(text, "9007199254740994");
  ASSERT_TRUE(support::backward_gradients::decode(text, record));
  EXPECT_EQ(record.peak_gathered_bytes, 9'007'199'254'740'994.0);
  EXPECT_TRUE(record.steps.empty());  // no gradient (a frozen model)
}

// What is not a record reads as none (false, the record empty), never as a
// partial one: an unpaired step, a word, a sign, a decimal point, a number too
// large for 64 bits, a separator other than one space (a leading, trailing or
// doubled one included), nothing at all.
TEST(SupportBackwardGradients, RejectsWhatIsNotARecord) {
  support::backward_gradients::Record record;
  for (const char* bad : {"", "5 1", "5 1 2 3", "5 1 x", "-1", "+1", "5 -1 2", "5 1.5 2", "5 1 2.5.5 7", "5,1,2",
                          "5 1 2 z", " 5", "5 ", "5  1 2", "5\t1 2", "99999999999999999999"}) {
    record.peak_gathered_bytes = 99;
    record.steps.assign(2, {1, 1});
    EXPECT_FALSE(support::backward_gradients::decode(bad, record)) << bad;
    EXPECT_EQ(record.peak_gathered_bytes, 0) << bad;
    EXPECT_TRUE(record.steps.empty()) << bad;
  }
}

// ------------------------------------------------------------------- format.hpp

TEST(SupportFormat, NumbersAsPrintfGeneral) {
  // "%g": 6 significant digits, trailing zeros dropped, exponent from 1e6 on.
  EXPECT_EQ(support::number(0.9), "0.9");
  EXPECT_EQ(support::number(-1), "-1");
  EXPECT_EQ(support::number(1e9), "1e+09");
  EXPECT_EQ(support::number(0.1234567), "0.123457");
  EXPECT_EQ(support::number(16), "16");
}

TEST(SupportFormat, GibIsTwoToTheThirtyBytesWithTwoDecimals) {
  EXPECT_EQ(support::kGiB, 1073741824.0);  // 2^30
  EXPECT_EQ(support::kMiB, 1048576.0);     // 2^20
  EXPECT_EQ(support::gib(2.0 * 1073741824.0), "2.00 GiB");
  EXPECT_EQ(support::gib(1.5 * 1073741824.0), "1.50 GiB");
  // An 80 GB H100: 80e9 / 2^30 = 74.5058... GiB.
  EXPECT_EQ(support::gib(80e9), "74.51 GiB");
  EXPECT_EQ(support::gib(0), "0.00 GiB");
}

// -------------------------------------------------------------------- items.hpp

TEST(SupportItems, BytesAreTheCeilingOfElementsTimesSizeTimesCount) {
  sdk::Item item;
  // 7 int4 elements: ceil(7 x 0.5) = ceil(3.5) = 4 bytes, x 32 layers = 128.
  item.elements = 7;
  item.bytes_per_element = 0.5;
  item.count = 32;
  EXPECT_EQ(support::bytes(item), 128.0);
  // 10^9 bf16 elements, one instance: 2 x 10^9 bytes.
  item.elements = 1e9;
  item.bytes_per_element = 2;
  item.count = 1;
  EXPECT_EQ(support::bytes(item), 2e9);
  // The in-place view gives the same.
  memplan_item raw = raw_item(sdk::Role::weights, sdk::Device::gpu, 7, 0.5, 32);
  EXPECT_EQ(support::bytes(sdk::ItemRef(&raw)), 128.0);
  EXPECT_EQ(support::instance_bytes(sdk::ItemRef(&raw)), 4.0);  // one of the 32 layers: ceil(3.5)
}

// ceil_nonnegative must equal std::ceil bit for bit on every non-negative
// double below 2^62 (the host's largest item), or the allocator's rounding
// would drift from what it was: compared as bit patterns, so -0.0 and +0.0
// count as different.
bool same_bits(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

void expect_ceil(double x) {
  EXPECT_TRUE(same_bits(support::ceil_nonnegative(x), std::ceil(x)))
      << "x = " << std::hexfloat << x << ": got " << support::ceil_nonnegative(x) << ", std::ceil " << std::ceil(x);
}

TEST(SupportItems, CeilNonnegativeIsStdCeilBitForBit) {
  const double two52 = 0x1p52, two53 = 0x1p53, two62 = 0x1p62;
  // Exact integers come back unchanged, zero of either sign included.
  for (double x : {0.0, -0.0, 1.0, 2.0, 3.0, 512.0, 2097152.0, 1e9, 2e9, two52 - 1, two52, two52 + 1, two53 - 1, two53,
                   two53 + 2, two62})
    expect_ceil(x);
  // Halves: x.5 rounds up to x + 1, up to 2^52 - 0.5, the largest double with a fraction.
  for (double x : {0.5, 1.5, 2.5, 3.5, 1023.5, 0x1p31 + 0.5, 0x1p51 + 0.5, two52 - 0.5}) expect_ceil(x);
  // Tiny fractions above an integer and just below one.
  for (double x : {5e-324, 1e-300, 0x1p-1022, 1e-9, std::nextafter(1.0, 2.0), std::nextafter(1.0, 0.0),
                   std::nextafter(1e9, 2e9), std::nextafter(1e9, 0.0), 1e6 + 1e-7, std::nextafter(two52, 0.0),
                   std::nextafter(0x1p40, two52)})
    expect_ceil(x);
  // Around 2^53 + 1, the first integer a double cannot hold: 2^53 - 1, 2^53,
  // 2^53 + 2 (what 2^53 + 1 rounds to) and their neighbours, and up to 2^62.
  for (double x : {std::nextafter(two53, 0.0), std::nextafter(two53, two62), two53 + 1.0, two53 + 3.0,
                   std::nextafter(two62, 0.0)})
    expect_ceil(x);
  // NaN and infinity pass through as std::ceil passes them.
  EXPECT_TRUE(std::isnan(support::ceil_nonnegative(std::nan(""))));
  expect_ceil(std::numeric_limits<double>::infinity());
  // Every eighth from 0 to 1000, and a million doubles spread over every
  // binade from 2^-1074 to 2^62 (a fixed linear congruential sequence of bit
  // patterns, so a failure is reproducible).
  for (int k = 0; k <= 8000; ++k) expect_ceil(k / 8.0);
  uint64_t state = 0x9E3779B97F4A7C15u;
  const uint64_t below = std::bit_cast<uint64_t>(two62);
  for (int i = 0; i < 1'000'000; ++i) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    const double x = std::bit_cast<double>((state >> 1) % below);
    if (!same_bits(support::ceil_nonnegative(x), std::ceil(x))) {
      expect_ceil(x);
      break;
    }
  }
}

TEST(SupportItems, ByteItemsAreOneBytePerElementAndEmptyOnesAreSkippedOnRequest) {
  FakeHost host;
  sdk::Context ctx = host.context();
  const sdk::Name name = ctx.intern("nccl.buffers");
  EXPECT_FALSE(support::add_bytes_if_any(ctx, {.name = name, .bytes = 0}));
  EXPECT_TRUE(host.plan.empty());
  EXPECT_TRUE(support::add_bytes_if_any(ctx, {.name = name, .pool = sdk::Pool::device, .count = 3, .bytes = 4096}));
  support::add_bytes(ctx, {.name = name, .role = sdk::Role::overhead, .bytes = 0});
  ASSERT_EQ(host.plan.size(), 2u);
  const sdk::ItemRef added(&host.plan[0]);
  EXPECT_EQ(added.name(), "nccl.buffers");
  EXPECT_EQ(added.role(), sdk::Role::buffers);
  EXPECT_EQ(added.lifetime(), sdk::Lifetime::persistent);
  EXPECT_EQ(added.pool(), sdk::Pool::device);
  EXPECT_EQ(added.layer(), -1);
  EXPECT_EQ(added.elements(), 4096.0);
  EXPECT_EQ(added.bytes_per_element(), 1.0);
  EXPECT_EQ(added.bytes(), 3 * 4096.0);  // 3 instances of 4096 bytes
  EXPECT_EQ(sdk::ItemRef(&host.plan[1]).role(), sdk::Role::overhead);  // added although empty
}

TEST(SupportItems, SumsByFilterCountWhatTheFilterKeeps) {
  FakeHost host;
  host.plan.push_back(raw_item(sdk::Role::weights, sdk::Device::gpu, 1e9, 2));           // 2e9
  host.plan.push_back(raw_item(sdk::Role::weights, sdk::Device::cpu, 1e9, 2));           // on the host
  host.plan.push_back(raw_item(sdk::Role::optimizer_states, sdk::Device::gpu, 1e9, 8));  // 8e9
  host.plan.push_back(raw_item(sdk::Role::weights, sdk::Device::gpu, 3, 0.5, 10));       // ceil(1.5) x 10 = 20
  const sdk::Context ctx = host.context();
  EXPECT_EQ(support::gpu_bytes_of(ctx, sdk::Role::weights), 2e9 + 20);
  EXPECT_EQ(support::sum_bytes(ctx, support::on_gpu), 2e9 + 8e9 + 20);
  EXPECT_EQ(support::sum_bytes(ctx, [](const sdk::ItemRef&) { return true; }), 2e9 + 2e9 + 8e9 + 20);
  EXPECT_EQ(support::sum_bytes(ctx, [](const sdk::ItemRef& item) { return item.role() == sdk::Role::kv_cache; }), 0.0);
}

// ------------------------------------------------------------------- layout.hpp

TEST(SupportLayout, WithoutLayoutPluginsOneRankHoldsEveryLayer) {
  FakeHost host;
  host.model.layers = 80;
  sdk::Options options = host.options();
  const support::LayoutReader reader(options);
  const support::Layout layout = reader.read(host.context());
  EXPECT_EQ(layout.data, 1);
  EXPECT_FALSE(layout.data_declared);
  EXPECT_EQ(layout.tensor, 1);
  EXPECT_EQ(layout.pipeline, 1);
  EXPECT_EQ(layout.context, 1);
  EXPECT_EQ(layout.expert, 1);
  EXPECT_FALSE(layout.sequence_parallel);
  EXPECT_EQ(layout.stage_layers, 80);  // the model's layers
  EXPECT_EQ(layout.inflight_microbatches, 1);
  EXPECT_TRUE(layout.stage_has_embedding);
  EXPECT_TRUE(layout.stage_has_lm_head);
  EXPECT_EQ(layout.world(), 1);
}

TEST(SupportLayout, DeclaredRanksAndStagesAreReadOnce) {
  // examples/llama2-70b-tp8-pp4-dp4-zero1.toml: TP 8 x PP 4 x DP 4 = 128 GPUs;
  // 80 layers over 4 stages = 20 on the first, which 1F1B fills with 4
  // micro-batches (Narayanan et al. 2021: stage i holds p - i).
  FakeHost host;
  host.model.layers = 80;
  host.set_int(MEMPLAN_ATTR_RANKS_DATA, 4);
  host.set_int(MEMPLAN_ATTR_RANKS_TENSOR, 8);
  host.set_int(MEMPLAN_ATTR_RANKS_PIPELINE, 4);
  host.set_int(MEMPLAN_ATTR_SEQUENCE_PARALLEL, 1);
  host.set_int(MEMPLAN_ATTR_STAGE_LAYERS, 20);
  host.set_int(MEMPLAN_ATTR_INFLIGHT_MICROBATCHES, 4);
  host.set_int(MEMPLAN_ATTR_STAGE_HAS_LM_HEAD, 0);
  sdk::Options options = host.options();
  const support::LayoutReader reader(options);
  const sdk::Context ctx = host.context();
  const support::Layout layout = reader.read(ctx);
  EXPECT_EQ(layout.data, 4);
  EXPECT_TRUE(layout.data_declared);
  EXPECT_EQ(layout.tensor, 8);
  EXPECT_EQ(layout.pipeline, 4);
  EXPECT_EQ(layout.world(), 4 * 8 * 4);
  EXPECT_EQ(layout.dense_replicas(), 4);  // data x context, context 1
  EXPECT_TRUE(layout.sequence_parallel);
  EXPECT_EQ(layout.stage_layers, 20);
  EXPECT_EQ(layout.inflight_microbatches, 4);
  EXPECT_TRUE(layout.stage_has_embedding);
  EXPECT_FALSE(layout.stage_has_lm_head);
  EXPECT_TRUE(layout.edge_stage());  // the first stage
  // The single-field readers agree with read().
  EXPECT_EQ(reader.tensor(ctx), 8);
  EXPECT_EQ(reader.stage_layers(ctx), 20);
  EXPECT_FALSE(reader.stage_has_lm_head(ctx));
}

TEST(SupportLayout, DataRanksHaveOneDefaultAndSayWhetherTheyWereDeclared) {
  // fsdp and zero used to read ranks.data with a default of 0 (to refuse an
  // undeclared group), every other plugin with 1: one reading gives both.
  FakeHost host;
  host.set_int(MEMPLAN_ATTR_RANKS_CONTEXT, 2);
  host.set_int(MEMPLAN_ATTR_EXPERT_PARALLEL, 2);
  sdk::Options options = host.options();
  const support::LayoutReader reader(options);
  support::Layout layout = reader.read(host.context());
  EXPECT_EQ(layout.data, 1);
  EXPECT_FALSE(layout.data_declared);
  EXPECT_EQ(layout.dense_replicas(), 2);  // 1 x 2 context ranks
  EXPECT_EQ(layout.expert, 2);
  host.set_int(MEMPLAN_ATTR_RANKS_DATA, 0);  // declared, but not a size
  layout = reader.read(host.context());
  EXPECT_EQ(layout.data, 1);
  EXPECT_FALSE(layout.data_declared);
  host.set_int(MEMPLAN_ATTR_RANKS_DATA, 1);  // a single GPU, declared
  layout = reader.read(host.context());
  EXPECT_EQ(layout.data, 1);
  EXPECT_TRUE(layout.data_declared);
}

// ---------------------------------------------------------- optimizer_states.hpp

TEST(SupportOptimizerStates, EveryTrainableWeightGetsItsStatesInTheStatesDtype) {
  // Adam: 2 states per parameter in fp32 (4 bytes) under mixed precision, the
  // ZeRO paper's 2 x 4 of its 16 bytes per parameter (Rajbhandari et al.
  // 2019, section 3.1).
  FakeHost host;
  memplan_item trained = raw_item(sdk::Role::weights, sdk::Device::gpu, 1000, 2, 32);
  trained.flags = MEMPLAN_ITEM_TRAINABLE;
  trained.layer = 0;
  trained.param_class = static_cast<int32_t>(sdk::ParamClass::mlp);
  memplan_item frozen = raw_item(sdk::Role::weights, sdk::Device::gpu, 500, 2);
  memplan_item gradient = raw_item(sdk::Role::gradients, sdk::Device::gpu, 1000, 2, 32);
  gradient.flags = MEMPLAN_ITEM_TRAINABLE;
  host.plan = {trained, frozen, gradient};
  sdk::Context ctx = host.context();
  sdk::ItemBatch batch;
  EXPECT_EQ(support::add_optimizer_states(ctx, batch, 2, 4), 3u);  // the items before: what a step visits
  ASSERT_EQ(host.plan.size(), 4u);  // one states item: the frozen weight and the gradient get none
  const sdk::ItemRef states(&host.plan[3]);
  EXPECT_EQ(states.role(), sdk::Role::optimizer_states);
  EXPECT_EQ(states.lifetime(), sdk::Lifetime::persistent);
  EXPECT_EQ(states.param_class(), sdk::ParamClass::mlp);  // split and sharded as its weight
  EXPECT_EQ(states.layer(), 0);
  EXPECT_EQ(states.count(), 32u);
  EXPECT_EQ(states.elements(), 2000.0);  // 2 x 1000 per layer
  EXPECT_EQ(states.bytes(), 2000.0 * 4 * 32);  // 8 bytes per parameter, 32 layers
  // Stateless (plain SGD): nothing added, and the batch is reusable.
  EXPECT_EQ(support::add_optimizer_states(ctx, batch, 0, 4), 4u);
  EXPECT_EQ(host.plan.size(), 4u);
}

// ----------------------------------------------------------------- timeline.hpp

TEST(SupportTimeline, NamesTheHostsQuantitiesAndPhases) {
  FakeHost host;
  // Made-up rows, each quantity at least the one before (an item counts in
  // its own quantity and every later one): the wrapper returns entry
  // [quantity][phase] of the host's struct and the largest of a row.
  const uint64_t rows[3][4] = {{13'000, 14'000, 13'000, 13'000},   // allocated
                               {13'200, 14'300, 13'200, 13'200},   // reserved
                               {13'700, 14'800, 13'700, 13'900}};  // device
  for (int q = 0; q < 3; ++q)
    for (int p = 0; p < 4; ++p) host.timeline.bytes[q][p] = rows[q][p];
  host.timeline.sum = 15'000;
  const support::Timeline timeline(host.context());
  EXPECT_EQ(timeline.at(support::Quantity::allocated, support::StepPhase::init), 13'000u);
  EXPECT_EQ(timeline.at(support::Quantity::reserved, support::StepPhase::forward), 14'300u);
  EXPECT_EQ(timeline.at(support::Quantity::device, support::StepPhase::optimizer), 13'900u);
  EXPECT_EQ(timeline.peak(support::Quantity::device), 14'800u);  // forward's
  EXPECT_EQ(timeline.peak(support::Quantity::allocated), 14'000u);
  EXPECT_EQ(timeline.sum(), 15'000u);
}

}  // namespace
