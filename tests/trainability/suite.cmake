# Trainability (issue 3): the 'freeze' and 'lora' strategies, training on
# quantized weights (QLoRA) with the 'quantized' precision, seed 000's
# Mixtral-8x7B cases and the train-freeze/lora/qlora examples. Included from
# tests/suites.cmake; paths are relative to tests/.
memplan_add_test(test_trainability
  trainability/freeze_test.cpp
  trainability/lora_test.cpp
  trainability/qlora_test.cpp
  trainability/nf4_build_test.cpp
  trainability/seed000_mixtral_test.cpp
  trainability/examples_test.cpp)
