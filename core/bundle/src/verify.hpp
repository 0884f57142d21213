// Bundle verification, split in the steps docs/bundles.md lists so install
// and load time can run exactly the ones they need.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "memplan/bundle/bundle.hpp"

namespace memplan::bundle {

struct Signature {
  std::string key_id;
  std::string bytes;  // 64
};
// Parses and checks bundle.sig's text (algorithm, key id, 64 signature
// bytes); throws Error at `display_path`:line:column. Reads the format only:
// verify_bundle then checks the signature against the trust store.
Signature parse_signature(std::string_view text, const std::string& display_path);
std::string write_signature(const Signature& signature);

// Checks the library's size and sha256 against its manifest entry; "" when
// they match, else the refusal (naming the file and the fix).
std::string check_file(const std::filesystem::path& bundle_folder, const std::string& file, uint64_t size,
                       const std::string& sha256);
// Platform and ABI of one library; "" when this memplan can load it.
std::string check_compatibility(const std::filesystem::path& bundle_folder, const LibraryEntry& library);

}  // namespace memplan::bundle
