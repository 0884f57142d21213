# Inference memory (issue 4): the 'inference' KV cache and transient model and
# the 'serving-budget' plugin. Included from tests/suites.cmake; paths are
# relative to tests/.
memplan_add_test(test_inference
  inference/kv_cache_test.cpp
  inference/forward_transient_test.cpp
  inference/serving_budget_test.cpp
  inference/prefill_default_test.cpp
  inference/latent_kv_test.cpp
  inference/sampler_test.cpp
  inference/moe_workspace_test.cpp
  inference/rope_cache_test.cpp
  inference/model_held_test.cpp
  inference/v0_engine_test.cpp
  inference/generate_test.cpp)
