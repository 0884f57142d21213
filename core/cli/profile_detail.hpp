// `memplan plugins NAME` for a framework profile: what a scenario that names
// it gets (its defaults, readings, runtime components and dated blocks),
// so that no one has to read share/memplan/frameworks/*.toml to learn it.
#pragma once

#include "memplan/core/catalog.hpp"

namespace memplan::cli {

// Writes `profile` to standard output as the catalog holds it (a profile that
// extends another is shown with the base's behaviour resolved into it, as a
// scenario gets it). `catalog` is the one it came from: it says which modes
// the profile is the default of.
void print_framework_profile(const FrameworkProfile& profile, const Catalog& catalog);

}  // namespace memplan::cli
