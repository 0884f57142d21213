// The optimizer step's memory traffic (ABI 1.2 work records): an element-wise
// optimizer's step is bound by memory bandwidth, not by FLOPs. Its fused
// kernel reads and writes, per trainable element:
//
//   the gradient                         read          g bytes
//   each of the S states                 read, write   2 S s
//   the master copy (mixed precision)    read, write   2 m, and the model's
//                                        weight written from it    + w
//   or, without a master copy, the weight read, write   2 w
//
// PyTorch's fused AdamW (torch/optim/adamw.py, _fused_adamw over
// aten::_fused_adamw_: params, grads, exp_avgs, exp_avg_sqs read and params,
// exp_avgs, exp_avg_sqs written in one pass) and apex's multi_tensor_adam
// (Megatron-LM, DeepSpeed) do exactly this; Megatron-LM then copies the fp32
// main parameters into the 16-bit model parameters
// (_copy_main_params_to_model_params), which is the "+ w". For-loop and
// foreach steps move more (each elementwise op a pass of its own): this is
// their floor. Mixed-precision AdamW (g 4, S 2 x s 4, m 4, w 2): 4 + 16 + 8
// + 2 = 30 bytes per parameter.
//
// The record runs at the GPU's memory bandwidth x `efficiency` 1: the peak,
// so the step's time is a lower bound. Dense weights and experts are two
// records (MEMPLAN_WORK_OPTIMIZER_STEP, _EXPERTS), since ZeRO and FSDP
// partition them over different groups; sharding::partition_optimizer_step
// divides them.
#pragma once

#include <memplan/conventions.h>
#include <memplan/sdk.hpp>

namespace memplan::support {

inline double step_bytes_per_element(double gradient_bytes, double weight_bytes, double master_bytes,
                                     double states, double state_bytes) {
  const double updated = master_bytes > 0 ? 2 * master_bytes + weight_bytes : 2 * weight_bytes;
  return gradient_bytes + 2 * states * state_bytes + updated;
}

class OptimizerTraffic {
 public:
  explicit OptimizerTraffic(const sdk::Options& options)
      : gradients_(options.attribute(MEMPLAN_ATTR_DTYPE_GRADIENTS)),
        master_(options.attribute(MEMPLAN_ATTR_DTYPE_MASTER_WEIGHTS)),
        dense_(options.intern(MEMPLAN_WORK_OPTIMIZER_STEP)),
        experts_(options.intern(MEMPLAN_WORK_OPTIMIZER_STEP_EXPERTS)) {}

  // Records the step of the trainable GPU weights as the layout plugins left
  // them (before sharding divides the records). Nothing in inference.
  void add(sdk::Context& ctx, double states, double state_bytes) const {
    if (!ctx.training()) return;
    const double gradient = ctx.attr_double(gradients_, 0);
    const double master = ctx.attr_double(master_, 0);
    double dense = 0, experts = 0;
    for (const sdk::ItemRef item : ctx.items()) {
      if (item.role() != sdk::Role::weights || !item.trainable() || item.device() != sdk::Device::gpu) continue;
      const double bytes = item.elements() * static_cast<double>(item.count()) *
                           step_bytes_per_element(gradient, item.bytes_per_element(), master, states, state_bytes);
      (item.param_class() == sdk::ParamClass::expert ? experts : dense) += bytes;
    }
    for (const auto& [name, amount] : {std::pair{dense_, dense}, std::pair{experts_, experts}})
      if (amount > 0)
        ctx.add_work(sdk::Work{.name = name, .kind = sdk::WorkKind::memory, .pass = sdk::Pass::optimizer,
                               .amount = amount, .efficiency = 1.0});
  }

 private:
  sdk::Attribute gradients_, master_;
  sdk::Name dense_, experts_;
};

}  // namespace memplan::support
