// The checks, in order (docs/bundles.md, "Checks"):
//   1. the folder exists and holds a bundle.toml (a regular file, at most 1 MiB);
//   2. bundle.sig: present (else refused unless --allow-unsigned), well formed,
//      its key not revoked, its key trusted (else refused unless
//      --allow-unsigned), and the signature valid over bundle.toml's bytes
//      (an invalid signature is always refused);
//   3. bundle.toml: well formed, its key_id not revoked (with or without
//      bundle.sig), and its key_id the signature's key;
//   4. every listed file: a regular file inside the folder, of the recorded
//      size and sha256;
//   5. every library: built for this platform and a plugin ABI this memplan loads.
// The signature is checked before the manifest is read for anything else, so
// a changed byte anywhere in bundle.toml is reported as what it is.
#include "verify.hpp"

#include <memplan/plugin_abi.h>

#include "crypto.hpp"
#include "manifest.hpp"
#include "store.hpp"
#include "common/toml_guard.hpp"
#include "common/toml_reader.hpp"

namespace memplan::bundle {
namespace fs = std::filesystem;

namespace {

constexpr const char* kSignatureAlgorithm = "ed25519";

std::string abi_text(unsigned major, unsigned minor) { return std::to_string(major) + "." + std::to_string(minor); }

}  // namespace

Signature parse_signature(std::string_view text, const std::string& display_path) {
  toml::table root;
  try {
    root = parse_toml(text, display_path);
  } catch (const toml::parse_error& error) {
    fail_at(location_of(display_path, error.source()),
            "invalid TOML: " + std::string(error.description()) + "; sign the bundle again with memplan bundle sign");
  }
  TomlReader reader(root, display_path, "the signature file");
  reader.reject_unknown_keys({"algorithm", "key_id", "signature"});
  const auto algorithm = reader.string("algorithm");
  const auto key_id = reader.string("key_id");
  const auto hex = reader.string("signature");
  if (!algorithm || !key_id || !hex)
    fail_at(SourceLocation{display_path, 1, 1},
            "a signature file needs algorithm, key_id and signature; sign the bundle again with memplan bundle sign");
  if (*algorithm != kSignatureAlgorithm)
    reader.fail_key("algorithm", "is '" + *algorithm + "', but memplan verifies only \"ed25519\" signatures");
  if (key_id->size() != 16 || !crypto::from_hex(*key_id))
    reader.fail_key("key_id", "must be 16 lower-case hexadecimal digits");
  auto bytes = crypto::from_hex(*hex);
  if (!bytes || bytes->size() != crypto::kSignatureBytes)
    reader.fail_key("signature", "must be 128 lower-case hexadecimal digits (64 bytes)");
  return Signature{*key_id, *bytes};
}

std::string write_signature(const Signature& signature) {
  return "# Ed25519 signature over the exact bytes of bundle.toml (docs/bundles.md).\n"
         "algorithm = \"" + std::string(kSignatureAlgorithm) + "\"\n"
         "key_id = " + toml_quote(signature.key_id) + "\n"
         "signature = " + toml_quote(crypto::to_hex(signature.bytes)) + "\n";
}

std::string check_file(const fs::path& bundle_folder, const std::string& file, uint64_t size,
                       const std::string& sha256) {
  const std::string where = "bundle " + display(bundle_folder) + ": " + file;
  std::error_code error;
  const fs::path path = bundle_folder / file;
  // Every parent inside the bundle must be a real folder: a link could lead out.
  fs::path parent = bundle_folder;
  const fs::path relative(file);
  for (auto part = relative.begin(); part != relative.end(); ++part) {
    parent /= *part;
    const fs::file_status status = fs::symlink_status(parent, error);
    if (fs::is_symlink(status))
      return where + " is reached through a symbolic link (" + parent.lexically_relative(bundle_folder).string() +
             "), which could lead outside the bundle folder; bundles hold regular files only. Get a fresh copy of the "
             "bundle";
  }
  const fs::file_status status = fs::symlink_status(path, error);
  if (error || !fs::is_regular_file(status))
    return where + " is missing or not a regular file. Get a complete copy of the bundle";
  const uintmax_t actual_size = fs::file_size(path, error);
  if (error) return where + " cannot be read (" + error.message() + ")";
  if (actual_size != size)
    return where + " is " + std::to_string(actual_size) + " bytes but bundle.toml records " + std::to_string(size) +
           ": the file changed after the bundle was made. Get a fresh copy from the publisher";
  std::string why;
  auto actual = crypto::sha256_file_hex(path, why);
  if (!actual) return where + " cannot be read (" + why + ")";
  if (*actual != sha256)
    return "bundle " + display(bundle_folder) + ": the sha256 of " + file + " is " + *actual + " but bundle.toml records " + sha256 +
           ": the file changed after the bundle was made. Get a fresh copy from the publisher";
  return "";
}

std::string check_compatibility(const fs::path& bundle_folder, const LibraryEntry& library) {
  const std::string where = "bundle " + display(bundle_folder) + ": " + library.file;
  if (library.platform != host_platform())
    return where + " was built for platform " + library.platform + ", but this memplan runs on " + host_platform() +
           ". Install the bundle built for " + host_platform();
  if (library.abi_major != MEMPLAN_ABI_MAJOR)
    return where + " was built for plugin ABI " + abi_text(library.abi_major, library.abi_minor) +
           " but this memplan implements ABI " + abi_text(MEMPLAN_ABI_MAJOR, MEMPLAN_ABI_MINOR) +
           " (rule: the ABI major versions must be equal). Install a bundle built against memplan SDK " +
           std::to_string(MEMPLAN_ABI_MAJOR) + ".x";
  if (library.abi_minor > MEMPLAN_ABI_MINOR)
    return where + " was built for plugin ABI " + abi_text(library.abi_major, library.abi_minor) +
           ", newer than this memplan's ABI " + abi_text(MEMPLAN_ABI_MAJOR, MEMPLAN_ABI_MINOR) +
           " (rule: the plugin's ABI minor must not exceed the host's). Upgrade memplan, or install a bundle built "
           "against SDK " + abi_text(MEMPLAN_ABI_MAJOR, MEMPLAN_ABI_MINOR);
  return "";
}

VerifiedBundle verify_bundle(const fs::path& folder, const TrustStore& trust, const VerifyPolicy& policy) {
  VerifiedBundle result;
  result.folder = folder;
  const std::string shown = display(folder);

  // 1. The folder and its manifest.
  std::error_code error;
  if (!fs::is_directory(folder, error))
    refuse("bundle folder " + shown + " does not exist or is not a folder; check the path");
  std::string why;
  const fs::path manifest_path = folder / kManifestFile;
  auto manifest_bytes = read_regular_file(manifest_path, kMaxManifestBytes, why);
  if (!manifest_bytes) {
    if (why == "does not exist")
      refuse("bundle folder " + shown + " has no bundle.toml, so it is not a memplan bundle; make one with "
             "`memplan bundle create`");
    refuse(display(manifest_path) + " " + why + "; a bundle manifest is a regular file of at most 1 MiB");
  }
  result.manifest_bytes = *manifest_bytes;

  // 2. The signature.
  const fs::path signature_path = folder / kSignatureFile;
  std::string signer;
  if (!fs::exists(fs::symlink_status(signature_path, error))) {
    if (!policy.allow_unsigned)
      refuse("bundle " + shown + " is not signed (it has no bundle.sig) and unsigned bundles are refused. Sign it "
             "with `memplan bundle sign " + shown + " --key KEYFILE`, or pass --allow-unsigned to accept it anyway "
             "(docs/security.md says what that risks)");
    result.warnings.push_back("bundle " + shown + " is not signed; accepted because of --allow-unsigned");
  } else {
    auto signature_text = read_regular_file(signature_path, 64 * 1024, why);
    if (!signature_text)
      refuse(display(signature_path) + " " + why + "; sign the bundle again with `memplan bundle sign`");
    const Signature signature = parse_signature(*signature_text, display(signature_path));
    signer = signature.key_id;
    result.is_signed = true;
    if (trust.revoked(signature.key_id))
      refuse("bundle " + shown + " is signed by key " + signature.key_id + ", which was revoked (`memplan trust "
             "remove`); a revoked key is refused even with --allow-unsigned. Get the bundle signed with a current "
             "key, or trust the key again with `memplan trust add PUBKEY.pem --reinstate`");
    const auto key = trust.find(signature.key_id);
    if (!key && !trust.repository().empty()) {
      const auto keys = trust.trusted();
      if (!policy.allow_unsigned)
        refuse("bundle " + shown + " was installed from repository '" + trust.repository() + "' and is signed by key " +
               signature.key_id + ", but " +
               (keys.empty() ? "that repository is no longer configured (`memplan repo list`), so no key vouches for it"
                             : "that repository's key is " + keys.front().key_id +
                                   " (a repository's key is trusted only for its own bundles)") +
               ". Add the repository again with `memplan repo add`, or reinstall the bundle (`memplan bundle remove " +
               folder.filename().string() + "`, then install it again)");
      result.warnings.push_back("bundle " + shown + " is signed by key " + signature.key_id + ", which repository '" +
                                trust.repository() + "' does not vouch for; accepted unverified because of "
                                "--allow-unsigned");
    } else if (!key) {
      if (!policy.allow_unsigned)
        refuse("bundle " + shown + " is signed by key " + signature.key_id + ", which is not in your trust store (" +
               display(trust.folder()) + "). If you trust its publisher, add their public key with `memplan trust "
               "add PUBKEY.pem`, or pass --allow-unsigned to accept it anyway");
      result.warnings.push_back("bundle " + shown + " is signed by key " + signature.key_id +
                                ", which is not in your trust store; accepted unverified because of --allow-unsigned");
    } else {
      if (!crypto::verify(key->raw_public_key, *manifest_bytes, signature.bytes))
        refuse("bundle " + shown + ": the signature in bundle.sig does not match bundle.toml for key " + key->key_id +
               " (" + key->label + "): the manifest changed after it was signed, or another key signed it. Do not "
               "use this copy; get a fresh one from the publisher (publishers: sign again with `memplan bundle "
               "sign`)");
      result.trusted = true;
      result.signer_label = key->label;
    }
  }

  // 3. The manifest.
  result.manifest = parse_manifest(*manifest_bytes, display(manifest_path));
  // Deleting bundle.sig must not turn a revoked key's bundle into an unsigned
  // one that --allow-unsigned accepts: the manifest still names the key.
  if (trust.revoked(result.manifest.key_id))
    refuse("bundle " + shown + ": bundle.toml names key " + result.manifest.key_id + ", which was revoked (`memplan "
           "trust remove`); a bundle that names a revoked key is refused even without its bundle.sig and with "
           "--allow-unsigned. Get the bundle signed with a current key, or trust the key again with `memplan trust "
           "add PUBKEY.pem --reinstate`");
  if (result.is_signed && result.manifest.key_id != signer)
    refuse("bundle " + shown + ": bundle.toml names key '" + result.manifest.key_id + "' but bundle.sig was made "
           "with key " + signer + ". Sign it again with `memplan bundle sign " + shown + " --key KEYFILE`");

  // 4. The files.
  if (policy.check_files) {
    for (const LibraryEntry& library : result.manifest.libraries)
      if (std::string refusal = check_file(folder, library.file, library.size, library.sha256); !refusal.empty())
        refuse(refusal);
    for (const DataEntry& data : result.manifest.data)
      if (std::string refusal = check_file(folder, data.file, data.size, data.sha256); !refusal.empty())
        refuse(refusal);
  }

  // 5. Platform and ABI.
  for (const LibraryEntry& library : result.manifest.libraries)
    if (std::string refusal = check_compatibility(folder, library); !refusal.empty()) refuse(refusal);
  return result;
}

std::optional<VerifiedBundle> try_verify_bundle(const fs::path& folder, const TrustStore& trust,
                                                const VerifyPolicy& policy, std::string& refusal) {
  try {
    return verify_bundle(folder, trust, policy);
  } catch (const Refusal& error) {
    refusal = error.text();
  } catch (const Error& error) {
    refusal = error.what();
  }
  return std::nullopt;
}

std::string verified_signer(const fs::path& folder, const TrustStore& trust) {
  // The same checks as load time (files aside): a signature counts only
  // where a load would accept it as trusted.
  std::string refusal;
  const auto verified = try_verify_bundle(folder, trust, VerifyPolicy{true, false}, refusal);
  return verified && verified->trusted ? verified->manifest.key_id : "";
}

}  // namespace memplan::bundle
