# The seed articles' worked examples (../shared/seeds), one file per seed, each
# in the seed's own unit. docs/seed-notes.md says where each seed is right,
# wrong or ambiguous and which test reproduces what. Seed 003's tables and
# seed 004's 16-bytes table are in tests/sources/bytes_per_parameter_test.cpp.
# Included from tests/suites.cmake; paths are relative to tests/.
memplan_add_test(test_seeds
  seeds/seed000_test.cpp
  seeds/seed001_test.cpp
  seeds/seed002_test.cpp
  seeds/seed004_test.cpp)
