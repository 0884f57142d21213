// 'inference': the memory a serving engine adds to the weights on the
// reported rank, in mode = "infer":
//   - the KV cache of micro_batch concurrent sequences of seq_len tokens
//     (Kwon et al. 2023, arXiv 2309.06180), grouped-query aware, split over
//     tensor-parallel ranks as vLLM does, cut to the pipeline stage's layers,
//     capped by a sliding window for windowed layers (Jiang et al. 2023, arXiv
//     2310.06825) and rounded up to whole PagedAttention blocks;
//   - the largest forward transient of one layer, for a prefill chunk or a
//     decode step, and the fp32 logits (a first-order model);
//   - with sampler_rows > 0, what the serving engine's start-up sampler
//     warm-up holds beyond that (vLLM V1's profile_run ends with a dummy
//     sampler run over min(max_num_seqs, max_num_batched_tokens) requests,
//     masked by PyTorch's sort or, from vLLM 0.17, a Triton kernel);
//   - with moe_workspace = "persistent", vLLM's fused-MoE workspace for
//     unquantized experts (TritonExperts' workspace13 and workspace2), which its
//     WorkspaceManager keeps from the first MoE layer through the sampler run.
// It also declares the paged block (kv.block_tokens, kv.block_bytes) for
// budget plugins such as 'serving-budget'. Formulas: inference_memory.hpp and
// docs/inference.md.
#include <memplan/dtypes.hpp>
#include <memplan/sdk.hpp>
#include <memplan/support/items.hpp>
#include <memplan/support/kv_heads.hpp>
#include <memplan/support/layout.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "inference_memory.hpp"

namespace {

namespace inf = memplan::plugins::inference;
namespace support = memplan::support;
using memplan::sdk::Lifetime;
using memplan::sdk::ParamClass;
using memplan::sdk::Role;

constexpr std::array<memplan_option_spec, 20> kOptions{{
    {"kv_dtype", MEMPLAN_OPTION_STRING, "dtype of the cached keys and values: fp32, fp16, bf16, fp8 or int8",
     "the activation dtype of [precision]", nullptr},
    {"block_size", MEMPLAN_OPTION_INT,
     "tokens per paged KV block (PagedAttention); each sequence rounds up to whole blocks; 1 = no paging",
     "16 (vLLM's default)", nullptr},
    {"sliding_window", MEMPLAN_OPTION_INT, "tokens a windowed layer caches, overriding the model's; 0 = no window",
     "the model's sliding_window", nullptr},
    {"prefill_chunk", MEMPLAN_OPTION_INT,
     "tokens one forward pass processes at once (vLLM's max_num_batched_tokens)",
     "micro_batch x seq_len (whole prompts); the vllm profile, the default of serving, sets vLLM's 8192 or 2048 by GPU",
     nullptr},
    {"prefill_rule", MEMPLAN_OPTION_STRING,
     "how the tokens of a prefill pass follow from the scenario when prefill_chunk is not set: \"whole\" "
     "(micro_batch x seq_len, whole prompts) or \"context\" (one pass sized to hold a whole prompt of the "
     "context length: max(seq_len, prefill_min) tokens; prefill_long_chunk tokens once seq_len exceeds "
     "prefill_long_above; vLLM V0's max_num_batched_tokens)",
     "\"whole\"; the vllm profile sets \"context\" before 0.8", nullptr},
    {"prefill_min", MEMPLAN_OPTION_INT,
     "with prefill_rule = \"context\": the fewest tokens a pass is sized for (vLLM V0: 2048)", "1; the vllm "
     "profile sets 2048", nullptr},
    {"prefill_long_above", MEMPLAN_OPTION_INT,
     "with prefill_rule = \"context\": a context length (seq_len) above which the engine chunks prompts instead, "
     "prefill_long_chunk tokens a pass; 0 = never", "0; the vllm profile sets 32768 before 0.8", nullptr},
    {"prefill_long_chunk", MEMPLAN_OPTION_INT,
     "with prefill_rule = \"context\": tokens a pass once seq_len exceeds prefill_long_above", "none (needed when "
     "prefill_long_above > 0); the vllm profile sets 512, 2048 from 0.6.5", nullptr},
    {"logits", MEMPLAN_OPTION_STRING,
     "fp32 logits kept: \"last\" (the last position of each sequence, as vLLM's sampler) or \"all\" (every token "
     "of the chunk)",
     "\"last\"", nullptr},
    {"flash_attention", MEMPLAN_OPTION_BOOL, "attention materializes no score matrix (FlashAttention)", "true",
     nullptr},
    {"sampler_rows", MEMPLAN_OPTION_INT,
     "requests of the serving engine's start-up sampler run (vLLM's max_num_seqs; the run samples "
     "min(sampler_rows, prefill_chunk) rows over the whole vocabulary on every tensor-parallel rank); 0 = none",
     "0 (no sampler run: the papers' view); the vllm profile sets vLLM's max_num_seqs, 1024 or 256 by GPU", nullptr},
    {"sampler_path", MEMPLAN_OPTION_STRING,
     "how the sampler run masks top-k/top-p: \"sort\" (PyTorch's sort, 38 bytes per row x vocabulary entry), "
     "\"triton\" (vLLM 0.17's in-place Triton kernel, 14 bytes, for 8 rows or more) or \"flashinfer\" (vLLM V1's "
     "FlashInfer sampler where FlashInfer is installed, as vLLM's Docker images have it: a masked copy and its "
     "softmax, 14 bytes, no sort)",
     "\"sort\"; the vllm profile sets \"triton\" from version 0.17", nullptr},
    {"moe_workspace", MEMPLAN_OPTION_STRING,
     "how a MoE layer's routed-expert temporaries live when the experts are unquantized: \"transient\" (freed "
     "after each layer, counted in the layer's transient) or \"persistent\" (vLLM's fused-MoE workspace, kept by "
     "its WorkspaceManager from the first MoE layer through the sampler run; item activations.moe_workspace)",
     "\"transient\"; the vllm profile sets \"persistent\" from version 0.12", nullptr},
    {"rope_cache", MEMPLAN_OPTION_BOOL,
     "the serving engine's rotary table: one cos/sin cache of max_context x the rotary width in the activation "
     "dtype, whole on every rank (vLLM's RotaryEmbedding.cos_sin_cache, one instance shared by the layers through "
     "get_rope's cache; item rope_cache)",
     "false; the vllm profile sets true", nullptr},
    {"cache_heads", MEMPLAN_OPTION_STRING,
     "the heads the KV cache holds K and V at: \"kv\" (the model's kv heads) or \"query\" (expanded to every query "
     "head before caching: torchtune's KVCache before 0.5, modules/kv_cache.py's cache_shape with num_heads)",
     "\"kv\"; the torchtune profile: \"query\" before 0.5", "kv,query"},
    {"held_hidden_states", MEMPLAN_OPTION_INT,
     "hidden-state tensors (tokens x h) the model's own forward keeps beside a layer's while the layers run: "
     "Hugging Face transformers' decoder models keep inputs_embeds (a local of the model's forward) and the "
     "running layer's input (the loop's variable), 2 (item activations.model_held)",
     "0; the hf-transformers profile sets 2", nullptr},
    {"held_position_embeddings", MEMPLAN_OPTION_STRING,
     "position embeddings the model's forward computes once and keeps through the layers (item "
     "activations.model_held): \"none\", \"learned\" (learned ones, tokens x h: GPT-2 style models keep "
     "position_embeds beside inputs_embeds) or \"all\" (those, or rotary cos and sin, 2 x tokens x head_dim: "
     "the model's rotary_emb, transformers 4.43 for Llama, 4.45 for the others)",
     "\"none\"; the hf-transformers profile sets \"learned\", and \"all\" from 4.46", nullptr},
    {"eager_softmax", MEMPLAN_OPTION_STRING,
     "with flash_attention = false, what the softmax of eager attention holds per score element at its high "
     "point: \"dtype\" (the scores in the activation dtype, p bytes), \"fp32\" (softmax(x, dtype=float32) on a "
     "bf16 input, or AutoAWQ's softmax(scores.float()): the input, an fp32 copy and the fp32 output, p + 8) or "
     "\"half-to-float\" (the same call on an fp16 CUDA input: no copy, the input, the fp32 output and the cast "
     "back, 2p + 4)",
     "\"dtype\"; the hf-transformers profile sets \"fp32\"", nullptr},
    {"new_tokens", MEMPLAN_OPTION_INT,
     "a generate-style run: tokens generated per sequence after a prompt of seq_len - new_tokens tokens (Hugging "
     "Face's max_new_tokens). The prefill's transients then run over the prompt's cache, and the last decode step "
     "over a cache of seq_len - 1 tokens (the last token generated is never fed back); the larger moment is the "
     "peak. 0: seq_len is the cache at the moment of every transient",
     "0", nullptr},
    {"previous_cache_held", MEMPLAN_OPTION_BOOL,
     "with new_tokens >= 2: at a decode step the previous step's cache stays referenced while the layers build the "
     "new one by concatenation (transformers' generate before PR #30536: model_kwargs keeps the old "
     "past_key_values until the forward returns), so the last step holds the caches of seq_len - 2 and "
     "seq_len - 1 tokens (item kv_cache.previous)",
     "false; the hf-transformers profile sets true before 4.42", nullptr},
}};

// The KV cache dtypes a serving engine stores (vLLM's kv_cache_dtype: auto,
// i.e. the model dtype, or fp8; int8 as in TensorRT-LLM's INT8 KV cache).
constexpr std::array<const char*, 5> kKvDtypes{"fp32", "fp16", "bf16", "fp8", "int8"};

class InferenceMemory {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "inference", "1.11.0", "KV cache (paged, GQA, latent attention, sliding window) and forward transients for serving",
      memplan::sdk::Kind::activations, memplan::sdk::Phase::activations};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit InferenceMemory(memplan::sdk::Options& options)
      : block_size_(options.positive_integer("block_size", 16)),
        flash_attention_(options.boolean("flash_attention").value_or(true)),
        layout_(options),
        activation_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_ACTIVATIONS)),
        block_tokens_attr_(options.attribute(MEMPLAN_ATTR_KV_BLOCK_TOKENS)),
        block_bytes_attr_(options.attribute(MEMPLAN_ATTR_KV_BLOCK_BYTES)),
        dequantized_attr_(options.attribute(MEMPLAN_ATTR_DEQUANTIZED_TRANSIENT)),
        names_(options) {
    if (!options.model().has_architecture)
      options.fail("needs the model's architecture (layers, heads, kv_heads, head_dim) but the scenario gives only "
                   "params; use a preset or an inline architecture in [model]");
    if (options.training())
      options.fail("models inference (a KV cache and forward-only activations) but the scenario has mode = "
                   "\"train\"; set mode = \"infer\", or use [activations] use = \"megatron\" to model training");
    if (options.workload().seq_len <= 0)
      options.fail("needs the context length: set [batch] seq_len (tokens cached per sequence)");

    if (auto name = options.string("kv_dtype")) {
      const bool known = std::find_if(kKvDtypes.begin(), kKvDtypes.end(),
                                      [&](const char* d) { return *name == d; }) != kKvDtypes.end();
      if (!known)
        options.fail("kv_dtype", "is \"" + *name + "\", not a KV cache dtype; use fp32, fp16, bf16, fp8 or int8");
      kv_bytes_ = memplan::sdk::dtype_bytes(*name);
    }
    if (auto window = options.integer("sliding_window")) {
      if (*window < 0)
        options.fail("sliding_window",
                     "must be 0 (no window) or a positive number of tokens, got " + std::to_string(*window));
      window_ = *window;
    }
    if (options.integer("prefill_chunk")) prefill_chunk_ = options.positive_integer("prefill_chunk", 1);
    // The pass size when prefill_chunk is not given: whole prompts, or one
    // sized to the context length (vLLM V0's max_num_batched_tokens =
    // max(max_model_len, 2048) without chunked prefill, and chunked prefill
    // switched on above 32K; plugins/frameworks/vllm/README.md).
    const std::string rule = options.string("prefill_rule").value_or("whole");
    if (rule != "whole" && rule != "context")
      options.fail("prefill_rule", "must be \"whole\" (micro_batch x seq_len tokens a pass) or \"context\" "
                                   "(a pass sized to the context length: max(seq_len, prefill_min)), not \"" +
                                       rule + "\"");
    context_rule_ = rule == "context";
    if (options.integer("prefill_min")) prefill_min_ = options.positive_integer("prefill_min", 1);
    if (auto above = options.integer("prefill_long_above")) {
      if (*above < 0)
        options.fail("prefill_long_above",
                     "must be 0 (never chunk) or a context length in tokens, got " + std::to_string(*above));
      prefill_long_above_ = *above;
    }
    if (options.integer("prefill_long_chunk"))
      prefill_long_chunk_ = options.positive_integer("prefill_long_chunk", 1);
    if (context_rule_ && prefill_long_above_ > 0 && !prefill_long_chunk_)
      options.fail("prefill_long_above", "is " + std::to_string(prefill_long_above_) +
                                             " but prefill_long_chunk is not set: give the tokens a pass holds "
                                             "once seq_len exceeds it");
    if (prefill_min_ > 1'000'000'000)
      options.fail("prefill_min", "is " + std::to_string(prefill_min_) + ", implausibly large (the limit is "
                                  "1000000000 tokens)");
    if (auto rows = options.integer("sampler_rows")) {
      if (*rows < 0 || *rows > 1'000'000'000)
        options.fail("sampler_rows", "must be 0 (no sampler run) or a number of requests up to 1000000000 (vLLM's "
                                     "max_num_seqs, 256 or 1024 by default), got " + std::to_string(*rows));
      sampler_rows_ = *rows;
    }
    // As [batch] seq_len: far above any real value, so that block and window
    // arithmetic stays in range.
    if (block_size_ > 1'000'000)
      options.fail("block_size", "is " + std::to_string(block_size_) + ", implausibly large (the limit is 1000000 "
                                 "tokens per block; vLLM uses 16)");
    if (window_.value_or(0) > 1'000'000'000)
      options.fail("sliding_window", "is " + std::to_string(*window_) + ", implausibly large (the limit is "
                                     "1000000000 tokens)");
    const std::string path = options.string("sampler_path").value_or("sort");
    if (path != "sort" && path != "triton" && path != "flashinfer")
      options.fail("sampler_path", "must be \"sort\" (PyTorch's sort-based top-k/top-p, vLLM up to 0.16), "
                                   "\"triton\" (vLLM 0.17's Triton kernel) or \"flashinfer\" (vLLM V1 with FlashInfer "
                                   "installed: its log says \"Using FlashInfer for top-p & top-k sampling\"), not \"" +
                                       path + "\"");
    sampler_path_ = path == "triton"       ? inf::SamplerPath::triton
                    : path == "flashinfer" ? inf::SamplerPath::flashinfer
                                           : inf::SamplerPath::sort;
    const std::string workspace = options.string("moe_workspace").value_or("transient");
    if (workspace != "transient" && workspace != "persistent")
      options.fail("moe_workspace", "must be \"transient\" (each MoE layer frees its temporaries) or \"persistent\" "
                                    "(vLLM's fused-MoE workspace, kept across layers), not \"" + workspace + "\"");
    persistent_moe_workspace_ = workspace == "persistent";
    const std::string logits = options.string("logits").value_or("last");
    if (logits != "last" && logits != "all")
      options.fail("logits", "must be \"last\" or \"all\", not \"" + logits + "\"");
    all_logits_ = logits == "all";
    rope_cache_ = options.boolean("rope_cache").value_or(false);
    // torchtune's KVCache before 0.5 held K and V at the query heads (modules/kv_cache.py: cache_shape = (batch_size,
    // num_heads, max_seq_len, head_dim) @ v0.4.0, MultiHeadAttention expanding K and V before the cache; num_kv_heads
    // from PR #1961, e1caa9f82, 2024-11-10, first in v0.5.0).
    const std::string cache_heads = options.string("cache_heads").value_or("kv");
    if (cache_heads != "kv" && cache_heads != "query")
      options.fail("cache_heads", "must be \"kv\" (the model's kv heads) or \"query\" (K and V expanded to every "
                                  "query head before caching), not \"" + cache_heads + "\"");
    cache_query_heads_ = cache_heads == "query";
    if (auto held = options.integer("held_hidden_states")) {
      if (*held < 0 || *held > 16)
        options.fail("held_hidden_states", "must be a count of hidden-state tensors from 0 to 16, got " +
                                               std::to_string(*held));
      held_hidden_states_ = static_cast<double>(*held);
    }
    const std::string positions = options.string("held_position_embeddings").value_or("none");
    if (positions != "none" && positions != "learned" && positions != "all")
      options.fail("held_position_embeddings", "must be \"none\", \"learned\" or \"all\", not \"" + positions + "\"");
    held_learned_positions_ = positions != "none";
    held_rotary_tables_ = positions == "all";
    const std::string softmax = options.string("eager_softmax").value_or("dtype");
    if (softmax != "dtype" && softmax != "fp32" && softmax != "half-to-float")
      options.fail("eager_softmax", "must be \"dtype\" (the scores in the activation dtype), \"fp32\" (an fp32 "
                                    "copy and fp32 output beside the 16-bit scores) or \"half-to-float\" (fp16 "
                                    "scores, fp32 output, no copy), not \"" + softmax + "\"");
    eager_softmax_ = softmax == "fp32"            ? inf::EagerSoftmax::fp32
                     : softmax == "half-to-float" ? inf::EagerSoftmax::half_to_float
                                                  : inf::EagerSoftmax::dtype;
    if (auto generated = options.integer("new_tokens")) {
      const int64_t seq_len = options.workload().seq_len;
      if (*generated < 0 || *generated >= seq_len)
        options.fail("new_tokens", "must be 0 (seq_len is the cache throughout) or a count of generated tokens below "
                                   "seq_len (" + std::to_string(seq_len) + ": the prompt is seq_len - new_tokens, at "
                                   "least 1 token), got " + std::to_string(*generated));
      new_tokens_ = *generated;
    }
    previous_cache_held_ = options.boolean("previous_cache_held").value_or(false);
  }

  void apply(memplan::sdk::Context& ctx) {
    const memplan_model& model = ctx.model();
    const memplan_workload& workload = ctx.workload();
    const double activation_bytes = ctx.required_attr_double(activation_dtype_, MEMPLAN_ATTR_DTYPE_ACTIVATIONS);
    const double kv_bytes = kv_bytes_.value_or(activation_bytes);
    const int64_t t = layout_.tensor(ctx);
    const int64_t stage_layers = layout_.stage_layers(ctx);
    const RankWeights rank = scan_weights(ctx, activation_bytes);
    const int64_t first = rank.first_layer;
    const int64_t sequences = workload.micro_batch;
    const int64_t seq_len = workload.seq_len;

    // Which layers of the stage are windowed. A window overridden to 0 makes
    // every layer global.
    const int64_t window = window_.value_or(model.sliding_window);
    const inf::LayerMix mix =
        inf::classify_layers(first, stage_layers, window, window > 0 ? model.global_attention_every : 0);

    const inf::KvShape kv =
        model.kv_lora_rank > 0
            ? inf::latent_kv(static_cast<double>(model.kv_lora_rank), static_cast<double>(model.qk_rope_head_dim),
                             kv_bytes)
            : inf::KvShape{cache_query_heads_ ? static_cast<double>(model.heads) / static_cast<double>(t)
                                              : static_cast<double>(support::kv_heads_per_rank(model.kv_heads, t)),
                           static_cast<double>(model.head_dim), kv_bytes};
    // The cache of one layer of each kind while a pass of `pass` tokens per
    // sequence runs over a cache of `length` tokens. A windowed layer evicts
    // tokens older than the window only after a pass: while a pass of c
    // tokens runs it holds the window's last W - 1 tokens and the c new ones
    // (vLLM v1 vllm/v1/kv_cache_interface.py, SlidingWindowSpec: min(W - 1 +
    // max_num_batched_tokens, max_model_len)), in the blocks those positions
    // fall in (a window that does not start on a block boundary spans one
    // block more; vLLM reserves that block).
    const auto cache_at = [&](int64_t length, int64_t pass) {
      // min(length, W - 1 + pass), written so that no sum can overflow.
      const int64_t held = window <= 0 ? 0 : pass >= length - (window - 1) ? length : window - 1 + pass;
      const int64_t window_tokens = window > 0 ? inf::window_blocks(length, held, block_size_) * block_size_ : 0;
      const double b = static_cast<double>(sequences);
      return Cache{inf::kv_bytes_per_layer(kv, static_cast<double>(inf::paged_tokens(length, block_size_)), b),
                   inf::kv_bytes_per_layer(kv, static_cast<double>(window_tokens), b)};
    };
    const auto stage_bytes = [&](const Cache& c) {
      return c.global * static_cast<double>(mix.global_count) + c.window * static_cast<double>(mix.window_count);
    };
    // The keys a query attends to over a cache of `length` tokens.
    const auto context_at = [&](int64_t length) { return mix.global_count > 0 ? length : std::min(length, window); };

    // Per sequence, a pass is its whole prompt, or a chunk of it. Without
    // new_tokens the prompt is seq_len: the cache every transient sees.
    // The scenario's new_tokens is below its seq_len (checked when created); a search for the longest seq_len
    // evaluates shorter ones too, where the generated tokens are what fits after a prompt of one token.
    const int64_t generated = std::min(new_tokens_, seq_len - 1);
    const int64_t prompt = seq_len - generated;
    const std::optional<int64_t> chunk_tokens = prefill_tokens(seq_len);
    const Cache prefill_cache = cache_at(prompt, std::min(prompt, chunk_tokens.value_or(prompt)));
    const double chunk = static_cast<double>(chunk_tokens.value_or(sequences * prompt));
    Forward forward = forward_shape(model, t, activation_bytes, first < model.dense_layers, rank.experts,
                                          rank.quantized_experts, rank.learned_positions);
    // A precision plugin's dequantization of the largest matrix, alive while that projection runs.
    forward.shape.dequantized = ctx.attr_double(dequantized_attr_, 0);
    const double b = static_cast<double>(sequences);
    const double vocab = static_cast<double>(model.vocab);

    Cache cache = prefill_cache;
    Cache previous;
    Pass pass;
    if (generated <= 0) {
      // seq_len is the cache at every moment: the larger of the two passes'
      // transients over it.
      pass = larger_pass(forward, chunk, b, static_cast<double>(context_at(seq_len)), rank.lm_head, vocab, t);
    } else {
      // A generate-style run (transformers' generate, new_tokens after a
      // prompt): the prefill runs over the prompt's cache; decode step k feeds
      // generated token k (1 <= k < new_tokens) and leaves prompt + k tokens
      // cached, so the last step (there is one from new_tokens = 2) holds
      // seq_len - 1 tokens, and, with previous_cache_held, the previous step's
      // cache of seq_len - 2 beside it. The moments do not overlap: the items
      // are those of the larger.
      pass = prefill_pass(forward, chunk, b, static_cast<double>(context_at(prompt)), rank.lm_head, vocab, t);
      if (generated >= 2) {
        const Cache last = cache_at(seq_len - 1, 1);
        const Cache before = previous_cache_held_ ? cache_at(seq_len - 2, 1) : Cache{};
        const Pass step = decode_pass(forward, b, static_cast<double>(context_at(seq_len - 1)), rank.lm_head, vocab, t);
        if (stage_bytes(last) + stage_bytes(before) + step.total() > stage_bytes(prefill_cache) + pass.total()) {
          cache = last;
          previous = before;
          pass = step;
        }
      }
    }

    const bool hybrid = mix.global_count > 0 && mix.window_count > 0;
    add_kv(ctx, hybrid ? names_.kv_cache_global : names_.kv_cache, mix.global_first, mix.global_count, cache.global);
    add_kv(ctx, hybrid ? names_.kv_cache_window : names_.kv_cache, mix.window_first, mix.window_count, cache.window);
    // The previous decode step's cache, still referenced while the last step
    // runs: the stage's layers together, for that moment only.
    if (stage_bytes(previous) > 0)
      support::add_bytes(ctx, {.name = names_.kv_cache_previous, .role = Role::kv_cache,
                               .lifetime = Lifetime::transient_forward, .bytes = stage_bytes(previous)});

    // One paged block: block_size tokens of one sequence in every layer of the
    // rank, as vLLM's CacheEngine.get_cache_block_size (num_layers x 2 x
    // block_size x kv heads x head size x dtype size).
    ctx.set_attr(block_tokens_attr_, block_size_);
    ctx.set_attr(block_bytes_attr_,
                 inf::kv_bytes_per_layer(kv, static_cast<double>(block_size_), 1) * static_cast<double>(stage_layers));

    // vLLM's rotary table (vllm/model_executor/layers/rotary_embedding/base.py,
    // RotaryEmbedding.__init__ @ 04458da and @ 072d10a: _compute_cos_sin_cache
    // concatenates cos and sin of max_position_embeddings x rotary_dim / 2,
    // cast to get_rope's dtype, the model dtype; register_buffer), built with
    // the model: part of vLLM's "weights memory". get_rope keeps one instance
    // per configuration (_ROPE_DICT), so the layers share it; tensor
    // parallelism leaves it whole. Latent attention rotates qk_rope_head_dim.
    // A model with learned positions has none; the rotary width is taken as
    // the head (a partial rotary factor is not in the model facts).
    if (rope_cache_ && model.max_context > 0 && stage_layers > 0 && !rank.learned_positions) {
      const double width = static_cast<double>(model.kv_lora_rank > 0 ? model.qk_rope_head_dim : model.head_dim);
      support::add_bytes(ctx, {.name = names_.rope_cache, .role = Role::weights,
                               .bytes = static_cast<double>(model.max_context) * width * activation_bytes});
      ctx.items()[ctx.items().size() - 1].set_non_parameter(true);
    }

    add_transients(ctx, forward, pass, chunk, b, vocab, activation_bytes, rank.lm_head);
  }

 private:
  // Tokens of one prefill pass: prefill_chunk when given; under prefill_rule
  // = "context" the pass an engine sizes to the context length
  // (inf::context_prefill_tokens); none (whole prompts) otherwise.
  std::optional<int64_t> prefill_tokens(int64_t seq_len) const {
    if (prefill_chunk_) return prefill_chunk_;
    if (!context_rule_) return std::nullopt;
    return inf::context_prefill_tokens(seq_len, prefill_min_, prefill_long_above_, prefill_long_chunk_.value_or(0));
  }

  // One layer's cache of each kind, bytes.
  struct Cache {
    double global = 0;
    double window = 0;
  };

  // `bytes` per layer.
  static void add_kv(memplan::sdk::Context& ctx, memplan::sdk::Name name, int64_t first, int64_t count,
                     double bytes) {
    if (count <= 0) return;
    support::add_bytes(ctx, {.name = name, .role = Role::kv_cache, .layer = static_cast<int32_t>(first),
                             .count = static_cast<uint32_t>(count), .bytes = bytes});
  }

  // The rank's layer shape and what the model's forward keeps per token.
  struct Forward {
    inf::ForwardShape shape;
    double held_per_token = 0;  // activations.model_held per token of a pass
    bool workspace = false;     // the routed experts' temporaries are the persistent workspace
  };
  Forward forward_shape(const memplan_model& model, int64_t t, double activation_bytes, bool dense_layers_here,
                        bool experts_here, bool quantized_experts, bool learned_positions) const {
    Forward f;
    inf::ForwardShape& shape = f.shape;
    shape.hidden = static_cast<double>(model.hidden);
    shape.heads = static_cast<double>(model.heads);
    shape.head_dim = static_cast<double>(model.head_dim);
    shape.kv_heads_rank = static_cast<double>(support::kv_heads_per_rank(model.kv_heads, t));
    if (model.kv_lora_rank > 0) {
      // Prefill up-projects K and V for this rank's heads from the latent.
      shape.v_head_dim = static_cast<double>(model.v_head_dim);
      shape.kv_heads_rank = static_cast<double>(model.heads) / static_cast<double>(t);
      shape.latent = static_cast<double>(model.q_lora_rank + model.kv_lora_rank + model.qk_rope_head_dim);
    }
    shape.gated = model.gated_mlp != 0;
    if (model.experts > 0 && !experts_here) {
      // A stage of dense first layers only (a MoE model cut by pipeline parallelism).
      shape.ffn = static_cast<double>(model.ffn_hidden);
    } else if (model.experts > 0) {
      shape.ffn = static_cast<double>(model.expert_ffn_hidden);
      shape.top_k = static_cast<double>(model.experts_top_k);
      shape.shared_ffn = static_cast<double>(model.shared_expert_ffn_hidden);
      if (dense_layers_here) shape.dense_ffn = static_cast<double>(model.ffn_hidden);
    } else {
      shape.ffn = static_cast<double>(model.ffn_hidden);
    }
    shape.tensor = static_cast<double>(t);
    shape.bytes = activation_bytes;
    shape.flash_attention = flash_attention_;
    shape.score_bytes = inf::eager_score_bytes(eager_softmax_, activation_bytes);
    // vLLM's fused-MoE workspace: sized by the largest pass (the prefill chunk or
    // the decode step) and kept, so the routed experts' temporaries leave the
    // layer's transient. Quantized experts run other kernels (Marlin, mxfp4,
    // CUTLASS) whose workspaces are not modelled: their temporaries stay in the
    // layer's transient.
    f.workspace = persistent_moe_workspace_ && shape.top_k > 0 && !quantized_experts;
    shape.routed_in_workspace = f.workspace;
    // What the model's forward keeps beside the running layer, per token of the pass (Hugging Face
    // transformers, models/llama/modeling_llama.py LlamaModel.forward, and its copies: inputs_embeds stays a
    // local while the loop runs, the loop's hidden_states holds the layer's input until the layer returns,
    // and (Llama from 4.43, the others from 4.45) the position_embeddings (cos, sin) computed once before the
    // loop; GPT-2 style models keep position_embeds beside inputs_embeds).
    f.held_per_token = activation_bytes * (held_hidden_states_ * shape.hidden +
                                           (learned_positions ? (held_learned_positions_ ? shape.hidden : 0.0)
                                                              : (held_rotary_tables_ ? 2 * shape.head_dim : 0.0)));
    return f;
  }

  // The transients of one moment: the layer's, what the model's forward keeps
  // beside it, and the fp32 logits (0 on a rank without the LM head).
  struct Pass {
    double layer = 0;
    double held = 0;
    double logits = 0;
    double total() const { return layer + held + logits; }
  };
  double logits_of(double rows, bool lm_head, double vocab, int64_t t) const {
    return lm_head ? inf::logits_bytes(rows, vocab, static_cast<double>(t)) : 0.0;
  }
  // The prefill pass of `chunk` tokens over `context` keys.
  Pass prefill_pass(const Forward& f, double chunk, double b, double context, bool lm_head, double vocab,
                    int64_t t) const {
    return {inf::layer_transient(f.shape, chunk, context), f.held_per_token * chunk,
            logits_of(all_logits_ ? chunk : b, lm_head, vocab, t)};
  }
  // A decode step: one token per sequence over `context` keys.
  Pass decode_pass(const Forward& f, double b, double context, bool lm_head, double vocab, int64_t t) const {
    return {inf::layer_transient(f.shape, b, context), f.held_per_token * b, logits_of(b, lm_head, vocab, t)};
  }
  // Both passes over the same cache: the layer's transient of the larger
  // pass, the held tensors with the pass whose transient they make the larger
  // (the item is what they add to the layer's), and the logits of the larger
  // row count.
  Pass larger_pass(const Forward& f, double chunk, double b, double context, bool lm_head, double vocab,
                   int64_t t) const {
    const double prefill = inf::layer_transient(f.shape, chunk, context);
    const double decode = inf::layer_transient(f.shape, b, context);
    const double layer = std::max(prefill, decode);
    const double held = f.held_per_token > 0
                            ? std::max(prefill + f.held_per_token * chunk, decode + f.held_per_token * b) - layer
                            : 0.0;
    return {layer, held, logits_of(all_logits_ ? std::max(chunk, b) : b, lm_head, vocab, t)};
  }

  // The items of the chosen moment's transients, vLLM's MoE workspace and the
  // start-up sampler run's excess.
  void add_transients(memplan::sdk::Context& ctx, const Forward& f, const Pass& pass, double chunk, double b,
                      double vocab, double activation_bytes, bool lm_head) const {
    add_transient(ctx, names_.layer, pass.layer);
    if (pass.held > 0) add_transient(ctx, names_.model_held, pass.held);
    if (f.workspace)
      add_transient(ctx, names_.moe_workspace,
                    inf::moe_workspace_bytes(activation_bytes, std::max(chunk, b), f.shape.top_k,
                                             f.shape.ffn / f.shape.tensor, f.shape.hidden, f.shape.gated));

    if (!lm_head) return;  // an earlier pipeline stage computes no logits
    add_transient(ctx, names_.logits, pass.logits, true);

    // The sampler run comes after the forward pass, so it does not add to
    // the layer's transient: the host sums the forward transients, and this
    // item carries only what the sampler run holds beyond them (0: no item).
    if (sampler_rows_ <= 0) return;
    const double sampler_rows = std::min(static_cast<double>(sampler_rows_), chunk);
    const double excess = inf::sampler_excess_bytes(
        f.shape.hidden, chunk, sampler_rows, vocab, activation_bytes,
        inf::sampler_bytes_per_element(sampler_path_, sampler_rows), pass.total());
    if (excess > 0) add_transient(ctx, names_.sampler, excess, true);
  }

  // vocab_sized: a tensor of tokens x vocabulary, flagged for the allocator
  // (plugin_abi.h MEMPLAN_ITEM_VOCAB_SIZED).
  static void add_transient(memplan::sdk::Context& ctx, memplan::sdk::Name name, double bytes,
                            bool vocab_sized = false) {
    support::add_bytes(ctx, {.name = name, .role = Role::activations,
                             .lifetime = Lifetime::transient_forward, .bytes = bytes});
    if (vocab_sized) ctx.items()[ctx.items().size() - 1].set_vocab_sized(true);
  }

  // What the reported rank holds, from its weights: the first layer (as
  // pipeline-parallel cut the layered items) and whether it computes the
  // logits: it holds the LM head, or the embedding reused as the head (tied)
  // on the stage that holds the head. A model without an output head (an
  // encoder's output_head = "none") computes none. One pass over the plan.
  struct RankWeights {
    int64_t first_layer = 0;
    bool lm_head = false;
    bool experts = false;  // the rank holds expert layers
    bool quantized_experts = false;  // their weights are stored narrower than the activations (a quantized format)
    bool learned_positions = false;  // a position embedding: no rotary table
  };
  RankWeights scan_weights(const memplan::sdk::Context& ctx, double activation_bytes) const {
    RankWeights found;
    int64_t first = -1;
    bool embedding = false;
    // In place: no copy of each item's name per evaluation.
    for (const memplan::sdk::ItemRef item : ctx.items()) {
      if (item.role() != Role::weights) continue;
      const int32_t layer = item.layer();
      if (layer >= 0 && (first < 0 || layer < first)) first = layer;
      found.lm_head = found.lm_head || item.param_class() == ParamClass::lm_head;
      found.experts = found.experts || item.param_class() == ParamClass::expert;
      // Biases stay in the unquantized dtype (gpt-oss's moe.experts_bias).
      if (item.param_class() == ParamClass::expert && item.name().find("bias") == std::string_view::npos &&
          item.bytes_per_element() < activation_bytes)
        found.quantized_experts = true;
      embedding = embedding || item.param_class() == ParamClass::embedding;
      found.learned_positions = found.learned_positions || item.param_class() == ParamClass::position_embedding;
    }
    if (!found.lm_head && embedding && ctx.model().tied_embeddings != 0)
      found.lm_head = layout_.stage_has_lm_head(ctx);
    found.first_layer = first < 0 ? 0 : first;
    return found;
  }

  int64_t block_size_;
  bool flash_attention_;
  std::optional<double> kv_bytes_;
  std::optional<int64_t> window_;
  std::optional<int64_t> prefill_chunk_;
  bool context_rule_ = false;          // prefill_rule = "context"
  int64_t prefill_min_ = 1;            // prefill_min
  int64_t prefill_long_above_ = 0;     // prefill_long_above (0: never)
  std::optional<int64_t> prefill_long_chunk_;
  int64_t sampler_rows_ = 0;
  inf::SamplerPath sampler_path_ = inf::SamplerPath::sort;  // sampler_path
  bool all_logits_ = false;
  bool persistent_moe_workspace_ = false;
  bool rope_cache_ = false;
  inf::EagerSoftmax eager_softmax_ = inf::EagerSoftmax::dtype;  // eager_softmax
  int64_t new_tokens_ = 0;              // new_tokens (0: seq_len is the cache throughout)
  bool previous_cache_held_ = false;    // previous_cache_held
  double held_hidden_states_ = 0;         // held_hidden_states
  bool cache_query_heads_ = false;        // cache_heads = "query"
  bool held_learned_positions_ = false;  // held_position_embeddings "learned" or "all"
  bool held_rotary_tables_ = false;     // held_position_embeddings "all"
  support::LayoutReader layout_;
  // Resolved once, in the constructor: no key lookup per evaluation.
  memplan::sdk::Attribute activation_dtype_, block_tokens_attr_, block_bytes_attr_;
  memplan::sdk::Attribute dequantized_attr_;  // weights.dequantized_transient
  // The names of the items apply() adds, interned once: no name copied or
  // interned per evaluation.
  struct Names {
    explicit Names(const memplan::sdk::Options& options)
        : kv_cache(options.intern("kv_cache")),
          kv_cache_global(options.intern("kv_cache.global")),
          kv_cache_window(options.intern("kv_cache.window")),
          layer(options.intern("activations.layer")),
          logits(options.intern("activations.logits")),
          sampler(options.intern("activations.sampler")),
          moe_workspace(options.intern("activations.moe_workspace")),
          rope_cache(options.intern("rope_cache")),
          model_held(options.intern("activations.model_held")),
          kv_cache_previous(options.intern("kv_cache.previous")) {}
    memplan::sdk::Name kv_cache, kv_cache_global, kv_cache_window, layer, logits, sampler, moe_workspace, rope_cache,
        model_held, kv_cache_previous;
  } names_;
};

}  // namespace

MEMPLAN_PLUGIN(InferenceMemory)
