# Precision plugins for inference (issue 4): 'quantized' and 'rule-of-thumb',
# the inference presets and the examples/infer-*.toml figures. Included from
# tests/suites.cmake; paths are relative to tests/.
memplan_add_test(test_precision
  precision/quantized_test.cpp
  precision/rule_of_thumb_test.cpp
  precision/presets_test.cpp
  precision/infer_examples_test.cpp)
