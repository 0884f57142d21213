# Model catalog and import (issue 3): exact preset totals, the model keys for
# encoders (BERT), and [model] hf_config. Included from tests/suites.cmake;
# paths are relative to tests/.
memplan_add_test(test_catalog
  catalog/preset_totals_test.cpp
  catalog/model_keys_test.cpp
  catalog/hf_config_test.cpp
  catalog/gpu_catalog_test.cpp
  catalog/latent_attention_test.cpp)
# latent_attention_test reads configs with the core's own reader (read_hf_config), as the fuzz target does.
target_include_directories(test_catalog PRIVATE ${PROJECT_SOURCE_DIR}/core/src)
