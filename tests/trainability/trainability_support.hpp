// Scenario text and readers shared by the trainability tests.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "test_support.hpp"

namespace memplan::testing::trainability {

// A training scenario: the model lines, then precision, optimizer and
// activation tables and any [[strategy]] tables, as given.
inline std::string train_scenario(const std::string& model, const std::string& rest) {
  return "name = \"trainability\"\nmode = \"train\"\n[model]\n" + model + rest;
}

inline uint64_t role(const Evaluation& evaluation, int32_t role) { return evaluation.component(role); }

inline std::string detail(const Evaluation& evaluation, const std::string& key) {
  return report_detail(evaluation, key);
}

inline Evaluation example(const std::string& name) {
  const std::string path = source_dir() + "/examples/" + name;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return evaluate_paper(text.str(), path);
}

inline std::string library(const std::string& plugin) {
  return " (plugin library " + plugin_dir() + "/memplan-" + plugin + ".so)";
}

}  // namespace memplan::testing::trainability
