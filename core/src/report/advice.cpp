#include "report/advice.hpp"

#include <algorithm>

#include "memplan/core/text.hpp"

namespace memplan {
namespace {

std::string_view remedy(int32_t role, bool training) {
  switch (role) {
    case MEMPLAN_ROLE_WEIGHTS:
      return "split the weights across GPUs (tensor or pipeline parallelism, or parameter sharding), or store them "
             "in a smaller format";
    case MEMPLAN_ROLE_GRADIENTS:
      return "shard gradients across the model replicas, split the model across GPUs, or train fewer weights "
             "(freezing, adapters)";
    case MEMPLAN_ROLE_MASTER_WEIGHTS:
      return "shard the master copy across the model replicas, offload it, or drop it (pure 16-bit training)";
    case MEMPLAN_ROLE_OPTIMIZER_STATES:
      return "shard optimizer states across the model replicas, offload them to CPU, or use an optimizer "
             "with fewer or smaller states";
    case MEMPLAN_ROLE_ACTIVATIONS:
      if (!training)
        return "process fewer tokens per forward pass (a smaller prefill chunk or fewer concurrent sequences), "
               "or split the layers across GPUs";
      return "lower micro_batch or seq_len (raise grad_accum to keep the global batch), checkpoint activations, "
             "or split them across GPUs with sequence or tensor parallelism";
    case MEMPLAN_ROLE_KV_CACHE:
      return "serve fewer or shorter sequences at once, or store the KV cache in a smaller format";
    default:
      return "reduce the buffers and overhead settings";
  }
}

}  // namespace

std::vector<std::string> advice_for(const Breakdown& breakdown, uint64_t capacity, bool training) {
  std::vector<std::string> advice;
  if (capacity == 0 || breakdown.peak <= capacity) return advice;
  const uint64_t excess = breakdown.peak - capacity;
  advice.push_back("The peak exceeds the memory available by " + format_gib(static_cast<double>(excess)) + ".");
  std::vector<int32_t> roles;
  for (int32_t role = 0; role < MEMPLAN_ROLE_COUNT; ++role)
    if (breakdown.components[static_cast<size_t>(role)] > 0) roles.push_back(role);
  std::sort(roles.begin(), roles.end(), [&](int32_t a, int32_t b) {
    return breakdown.components[static_cast<size_t>(a)] > breakdown.components[static_cast<size_t>(b)];
  });
  for (size_t i = 0; i < roles.size() && i < 3; ++i) {
    const int32_t role = roles[i];
    advice.push_back(std::string(role_name(role)) + " (" +
                     format_gib(static_cast<double>(breakdown.components[static_cast<size_t>(role)])) + "): " +
                     std::string(remedy(role, training)) + ".");
  }
  return advice;
}

}  // namespace memplan
