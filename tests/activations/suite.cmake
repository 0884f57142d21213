# Activation models and overhead plugins (issue 3): the megatron model's
# activations outside the layers, MoE routing, gradient accumulation, the
# 'ratio' rule of thumb, and the 'cuda-context', 'allocator' and
# 'comm-buffers' overhead plugins. Included from tests/suites.cmake; paths are
# relative to tests/.
memplan_add_test(test_activations
  activations/megatron_outside_layers_test.cpp
  activations/megatron_layers_test.cpp
  activations/latent_attention_activations_test.cpp
  activations/ratio_test.cpp
  activations/examples_test.cpp)
memplan_add_test(test_overhead
  activations/overhead_test.cpp)
