// Fuzz target: the two files of a bundle that memplan parses, bundle.toml
// (the manifest) and bundle.sig, through the readers verify_bundle calls on
// their bytes (core/bundle/src/verify.cpp, steps 2 and 3) for `memplan bundle
// verify|install` and at every load of an installed bundle, and a
// repository's index.toml, which `bundle install NAME` reads from a web
// server (core/bundle/src/repository.cpp). Each input is read as all three:
// they are all TOML, so one corpus serves the three readers.
//
// Beyond "no crash": what either reader accepts must survive being written
// and read again unchanged. `memplan bundle sign` signs the bytes
// write_manifest produced, and every later verify reads them with
// parse_manifest; if the two disagreed, a signed manifest could mean
// something other than what its author wrote.
//
// A memplan::Error is the normal answer to a bad file; any other exception,
// and every sanitizer report, is a defect.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "manifest.hpp"
#include "verify.hpp"
#include "defect.hpp"
#include "memplan/core/error.hpp"

namespace {

constexpr const char* kManifestFile = "fuzz-bundle/bundle.toml";
constexpr const char* kSignatureFile = "fuzz-bundle/bundle.sig";

void check_manifest(std::string_view text) {
  namespace bundle = memplan::bundle;
  const bundle::Manifest manifest = bundle::parse_manifest(text, kManifestFile);
  const std::string written = bundle::write_manifest(manifest);
  bundle::Manifest reread;
  try {
    reread = bundle::parse_manifest(written, kManifestFile);
  } catch (const memplan::Error& error) {
    memplan::fuzz::defect("parse_manifest refuses what write_manifest wrote (" + std::string(error.what()) +
                          "):\n" + written);
  }
  if (bundle::write_manifest(reread) != written)
    memplan::fuzz::defect("a manifest changed when written and read again; written:\n" + written + "\nthen:\n" +
                          bundle::write_manifest(reread));
}

void check_signature(std::string_view text) {
  namespace bundle = memplan::bundle;
  const bundle::Signature signature = bundle::parse_signature(text, kSignatureFile);
  const std::string written = bundle::write_signature(signature);
  bundle::Signature reread;
  try {
    reread = bundle::parse_signature(written, kSignatureFile);
  } catch (const memplan::Error& error) {
    memplan::fuzz::defect("parse_signature refuses what write_signature wrote (" + std::string(error.what()) +
                          "):\n" + written);
  }
  if (reread.key_id != signature.key_id || reread.bytes != signature.bytes)
    memplan::fuzz::defect("a signature changed when written and read again:\n" + written);
}

// `bundle publish` rewrites the index with write_index after reading it with
// parse_index: what one accepts, the other must keep.
void check_index(std::string_view text) {
  namespace bundle = memplan::bundle;
  const bundle::RepositoryIndex index = bundle::parse_index(text, "fuzz-repository/index.toml");
  const std::string written = bundle::write_index(index);
  bundle::RepositoryIndex reread;
  try {
    reread = bundle::parse_index(written, "fuzz-repository/index.toml");
  } catch (const memplan::Error& error) {
    memplan::fuzz::defect("parse_index refuses what write_index wrote (" + std::string(error.what()) + "):\n" +
                          written);
  }
  if (bundle::write_index(reread) != written)
    memplan::fuzz::defect("an index changed when written and read again; written:\n" + written);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  memplan::fuzz::refusal_is_an_error(check_manifest, text);
  memplan::fuzz::refusal_is_an_error(check_signature, text);
  memplan::fuzz::refusal_is_an_error(check_index, text);
  return 0;
}
