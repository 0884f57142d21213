// Fuzz target: the plugin index file (core/src/plugins/plugin_index.cpp),
// which every `memplan run` reads from the user's cache folder: a file anyone
// with that account can edit, truncate or fill with anything. Whatever parse()
// accepts must come back unchanged from format() and parse() again, so that
// an index that is trusted says what was written; parse() must refuse, never
// crash or throw, on any other input.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "defect.hpp"
#include "plugins/plugin_index.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace index = memplan::plugin_index;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = index::parse(text);
  if (!parsed) return 0;
  const std::string written = index::format(*parsed);
  const auto reread = index::parse(written);
  if (!reread) memplan::fuzz::defect("parse refuses what format wrote:\n" + written);
  if (index::format(*reread) != written)
    memplan::fuzz::defect("an index changed when written and read again; written:\n" + written);
  if (reread->folder != parsed->folder || reread->entries.size() != parsed->entries.size())
    memplan::fuzz::defect("an index lost its folder or entries when written and read again:\n" + written);
  return 0;
}
