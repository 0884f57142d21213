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
// Optimizers whose step is not one fused element-wise kernel give their own
// bytes per element and weight item (OptimizerTraffic::add_per_item):
//
//   adam-8bit  bitsandbytes' blockwise 8-bit Adam moves every byte of state it
//              holds once in and once out (2 x its states), beside the gradient
//              and the weight: update_bytes_per_element + 2 x state bytes;
//   adafactor  Hugging Face's Adafactor is a per-parameter loop of eager
//              PyTorch ops, each a pass over HBM: hf_adafactor_bytes_per_element.
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

// The gradient read and the stepped weight read and written: the master copy
// (2 m) and the model's weight written from it (w), or the weight itself (2 w).
inline double update_bytes_per_element(double gradient_bytes, double weight_bytes, double master_bytes) {
  const double updated = master_bytes > 0 ? 2 * master_bytes + weight_bytes : 2 * weight_bytes;
  return gradient_bytes + updated;
}

inline double step_bytes_per_element(double gradient_bytes, double weight_bytes, double master_bytes,
                                     double states, double state_bytes) {
  return update_bytes_per_element(gradient_bytes, weight_bytes, master_bytes) + 2 * states * state_bytes;
}

// Hugging Face's Adafactor (transformers/optimization.py, Adafactor.step @
// 005edacb6b5d), per element of one parameter, each eager op reading its
// operands from HBM and writing its result (f = 4: the loop works in fp32):
//
//   grad = grad.float()                  16-bit gradient: g + f
//   p_data_fp32 = p.float()              16-bit parameter: p + f
//   _rms(p_data_fp32)                    f (the RMS of scale_parameter)
//   update = grad**2 + eps               two ops: 2 x (f + f)
//   factored (a 2-D tensor):
//     update.mean(dim=-1), (dim=-2)      2 f (the row and column sums; the
//                                        n + m states themselves are left out)
//     torch.mul(r_factor, c_factor)      f (the rebuilt n x m second moment)
//     update.mul_(grad)                  3 f
//   not factored (1-D):
//     exp_avg_sq.mul_(b).add_(update)    2 f + 3 f
//     exp_avg_sq.rsqrt().mul_(grad)      2 f + 3 f
//   _rms(update)                         f
//   update.div_(...), update.mul_(lr)    2 f + 2 f
//   first moment (beta1 set):
//     exp_avg.mul_(b1).add_(update)      2 f + 3 f
//   p_data_fp32.add_(-update)            2 f (the negation) + 3 f
//   p.copy_(p_data_fp32)                 16-bit parameter: f + p
//
// so 21 f = 84 B factored, 25 f = 100 B for a 1-D tensor, + 5 f = 20 B with a
// first moment, + g + f for a 16-bit gradient and + 2 (p + f) for a 16-bit
// parameter: bf16 weights and gradients, factored, no first moment: 102 B.
// The parameter stepped is the master copy when there is one (the model's
// weight then written from it, + w, as for the fused optimizers). Weight decay
// (off by default, and no option here) would add 3 f.
inline double hf_adafactor_bytes_per_element(double gradient_bytes, double weight_bytes, double master_bytes,
                                            bool factored, bool first_moment) {
  constexpr double f = 4;
  const double stepped = master_bytes > 0 ? master_bytes : weight_bytes;
  double bytes = (factored ? 21 : 25) * f + (first_moment ? 5 * f : 0);
  if (gradient_bytes > 0 && gradient_bytes < f) bytes += gradient_bytes + f;
  if (stepped > 0 && stepped < f) bytes += 2 * (stepped + f);
  if (master_bytes > 0) bytes += weight_bytes;
  return bytes;
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
    add_per_item(ctx, [&](const sdk::ItemRef& item, double gradient, double master) {
      return item.elements() * step_bytes_per_element(gradient, item.bytes_per_element(), master, states, state_bytes);
    });
  }

  // The same records, with the bytes of one instance of each trainable GPU
  // weight item given by `instance_bytes(item, gradient bytes, master bytes)`
  // (master 0: no master copy): for optimizers whose traffic depends on the
  // tensors' shapes or on more than a number of states.
  template <typename InstanceBytes>
  void add_per_item(sdk::Context& ctx, InstanceBytes&& instance_bytes) const {
    if (!ctx.training()) return;
    const double gradient = ctx.attr_double(gradients_, 0);
    const double master = ctx.attr_double(master_, 0);
    double dense = 0, experts = 0;
    for (const sdk::ItemRef item : ctx.items()) {
      if (item.role() != sdk::Role::weights || !item.trainable() || item.device() != sdk::Device::gpu) continue;
      const double bytes = static_cast<double>(item.count()) * instance_bytes(item, gradient, master);
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
