# Memory as the GPU shows it (issue "Memory as the GPU shows it"): framework
# profiles and the three quantities, eager layers and loss paths, the runtime's
# buffers, and `memplan validate`. Included from tests/suites.cmake; paths are
# relative to tests/.
memplan_add_test(test_frameworks
  frameworks/profiles_test.cpp
  frameworks/eager_layers_test.cpp
  frameworks/autocast_test.cpp
  frameworks/runtime_memory_test.cpp
  frameworks/module_buffers_test.cpp
  frameworks/packed_linear_inputs_test.cpp
  frameworks/torch_ops_dequantize_test.cpp
  frameworks/litgpt_layers_test.cpp
  frameworks/lora_kernels_test.cpp
  frameworks/dora_test.cpp
  frameworks/hf_measured_layers_test.cpp
  frameworks/stream_pools_test.cpp
  frameworks/loss_segments_test.cpp
  frameworks/varying_lengths_test.cpp
  frameworks/fused_loss_test.cpp
  frameworks/trl_profile_test.cpp
  frameworks/validate_test.cpp
  frameworks/run_dates_test.cpp
  frameworks/torchtune_readme_test.cpp)
target_link_libraries(test_frameworks PRIVATE nlohmann_json::nlohmann_json)
