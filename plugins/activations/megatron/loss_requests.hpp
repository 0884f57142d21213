// The order in which Hugging Face Transformers' eager loss paths request
// their logits-sized tensors over training steps, for a replay through the
// caching allocator's block rules (memplan/support/caching_allocator.hpp).
//
// The caching allocator keeps a freed block for any later request that fits
// it, so the segments a step leaves mapped depend on the order of its
// requests, not only on the most they hold at once: a 16-bit request that
// finds no block of its size splits a free fp32-sized one, and the next
// fp32 request maps a new segment. Replayed step after step, each path
// settles at a fixed number of bytes per logit element; `allocator` reads it
// as the logits-sized requests' pool (MEMPLAN_ATTR_LOSS_SEGMENTS).
//
// Sequences, per step (p the LM head's bytes per element; n logits, n' = n
// (s - 1) / s in the shifted copy and what derives from it):
//   upcast_in_loss (transformers >= 4.49, loss/loss_utils.py ForCausalLMLoss:
//     logits.float(), then cross_entropy on the view):
//     forward   head output p, its fp32 copy 4 (none when p = 4), the
//               log-softmax 4 (saved); the copy is freed when the loss returns
//     backward  nll_loss's gradient 4, log_softmax's 4; then the first and the
//               saved log-softmax are freed; the cast back to p (none when
//               p = 4); the rest freed
//   upcast_in_loss_shift_copy (4.46-4.48): as above with the shifted
//     contiguous copy 4 n' beside the fp32 copy in forward (both freed when
//     the loss returns), the log-softmax and its gradients at n', and the
//     slice's backward (zeros of the full shape, 4 n) before the cast back
//   upcast_shift_copy (<= 4.45, LlamaForCausalLM.forward: logits.float() in
//     the model, the shifted copy and CrossEntropyLoss there): the head's
//     output p freed once upcast; the model returns the fp32 logits
// With the logits soft-capped (Gemma 2's final_logit_softcapping: the model
// computes cap x tanh(head / cap) before returning them): in forward the head's
// output p, the division p (the head's output freed), tanh's p (saved), the
// product p (the logits the loss reads; the division freed); in backward,
// after the loss's gradient of the logits, the product's p, tanh's p (its
// saved output freed) and the division's p, each freeing the one before.
// The returned logits (p, or 4 for upcast_shift_copy) are freed when the
// loop drops the output (HeldOutput): after the loss when it does not hold it
// (the Trainer's compute_loss returns the loss only), after the step's
// backward when it drops it then (through_step), else when the next forward's
// output replaces it (next_forward), after that forward's requests.
//
// The backward thread's cuBLAS workspace (`workspace`, where given): PyTorch
// keeps one per cuBLAS handle and stream (aten/src/ATen/cuda/CublasHandlePool.cpp,
// getCurrentCUDABlasHandle: the workspace comes from the caching allocator
// when a thread's handle first runs a GEMM on a stream), and autograd runs
// CUDA backward on a thread of its own: its first GEMM, the head's input
// gradient (the 16-bit gradient of the logits times the head's weight), takes
// it from the caching allocator once per run, in the first step, after the
// loss path has freed its fp32 gradients. Where every other free block is
// smaller than the workspace (the plugin's condition), best fit splits a free
// fp32 logits-sized block, which then holds the workspace for good, and the
// next step's fp32 requests map one more segment. Measured (validation/measured/
// h100-2026-11-28-dynamic.jsonl, segments_at_end, Qwen-1.8B's shape, LoRA on
// q, k, v, the Trainer): 4 x 1,188 + 594 MiB at 2,048 tokens and 4 x 298 + 150
// at 512, a 32 MiB block inside one fp32 segment; 3 x 2L + L without it.
//
// The n' sizes matter: a shifted request in a whole fp32 block leaves 4 b V
// bytes (with the 2 MiB rounding, possibly more than 1 MiB: a split), and
// the whole-size slice gradient then finds no block (transformers <= 4.45
// with a held output: 22 B per logit at b 8, s 2048, V 128,256 against 18 at
// exact fits). Measured (validation/measured, snapshots of torch 2.11 /
// transformers 5.17 on an H100, upcast_in_loss): the held loop's
// logits-sized segments settle at 9 n p-sized units (4 x 2L + L with L = n
// p, p = 2) against 7 alive at once; the Trainer's at 7 against 6
// (max_memory_reserved of the recompute job from the first step on).
#pragma once

#include <memplan/support/caching_allocator.hpp>

#include "transformer_activations.hpp"

#include <array>
#include <cstdint>
#include <span>

namespace memplan::plugins {

// How long the training loop keeps the model's output object (the logits it
// returns) after the loss: `dropped` once the loss is computed (the Trainer's
// compute_loss returns the loss only); `through_step` through backward and the
// optimizer step, dropped before the next forward (fsdp_qlora train.py sets
// `output = None` after the step); `next_forward` until the next forward's
// output replaces it (`output = model(...)` with nothing dropping it).
enum class HeldOutput : uint8_t { dropped, through_step, next_forward };

// Whether the order of `mode`'s logits-sized requests is known here.
inline bool loss_order_known(CrossEntropy mode) {
  return mode == CrossEntropy::upcast_in_loss || mode == CrossEntropy::upcast_in_loss_shift_copy ||
         mode == CrossEntropy::upcast_shift_copy;
}

// The requests of `steps` training steps of `mode`'s loss path, sizes in
// bytes: `elements` logits of `p` bytes each, `shifted` of them in the
// shifted copy and what derives from it (b (s - 1) V: the copy, its
// log-softmax and their gradients; the slice's gradient and the cast back
// are whole again). Returns how many it wrote (0 where the order is not
// known, or `out` is too small).
//
// `scales`, where given (one per step, at least `steps`), multiplies the
// step's logits and shifted elements: steps of varying lengths (a batch of
// 1 at each sample's own length, or padded to each batch's longest).
// `workspace` (bytes; 0: none) is the backward thread's cuBLAS workspace,
// requested once, in the first step, at the head's backward and never freed.
template <size_t N>
size_t loss_path_requests(CrossEntropy mode, double p, HeldOutput held, int steps, double elements, double shifted,
                          std::array<support::AllocatorRequest, N>& out, bool softcap = false,
                          std::span<const double> scales = {}, double workspace = 0) {
  using Request = support::AllocatorRequest;
  if (!loss_order_known(mode)) return 0;
  size_t count = 0;
  bool overflow = false;
  const auto push = [&](Request::Kind kind, uint32_t id, double bytes) {
    if (count == N) {
      overflow = true;
      return;
    }
    out[count++] = Request{kind, id, bytes};
  };
  if (!scales.empty() && scales.size() < static_cast<size_t>(steps)) return 0;
  const bool shifted_path = mode != CrossEntropy::upcast_in_loss;
  double scale = 1;  // this step's length against `elements`'
  const double derived = shifted_path ? shifted : elements;  // the shifted copy's elements and what derives from it
  const auto allocate = [&](uint32_t id, double bytes_per_element) {
    push(Request::Kind::allocate, id, bytes_per_element * elements * scale);
  };
  const auto allocate_derived = [&](uint32_t id, double bytes_per_element) {
    push(Request::Kind::allocate, id, bytes_per_element * derived * scale);
  };
  const auto release = [&](uint32_t id) { push(Request::Kind::free, id, 0); };
  const bool cast = p < 4;  // .float() of fp32 logits returns them: no copy, no cast back
  const bool model_upcasts = mode == CrossEntropy::upcast_shift_copy;
  enum Tensor : uint32_t {
    head, returned, upcast, shift, log_softmax, nll_grad, softmax_grad, slice_grad, cast_grad,
    capped, divided, tanh_out, product_grad, tanh_grad, divided_grad
  };
  constexpr uint32_t kTensors = 15;
  constexpr uint32_t kWorkspace = UINT32_MAX - 1;  // an id no step's tensors reach (the replay reserves UINT32_MAX)
  for (int step = 0; step < steps; ++step) {
    scale = scales.empty() ? 1.0 : scales[static_cast<size_t>(step)];
    const auto id = [&](Tensor tensor, int at) { return static_cast<uint32_t>(at) * kTensors + tensor; };
    // The head's output in p: with soft-capping, the product of the capping chain (tanh's output saved).
    const auto head_output = [&](Tensor as) {
      if (!softcap) {
        allocate(id(as, step), p);
        return;
      }
      allocate(id(capped, step), p);
      allocate(id(divided, step), p);
      release(id(capped, step));
      allocate(id(tanh_out, step), p);
      release(id(divided, step));
      allocate(id(as, step), p);
    };
    // Forward: the returned logits, then the loss's own copies.
    if (model_upcasts && cast) {
      head_output(head);
      allocate(id(returned, step), 4);
      release(id(head, step));
    } else {
      head_output(returned);
      if (!model_upcasts && cast) allocate(id(upcast, step), 4);
    }
    if (shifted_path) allocate_derived(id(shift, step), 4);
    allocate_derived(id(log_softmax, step), 4);
    if (!model_upcasts && cast) release(id(upcast, step));
    if (shifted_path) release(id(shift, step));
    if (held == HeldOutput::next_forward) {
      if (step > 0) release(id(returned, step - 1));
    } else if (held == HeldOutput::dropped) {
      release(id(returned, step));
    }
    // Backward: nll_loss, log_softmax, the shift's slice, the cast back.
    allocate_derived(id(nll_grad, step), 4);
    allocate_derived(id(softmax_grad, step), 4);
    release(id(nll_grad, step));
    release(id(log_softmax, step));
    uint32_t last = id(softmax_grad, step);
    if (shifted_path) {
      allocate(id(slice_grad, step), 4);
      release(last);
      last = id(slice_grad, step);
    }
    if (cast) {
      allocate(id(cast_grad, step), p);
      release(last);
      last = id(cast_grad, step);
    }
    if (softcap) {
      allocate(id(product_grad, step), p);
      release(last);
      allocate(id(tanh_grad, step), p);
      release(id(product_grad, step));
      release(id(tanh_out, step));
      allocate(id(divided_grad, step), p);
      release(id(tanh_grad, step));
      last = id(divided_grad, step);
    }
    // The head's backward: its input gradient's GEMM, the backward thread's
    // first, with `last` (the logits' gradient) alive. Its output (b s h)
    // is not replayed: blocks of that size are what the forward freed.
    if (step == 0 && workspace > 0) push(Request::Kind::allocate, kWorkspace, workspace);
    release(last);
    // The loop drops its output after the step (the optimizer's requests are not logits-sized).
    if (held == HeldOutput::through_step) release(id(returned, step));
  }
  return overflow ? 0 : count;
}

// The bytes `mode`'s logits-sized segments settle at for `elements` logits
// of `p` bytes (`shifted` in the shifted copy; see loss_path_requests), 0
// where the order is not known or the replay cannot take it (a request of
// 1 MiB or less: the small pool). Four steps are replayed: every sequence
// above settles from its second. With a `workspace` (see loss_path_requests)
// the segments less the workspace's own bytes, which are allocated (the
// cuda-context plugin counts them), not a cached block.
inline double loss_segments(CrossEntropy mode, double p, HeldOutput held, double elements, double shifted,
                            bool softcap = false, double workspace = 0) {
  std::array<support::AllocatorRequest, 128> requests{};
  const size_t count = loss_path_requests(mode, p, held, 4, elements, shifted, requests, softcap, {}, workspace);
  if (count == 0) return 0;
  const support::AllocatorReplay replay =
      support::replay_caching_allocator(std::span<const support::AllocatorRequest>(requests.data(), count));
  if (!replay.valid) return 0;
  return replay.reserved - support::round_size(workspace);
}

// What the loss path's segments do when steps differ in length: a step
// longer than every one before finds no cached block large enough for its
// logits-sized requests and maps new segments, while the smaller segments of
// earlier steps stay (nothing returns them; they serve the shorter steps).
// Measured on an H100 (validation/measured/h100-2026-11-28-dynamic.jsonl):
// each such step left three new fp32-sized segments beside the older ones.
// Sizes are the requests that mapped segments (512-byte multiples), before
// the segments' own rounding, so that a consumer can scale them to another
// length and round there.
struct LossPathGrowth {
  double first = 0;   // requests that map the first step's segments, at `elements`
  double longer = 0;  // requests that map segments at a step at `elements` after shorter ones
  int segments = 0;   // how many segments that longer step maps (0: none, the older blocks hold it)
  bool known = false; // the order is known (logits too small for the replay: known, no growth)
};

// The replay behind LossPathGrowth: one step at `elements`; three steps at
// 60 % of it and one at it. Above half, as a run's successive longest steps
// are, the 16-bit requests fit the shorter steps' fp32 blocks; a jump from
// below half maps the first step's 16-bit set too, which the consumer adds
// (support/varying_lengths.hpp).
inline LossPathGrowth loss_path_growth(CrossEntropy mode, double p, HeldOutput held, double elements,
                                       double shifted, bool softcap = false) {
  constexpr double kShorter = 0.6;
  std::array<support::AllocatorRequest, 128> requests{};
  const auto replay = [&](int steps, std::span<const double> scales) {
    const size_t count = loss_path_requests(mode, p, held, steps, elements, shifted, requests, softcap, scales);
    if (count == 0) return support::AllocatorReplay{.valid = false};
    return support::replay_caching_allocator(std::span<const support::AllocatorRequest>(requests.data(), count));
  };
  const std::array<double, 4> scales{kShorter, kShorter, kShorter, 1.0};
  if (!loss_order_known(mode)) return {};
  const support::AllocatorReplay first = replay(1, {});
  const support::AllocatorReplay before = replay(3, std::span<const double>(scales.data(), 3));
  const support::AllocatorReplay after = replay(4, scales);
  // A request of 1 MiB or less (the small pool, which the replay leaves out):
  // logits this small keep nothing worth a segment of their own; known, no growth.
  if (!first.valid || !before.valid || !after.valid) return {0, 0, 0, true};
  return {first.mapped_requests, after.mapped_requests - before.mapped_requests, after.segments - before.segments,
          true};
}

}  // namespace memplan::plugins
