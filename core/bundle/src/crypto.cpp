#include "crypto.hpp"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <memory>
#include <vector>

namespace memplan::bundle::crypto {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* ctx) const { EVP_PKEY_CTX_free(ctx); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;
using Bio = std::unique_ptr<BIO, BioFree>;

// The most recent OpenSSL error as text, and the queue cleared.
std::string openssl_error() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no detail from OpenSSL";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

Bio memory_bio(std::string_view text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(length));
}

std::optional<std::string> raw_public(EVP_PKEY* key, std::string& why) {
  if (EVP_PKEY_id(key) != EVP_PKEY_ED25519) {
    why = "it holds a key of another type; bundles use Ed25519 keys (memplan bundle keygen)";
    return std::nullopt;
  }
  unsigned char raw[kPublicKeyBytes];
  size_t length = sizeof raw;
  if (EVP_PKEY_get_raw_public_key(key, raw, &length) != 1 || length != kPublicKeyBytes) {
    why = "its public key cannot be read (" + openssl_error() + ")";
    return std::nullopt;
  }
  return std::string(reinterpret_cast<const char*>(raw), length);
}

}  // namespace

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (unsigned char byte : bytes) {
    hex.push_back(kDigits[byte >> 4]);
    hex.push_back(kDigits[byte & 15]);
  }
  return hex;
}

std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string bytes;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int high = digit(hex[i]), low = digit(hex[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(high * 16 + low));
  }
  return bytes;
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  return to_hex(std::string_view(reinterpret_cast<const char*>(digest), length));
}

std::optional<std::string> sha256_file_hex(const std::filesystem::path& file, std::string& why) {
  // One open file for the check and the read: a regular file, never a link,
  // a FIFO or a device swapped in after the caller's check (O_NONBLOCK keeps
  // the open itself from waiting on a FIFO).
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    why = "it cannot be opened";
    return std::nullopt;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    why = "it is not a regular file";
    return std::nullopt;
  }
  MdCtx ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    why = "SHA-256 is unavailable (" + openssl_error() + ")";
    return std::nullopt;
  }
  std::vector<char> buffer(1 << 16);
  for (;;) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      why = "reading it failed";
      return std::nullopt;
    }
    if (got == 0) break;
    EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(got));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  return to_hex(std::string_view(reinterpret_cast<const char*>(digest), length));
}

std::string key_id(std::string_view raw_public_key) { return sha256_hex(raw_public_key).substr(0, 16); }

std::optional<KeyPair> generate_ed25519(std::string& why) {
  PkeyCtx ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr));
  EVP_PKEY* generated = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &generated) != 1) {
    why = "OpenSSL could not generate an Ed25519 key (" + openssl_error() + ")";
    return std::nullopt;
  }
  Pkey key(generated);
  Bio private_bio(BIO_new(BIO_s_mem()));
  Bio public_bio(BIO_new(BIO_s_mem()));
  if (!private_bio || !public_bio ||
      PEM_write_bio_PrivateKey(private_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1 ||
      PEM_write_bio_PUBKEY(public_bio.get(), key.get()) != 1) {
    why = "OpenSSL could not write the key as PEM (" + openssl_error() + ")";
    return std::nullopt;
  }
  auto raw = raw_public(key.get(), why);
  if (!raw) return std::nullopt;
  return KeyPair{bio_text(private_bio.get()), bio_text(public_bio.get()), *raw};
}

std::optional<std::string> public_key_from_pem(std::string_view pem, std::string& why) {
  Bio bio = memory_bio(pem);
  Pkey key(bio ? PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) {
    ERR_clear_error();
    why = pem.find("PRIVATE KEY") != std::string_view::npos
              ? "it is a private key, which must stay with its owner; pass the public key PEM beside it "
                "(the .pub.pem file that memplan bundle keygen wrote)"
              : "it is not a PEM public key (it should start with -----BEGIN PUBLIC KEY-----)";
    return std::nullopt;
  }
  return raw_public(key.get(), why);
}

std::optional<std::string> public_key_of_private_pem(std::string_view pem, std::string& why) {
  Bio bio = memory_bio(pem);
  Pkey key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) {
    ERR_clear_error();
    why = "it is not an unencrypted PEM private key (it should start with -----BEGIN PRIVATE KEY-----)";
    return std::nullopt;
  }
  return raw_public(key.get(), why);
}

std::optional<std::string> sign(std::string_view private_pem, std::string_view message, std::string& why) {
  Bio bio = memory_bio(private_pem);
  Pkey key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) {
    ERR_clear_error();
    why = "it is not an unencrypted PEM private key (it should start with -----BEGIN PRIVATE KEY-----)";
    return std::nullopt;
  }
  if (!raw_public(key.get(), why)) return std::nullopt;
  MdCtx ctx(EVP_MD_CTX_new());
  unsigned char signature[kSignatureBytes];
  size_t length = sizeof signature;
  // Ed25519 signs the message itself: no separate digest (NULL).
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), signature, &length, reinterpret_cast<const unsigned char*>(message.data()),
                     message.size()) != 1) {
    why = "OpenSSL could not sign (" + openssl_error() + ")";
    return std::nullopt;
  }
  return std::string(reinterpret_cast<const char*>(signature), length);
}

bool verify(std::string_view raw_public_key, std::string_view message, std::string_view signature) {
  if (raw_public_key.size() != kPublicKeyBytes || signature.size() != kSignatureBytes) return false;
  Pkey key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                       reinterpret_cast<const unsigned char*>(raw_public_key.data()),
                                       raw_public_key.size()));
  MdCtx ctx(EVP_MD_CTX_new());
  const bool valid = key && ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) == 1 &&
                     EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                                      signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                                      message.size()) == 1;
  ERR_clear_error();
  return valid;
}

}  // namespace memplan::bundle::crypto
