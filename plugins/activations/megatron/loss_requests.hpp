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
// Sequences, per step (p the LM head's bytes per element; n logits):
//   upcast_in_loss (transformers >= 4.49, loss/loss_utils.py ForCausalLMLoss:
//     logits.float(), then cross_entropy on the view):
//     forward   head output p, its fp32 copy 4 (none when p = 4), the
//               log-softmax 4 (saved); the copy is freed when the loss returns
//     backward  nll_loss's gradient 4, log_softmax's 4; then the first and the
//               saved log-softmax are freed; the cast back to p (none when
//               p = 4); the rest freed
//   upcast_in_loss_shift_copy (4.46-4.48): as above with the shifted
//     contiguous copy 4 beside the fp32 copy in forward (both freed when the
//     loss returns) and the slice's backward (zeros of the full shape, 4)
//     before the cast back
//   upcast_shift_copy (<= 4.45, LlamaForCausalLM.forward: logits.float() in
//     the model, the shifted copy and CrossEntropyLoss there): the head's
//     output p freed once upcast; the model returns the fp32 logits
// The returned logits (p, or 4 for upcast_shift_copy) are freed when the
// loop drops the output: after the loss when it does not hold it (the
// Trainer's compute_loss returns the loss only), else when the next
// forward's output replaces it (output_held), after that forward's requests.
//
// Measured (validation/measured, snapshots of torch 2.11 / transformers 5.17
// on an H100): the held loop's logits-sized segments settle at 9 n p-sized
// units (4 x 2L + L with L = n p, p = 2) against 7 alive at once; the
// Trainer's at 7 against 6 (max_memory_reserved of the recompute job from
// the first step on).
#pragma once

#include <memplan/support/caching_allocator.hpp>

#include "transformer_activations.hpp"

#include <array>
#include <cstdint>
#include <span>

namespace memplan::plugins {

// Whether the order of `mode`'s logits-sized requests is known here.
inline bool loss_order_known(CrossEntropy mode) {
  return mode == CrossEntropy::upcast_in_loss || mode == CrossEntropy::upcast_in_loss_shift_copy ||
         mode == CrossEntropy::upcast_shift_copy;
}

// The requests of `steps` training steps of `mode`'s loss path, sizes in
// bytes for `elements` logits of `p` bytes each. Returns how many it wrote
// (0 where the order is not known, or `out` is too small).
template <size_t N>
size_t loss_path_requests(CrossEntropy mode, double p, bool output_held, int steps, double elements,
                          std::array<support::AllocatorRequest, N>& out) {
  using Request = support::AllocatorRequest;
  if (!loss_order_known(mode)) return 0;
  size_t count = 0;
  bool overflow = false;
  const auto push = [&](Request::Kind kind, uint32_t id, double bytes_per_element) {
    if (count == N) {
      overflow = true;
      return;
    }
    out[count++] = Request{kind, id, bytes_per_element * elements};
  };
  const auto allocate = [&](uint32_t id, double bytes) { push(Request::Kind::allocate, id, bytes); };
  const auto release = [&](uint32_t id) { push(Request::Kind::free, id, 0); };
  const bool cast = p < 4;  // .float() of fp32 logits returns them: no copy, no cast back
  const bool model_upcasts = mode == CrossEntropy::upcast_shift_copy;
  const bool shifted = mode != CrossEntropy::upcast_in_loss;
  enum Tensor : uint32_t { head, returned, upcast, shift, log_softmax, nll_grad, softmax_grad, slice_grad, cast_grad };
  constexpr uint32_t kTensors = 9;
  for (int step = 0; step < steps; ++step) {
    const auto id = [&](Tensor tensor, int at) { return static_cast<uint32_t>(at) * kTensors + tensor; };
    // Forward: the returned logits, then the loss's own copies.
    if (model_upcasts && cast) {
      allocate(id(head, step), p);
      allocate(id(returned, step), 4);
      release(id(head, step));
    } else {
      allocate(id(returned, step), p);
      if (!model_upcasts && cast) allocate(id(upcast, step), 4);
    }
    if (shifted) allocate(id(shift, step), 4);
    allocate(id(log_softmax, step), 4);
    if (!model_upcasts && cast) release(id(upcast, step));
    if (shifted) release(id(shift, step));
    if (output_held) {
      if (step > 0) release(id(returned, step - 1));
    } else {
      release(id(returned, step));
    }
    // Backward: nll_loss, log_softmax, the shift's slice, the cast back.
    allocate(id(nll_grad, step), 4);
    allocate(id(softmax_grad, step), 4);
    release(id(nll_grad, step));
    release(id(log_softmax, step));
    uint32_t last = id(softmax_grad, step);
    if (shifted) {
      allocate(id(slice_grad, step), 4);
      release(last);
      last = id(slice_grad, step);
    }
    if (cast) {
      allocate(id(cast_grad, step), p);
      release(last);
      last = id(cast_grad, step);
    }
    release(last);
  }
  return overflow ? 0 : count;
}

// The bytes per logit element that `mode`'s logits-sized segments settle at
// (0 where the order is not known): three steps replayed, by which every
// sequence above has settled (the held loop's from its second step).
inline double loss_segments_per_element(CrossEntropy mode, double p, bool output_held) {
  // 2^30 elements: every size a multiple of the allocator's 2 MiB rounding.
  constexpr double kElements = 1024.0 * 1024 * 1024;
  std::array<support::AllocatorRequest, 64> requests{};
  const size_t count = loss_path_requests(mode, p, output_held, 3, kElements, requests);
  if (count == 0) return 0;
  const support::AllocatorReplay replay =
      support::replay_caching_allocator(std::span<const support::AllocatorRequest>(requests.data(), count));
  return replay.valid ? replay.reserved / kElements : 0;
}

}  // namespace memplan::plugins
