# Optimizers and precision recipes (issue 3): lion, adafactor, adam-8bit, adam-4bit, the
# optimizer step's temporaries (implementation = for-loop | foreach | fused),
# the fp8 recipe, main_grads and the Megatron-LM distributed optimizer table,
# and the hand-checked figures of examples/train-optimizer-*.toml and
# examples/train-precision-*.toml. Included from tests/suites.cmake; paths are
# relative to tests/.
memplan_add_test(test_optimizers
  optimizers/optimizer_states_test.cpp
  optimizers/step_temporaries_test.cpp
  optimizers/precision_recipes_test.cpp
  optimizers/train_examples_test.cpp)
