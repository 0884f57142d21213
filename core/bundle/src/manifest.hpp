// bundle.toml: reading (strict, every error at file:line:column), writing
// (deterministic, so signing what was written signs what will be read), and
// the rules on names and paths that keep a bundle inside its folder.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "memplan/bundle/bundle.hpp"

namespace memplan::bundle {

inline constexpr const char* kManifestFile = "bundle.toml";
inline constexpr const char* kSignatureFile = "bundle.sig";
inline constexpr const char* kOriginFile = "origin.toml";
inline constexpr size_t kMaxManifestBytes = 1 << 20;

// Parses and checks a manifest; throws Error at `display_path`:line:column.
Manifest parse_manifest(std::string_view text, const std::string& display_path);
std::string write_manifest(const Manifest& manifest);

// nullopt when `path` is a plain relative path inside the bundle (no '..',
// no absolute path, no empty or '.' part, no backslash or control
// character); otherwise the reason.
std::optional<std::string> path_escape_reason(std::string_view path);

// TOML basic string with quotes and escapes.
std::string toml_quote(std::string_view text);

}  // namespace memplan::bundle
