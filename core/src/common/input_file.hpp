// Reading a file memplan was told to read (a scenario, a config.json, a
// framework profile, a catalog file, a bundle's manifest or signature).
// Only regular files: a FIFO, /dev/zero or /dev/urandom would hang memplan or
// fill its memory, and a scenario someone sends may name any of them. And only
// up to a size far above any real file of its kind.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace memplan {

// Far above any scenario, profile or transformers config.json (the largest
// configs on the Hugging Face Hub are tens of kilobytes).
inline constexpr uint64_t kMaxTextInput = 16u << 20;

enum class Links { follow, refuse };

// The file's bytes, or nullopt with `why` set to a phrase that completes
// "<file> ...": "does not exist", "is a folder, not a file", "is a
// device, pipe or socket, not a regular file", "is larger than N bytes",
// "cannot be read (...)".
// The check and the read use one open file, so a file swapped for a FIFO
// between them cannot block the read.
std::optional<std::string> read_regular_file(const std::filesystem::path& file, uint64_t limit, std::string& why,
                                             Links links = Links::refuse);

// As above, or throws Error("<file>: error: cannot read the <what>: <why>").
std::string read_input_file(const std::filesystem::path& file, std::string_view what,
                            uint64_t limit = kMaxTextInput);

// Standard input, read to its end up to `limit` bytes (`memplan run -`), or
// throws Error("<stdin>: error: cannot read the <what>: ...").
std::string read_standard_input(std::string_view what, uint64_t limit = kMaxTextInput);

}  // namespace memplan
