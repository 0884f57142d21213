# Step time (issue 11): the work records of ABI 1.2, the GPU catalog's
# performance figures and the 'transformer-step' plugin. Included from
# tests/suites.cmake; paths are relative to tests/.
memplan_add_test(test_time
  time/transformer_step_test.cpp
  time/latent_attention_step_test.cpp
  time/step_time_test.cpp
  time/collectives_test.cpp
  time/search_test.cpp
  time/published_throughput_test.cpp)
