// 'activation-offload' strategy: keep part of the stored activations in host
// memory instead of GPU memory during a training step. An example of an
// out-of-tree memplan plugin.
//
// What frameworks do:
//   - Megatron-Core CPU offloading (TransformerConfig cpu_offloading,
//     cpu_offloading_num_layers = N, cpu_offloading_activations; built on
//     Transformer Engine's CPU offload context): the activations of N of the L
//     layers move to the host during forward and come back for backward,
//     overlapped with compute (fraction = N / L; used without recomputation).
//   - DeepSpeed activation checkpointing with cpu_checkpointing = true (with
//     partition_activations): the checkpointed layer inputs go to the CPU; with
//     full recomputation those are all the stored activations (fraction = 1).
//
// Model: every item of role activations with lifetime activation (stored in
// forward, freed in backward) that lies in the layers (layer >= 0) is split in
// two: fraction x its bytes move to MEMPLAN_DEVICE_CPU (the report's per_cpu),
// the rest stays on the GPU. With outside_layers = true the stored activations
// outside the layers (embedding, final norm, logits, loss) move as well.
// Transient items (the layer being computed or recomputed) stay on the GPU: a
// layer's activations must be on the GPU while it runs. Not modelled: the
// pinned host buffers' and copy streams' own overhead, and prefetch of the next
// layer's activations in backward (one more layer on the GPU).
#include <memplan/sdk.hpp>
#include <memplan/support/format.hpp>  // memplan::plugin_support: numbers in messages as memplan prints them

#include <array>
#include <cmath>
#include <string>

namespace {

namespace sdk = memplan::sdk;

constexpr std::array<memplan_option_spec, 2> kOptions{{
    {"fraction", MEMPLAN_OPTION_DOUBLE,
     "the share of the stored activations moved to host memory, 0 to 1 (Megatron-Core's cpu_offloading_num_layers = "
     "N of L layers is N / L; DeepSpeed's cpu_checkpointing is 1)",
     "1"},
    {"outside_layers", MEMPLAN_OPTION_BOOL,
     "also move the stored activations outside the transformer layers (embedding, final norm, logits, loss)",
     "false"},
}};

// Runs after the activation model (phase 600) has added its items, and before
// the overhead plugins (700).
constexpr auto kAfterActivations = static_cast<sdk::Phase>(MEMPLAN_PHASE_ACTIVATIONS + 50);

class ActivationOffload {
 public:
  static constexpr sdk::PluginInfo info{
      "activation-offload", "1.1.0",
      "Moves a fraction of the stored activations to host memory (DeepSpeed cpu_checkpointing, Megatron CPU offloading)",
      sdk::Kind::strategy, kAfterActivations};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit ActivationOffload(sdk::Options& options)
      : fraction_(options.number("fraction").value_or(1.0)),
        outside_layers_(options.boolean("outside_layers").value_or(false)) {
    if (!std::isfinite(fraction_) || fraction_ < 0 || fraction_ > 1)
      options.fail("fraction", "must be a number from 0 to 1, got " + memplan::support::number(fraction_));
    if (!options.training())
      options.fail("moves the activations a training step stores, but the scenario has mode = \"infer\"");
  }

  void apply(sdk::Context& ctx) {
    size_t found = 0;
    const size_t present = ctx.size();  // host parts are appended: visit only the items present before
    for (size_t i = 0; i < present; ++i) {
      sdk::Item item = ctx.item(i);
      if (item.role != sdk::Role::activations || item.lifetime != sdk::Lifetime::activation ||
          item.device != sdk::Device::gpu || (item.layer < 0 && !outside_layers_))
        continue;
      ++found;
      if (fraction_ == 0) continue;
      if (fraction_ == 1) {
        item.device = sdk::Device::cpu;
        ctx.set(i, item);
        continue;
      }
      sdk::Item host = item;
      host.device = sdk::Device::cpu;
      host.elements = item.elements * fraction_;
      item.elements -= host.elements;
      ctx.set(i, item);
      ctx.add(host);
    }
    if (found == 0)
      ctx.fail(std::string("found no stored activations ") + (outside_layers_ ? "" : "in the transformer layers ") +
               "to move (items of role activations with lifetime activation on the GPU); configure an [activations] "
               "model that stores per-layer activations, such as use = \"megatron\"" +
               (outside_layers_ ? "" : ", or set outside_layers = true"));
  }

 private:
  double fraction_;
  bool outside_layers_;
};

}  // namespace

MEMPLAN_PLUGIN(ActivationOffload)
