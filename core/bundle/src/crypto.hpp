// The bundle code's only contact with OpenSSL's libcrypto: SHA-256 and
// Ed25519 (EVP_DigestSign/EVP_DigestVerify with no digest, as Ed25519 hashes
// internally). Keys cross this interface as PEM text or raw bytes, so no
// OpenSSL type leaks out. Failures come back as nullopt plus a reason.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace memplan::bundle::crypto {

constexpr size_t kPublicKeyBytes = 32;
constexpr size_t kSignatureBytes = 64;

std::string to_hex(std::string_view bytes);  // lower-case
std::optional<std::string> from_hex(std::string_view hex);

std::string sha256_hex(std::string_view bytes);
// Reads the file in chunks; nullopt and `why` when it cannot be read.
std::optional<std::string> sha256_file_hex(const std::filesystem::path& file, std::string& why);

// The key id: the first 16 hex digits of sha256(raw 32-byte public key).
std::string key_id(std::string_view raw_public_key);

struct KeyPair {
  std::string private_pem;  // PKCS#8, unencrypted
  std::string public_pem;   // SubjectPublicKeyInfo
  std::string raw_public_key;
};
std::optional<KeyPair> generate_ed25519(std::string& why);

// The raw public key of an Ed25519 public key PEM.
std::optional<std::string> public_key_from_pem(std::string_view pem, std::string& why);
// The raw public key of an Ed25519 private key PEM.
std::optional<std::string> public_key_of_private_pem(std::string_view pem, std::string& why);

std::optional<std::string> sign(std::string_view private_pem, std::string_view message, std::string& why);
bool verify(std::string_view raw_public_key, std::string_view message, std::string_view signature);

}  // namespace memplan::bundle::crypto
