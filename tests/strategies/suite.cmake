# Parallel strategies (issue 3): context, expert and pipeline parallelism
# (interleaved, uneven stages), FSDP, ZeRO-3's gathered parameters, CPU
# offload, Korthikanti et al. 2022 Table 3, and the train-parallel-* examples.
# Included from tests/suites.cmake; paths are relative to tests/.
memplan_add_test(test_strategies
  strategies/korthikanti_table3_test.cpp
  strategies/context_parallel_test.cpp
  strategies/context_ring_test.cpp
  strategies/expert_parallel_test.cpp
  strategies/pipeline_schedule_test.cpp
  strategies/pipeline_runtime_test.cpp
  strategies/fsdp_test.cpp
  strategies/zero3_gathered_test.cpp
  strategies/zero3_setup_test.cpp
  strategies/zero3_step_test.cpp
  strategies/offload_test.cpp
  strategies/examples_test.cpp)
