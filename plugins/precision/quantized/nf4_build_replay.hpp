// What building a QLoRA model on the GPU leaves in the caching allocator:
// torchtune's single-device recipes make the model under the GPU as default
// device and quantize each adapted weight with torchao's to_nf4 as it is
// made, so the set-up's working memory and the segments it leaves depend on
// the order of thousands of requests of a few sizes, not on one matrix. This
// replays that order through the allocator's block rules
// (memplan/support/caching_allocator.hpp) and returns the high point, what
// stays allocated, and the segments mapped.
//
// The order (torchtune, read at v0.1.0 and f9f75bb56 = 0.2.1):
//   build  lora_llama2 / lora_llama3 (models/*/_component_builders.py) make
//          one decoder layer: attention's q, k, v, o, then the MLP's
//          matrices, each a bf16 nn.Linear on the GPU that LoRALinear
//          (_create_weight_and_bias, modules/peft/lora.py) passes to to_nf4
//          and drops; then the embedding and the head (bf16); then
//          TransformerDecoder's _get_clones deep-copies the layer per layer
//          (modules/transformer.py), and every NF4 weight's clone is
//          torchtune's override to_nf4(get_original_weight())
//          (_register_nf4_dispatch_ops.py); the template layer is dropped
//          when the builder returns (`clones`). torchtune's Llama 3.1
//          builders from 0.3.1 list the layers instead, each made and
//          quantized in turn, no template and no clone (`layers`).
//   load   with torchao < 0.2.0 torchtune's inplace_copy quantizes each NF4
//          weight again: to_nf4 of the checkpoint tensor moved to the GPU,
//          whose blocks replace the weight's (`quantize_at_load`); torchao's
//          own copy_ (0.2.0 on) quantizes the CPU tensor and copies the
//          results into the weight's storage: nothing on the GPU.
// to_nf4 (torchao dtypes/nf4tensor.py, NF4Tensor.from_tensor) on a bf16
// matrix of n weights (bytes):
//   double_quantize_scalers  get_block_absmax: |x| (2n) and the blocks' max
//          (values n/32, indices n/8); the scalers less their mean (n/32);
//          the 256-scaler blocks' absmax, 2 x absmax and 256 / it (n/32
//          each), the product, round, clamp (n/32 each, one after another),
//          the int8 scalers kept (n/64)
//   convert_to_norm_float_weight  |x| and max again; the scaled blocks (2n);
//          quantize_tensor_nearest: (value - nf4) and its abs, two (n, 16)
//          bf16 tensors (32n each), min (values 2n, int64 indices 8n); at
//          v0.1 on the whole matrix, then the packing: indices[::2] << 4 and
//          | indices[1::2] (int64, 4n each), the uint8 data kept (n/2); from
//          torchao 0.2.0 (6081796bc, "perform in chunks") the comparison runs
//          on CHUNK_SIZE = 2^20 weights at a time into a uint8 buffer (n),
//          and the packing works on uint8 (n/2, then the data kept, n/2)
// get_original_weight (a clone's source): the data >> 4 and & 15 (n/2
//   each), each to int64 (4n), the NF4 values looked up (n each), the
//   scalers dequantized (n/32 twice), the repeated scalers flattened and
//   the products (n each), the stacked bf16 weight (2n).
// Requests of 1 MiB or less are the small pool's, left out; so are the LoRA
// adapters and norms (a rank-8 adapter of a 4096-wide matrix is 64 KiB).
#pragma once

#include <memplan/support/caching_allocator.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

namespace memplan::plugins::quantized {

enum class BuildOrder : uint8_t { clones, layers };

// One linear weight of a decoder layer, in the order the builder makes them.
struct LayerWeight {
  double elements = 0;
  bool quantized = true;  // an adapted (LoRALinear) weight: NF4; else a bf16 nn.Linear
};

struct Nf4Build {
  std::vector<LayerWeight> layer;  // one decoder layer's linear weights
  int64_t layers = 0;
  double embedding_bytes = 0;  // the token embedding (bf16)
  double head_bytes = 0;       // an untied head (bf16); 0 when tied
  BuildOrder order = BuildOrder::clones;
  double chunk = 0;            // weights per comparison; 0: the whole matrix (torchao < 0.2.0)
  bool quantize_at_load = false;
};

struct Nf4BuildReplay {
  double high = 0;      // the most allocated at once (rounded sizes)
  double alive = 0;     // allocated when the build and load end: the model's large tensors
  double reserved = 0;  // the segments mapped, which stay
  double largest_free = 0;  // the largest block left free in them when the build and load end
  bool valid = false;   // false: the table overflowed (more blocks than it tracks)
};

// Blocks tracked at once: the kept NF4 data of every layer (7 per layer)
// beside the free remainders between them.
inline constexpr size_t kNf4BuildBlocks = 4096;

namespace nf4_build_detail {

using Blocks = support::CachingAllocatorBlocks<kNf4BuildBlocks>;

// Ids for the replay: every tensor a fresh one (0 is the table's "left out").
class Tensors {
 public:
  explicit Tensors(Blocks& blocks) : blocks_(blocks) {}
  uint32_t allocate(double bytes) { return blocks_.allocate(++next_, bytes); }
  void release(uint32_t id) { blocks_.release(id); }

 private:
  Blocks& blocks_;
  uint32_t next_ = 0;
};

// What stays of one NF4 weight: the int8 scalers and the packed data.
struct Nf4Weight {
  uint32_t scalers = 0, data = 0;
};

// get_block_absmax of m weights in blocks of `block`: |x| freed, the max's
// indices freed; returns the values.
inline uint32_t block_absmax(Tensors& t, double m, double block) {
  const uint32_t magnitude = t.allocate(2 * m);
  const uint32_t values = t.allocate(m / block * 2);
  const uint32_t indices = t.allocate(m / block * 8);
  t.release(magnitude);
  t.release(indices);
  return values;
}

// quantize_tensor_nearest on m weights: (value - nf4) and its abs, two (m, 16)
// bf16 tensors, then min's values and int64 indices; returns the indices.
inline uint32_t nearest_codes(Tensors& t, double m) {
  const uint32_t difference = t.allocate(32 * m);
  const uint32_t magnitude = t.allocate(32 * m);
  t.release(difference);
  const uint32_t min_values = t.allocate(2 * m);
  const uint32_t indices = t.allocate(8 * m);
  t.release(magnitude);
  t.release(min_values);
  return indices;
}

inline Nf4Weight to_nf4(Tensors& t, double n, double chunk) {
  Nf4Weight kept;
  // double_quantize_scalers
  const double scalers = n / 64;
  const uint32_t first = block_absmax(t, n, 64);
  const uint32_t centred = t.allocate(scalers * 2);
  t.release(first);
  const uint32_t absmax = block_absmax(t, scalers, 256);
  const uint32_t doubled = t.allocate(scalers * 2);
  const uint32_t factor = t.allocate(scalers * 2);
  t.release(doubled);
  const uint32_t product = t.allocate(scalers * 2);
  const uint32_t rounded = t.allocate(scalers * 2);
  t.release(product);
  const uint32_t clamped = t.allocate(scalers * 2);
  t.release(rounded);
  kept.scalers = t.allocate(scalers);
  t.release(clamped);
  t.release(factor);
  t.release(centred);
  t.release(absmax);
  // convert_to_norm_float_weight
  const uint32_t block_max = block_absmax(t, n, 64);
  const uint32_t scaled = t.allocate(2 * n);
  if (chunk <= 0) {
    const uint32_t indices = nearest_codes(t, n);
    const uint32_t shifted = t.allocate(4 * n);
    const uint32_t combined = t.allocate(4 * n);
    t.release(shifted);
    kept.data = t.allocate(n / 2);
    t.release(combined);
    t.release(indices);
  } else {
    const uint32_t codes = t.allocate(n);
    // Every chunk frees what it allocates, and its blocks merge back: from the
    // second full chunk on, each finds the blocks the one before left and
    // places its requests the same way. Two full chunks and the last, shorter
    // one replay them all (a 405B model's MLP matrix has 832).
    const double full = std::floor(n / chunk);
    const double tail = n - full * chunk;
    for (int i = 0; i < static_cast<int>(std::min(full, 2.0)) + (tail > 0 ? 1 : 0); ++i) {
      const double m = i < std::min(full, 2.0) ? chunk : tail;
      const uint32_t indices = nearest_codes(t, m);
      const uint32_t as_uint8 = t.allocate(m);
      t.release(indices);
      t.release(as_uint8);
    }
    const uint32_t shifted = t.allocate(n / 2);
    kept.data = t.allocate(n / 2);
    t.release(shifted);
    t.release(codes);
  }
  t.release(scaled);
  t.release(block_max);
  return kept;
}

// The bf16 weight get_original_weight rebuilds, for a clone.
inline uint32_t original_weight(Tensors& t, double n) {
  const uint32_t high_bits = t.allocate(n / 2);
  const uint32_t first = t.allocate(4 * n);
  t.release(high_bits);
  const uint32_t low_bits = t.allocate(n / 2);
  const uint32_t second = t.allocate(4 * n);
  t.release(low_bits);
  const uint32_t first_values = t.allocate(n);
  const uint32_t second_values = t.allocate(n);
  const uint32_t divided = t.allocate(n / 32);
  const uint32_t scalers = t.allocate(n / 32);
  t.release(divided);
  const uint32_t repeated_first = t.allocate(n);
  const uint32_t first_scaled = t.allocate(n);
  t.release(repeated_first);
  const uint32_t repeated_second = t.allocate(n);
  const uint32_t second_scaled = t.allocate(n);
  t.release(repeated_second);
  const uint32_t weight = t.allocate(2 * n);
  for (uint32_t id : {first, second, first_values, second_values, scalers, first_scaled, second_scaled})
    t.release(id);
  return weight;
}

}  // namespace nf4_build_detail

inline Nf4BuildReplay replay_nf4_build(const Nf4Build& build) {
  using namespace nf4_build_detail;
  auto blocks = std::make_unique<Blocks>(/*skip_small=*/true);
  Tensors t(*blocks);
  struct Kept {
    Nf4Weight nf4;
    uint32_t plain = 0;  // a bf16 weight (not quantized)
  };
  // One layer's weights made in order: from nothing (a new nn.Linear) or, for
  // a clone, from `source` (the template's weights).
  const auto make_layer = [&](const std::vector<Kept>* source) {
    std::vector<Kept> layer;
    layer.reserve(build.layer.size());
    for (const LayerWeight& weight : build.layer) {
      Kept kept;
      if (!weight.quantized) {
        kept.plain = t.allocate(2 * weight.elements);  // nn.Linear's weight, or its clone
      } else {
        const uint32_t made = source ? original_weight(t, weight.elements) : t.allocate(2 * weight.elements);
        kept.nf4 = to_nf4(t, weight.elements, build.chunk);
        t.release(made);
      }
      layer.push_back(kept);
    }
    return layer;
  };
  std::vector<std::vector<Kept>> layers;
  layers.reserve(static_cast<size_t>(std::max<int64_t>(build.layers, 0)));
  if (build.order == BuildOrder::clones) {
    const std::vector<Kept> template_layer = make_layer(nullptr);
    t.allocate(build.embedding_bytes);
    t.allocate(build.head_bytes);
    for (int64_t i = 0; i < build.layers; ++i) layers.push_back(make_layer(&template_layer));
    for (const Kept& kept : template_layer) {
      t.release(kept.plain);
      t.release(kept.nf4.scalers);
      t.release(kept.nf4.data);
    }
  } else {
    for (int64_t i = 0; i < build.layers; ++i) layers.push_back(make_layer(nullptr));
    t.allocate(build.embedding_bytes);
    t.allocate(build.head_bytes);
  }
  if (build.quantize_at_load) {
    for (std::vector<Kept>& layer : layers)
      for (size_t i = 0; i < layer.size(); ++i) {
        if (!build.layer[i].quantized) continue;  // a bf16 weight takes the checkpoint's values in place
        const uint32_t moved = t.allocate(2 * build.layer[i].elements);
        const Nf4Weight fresh = to_nf4(t, build.layer[i].elements, build.chunk);
        t.release(layer[i].nf4.scalers);
        t.release(layer[i].nf4.data);
        layer[i].nf4 = fresh;
        t.release(moved);
      }
  }
  const support::AllocatorReplay replay = blocks->result();
  return {replay.alive_high, blocks->alive(), replay.reserved, blocks->largest_free(), replay.valid};
}

}  // namespace memplan::plugins::quantized
