// The install step that `bundle install DIR` and installs from a repository
// share: verify a bundle folder against a trust view, copy it into the store,
// verify the copy, record its origin, rename it into place (install.cpp).
#pragma once

#include <filesystem>

#include "memplan/bundle/bundle.hpp"

namespace memplan::bundle {

struct FolderInstall {
  std::filesystem::path source;  // the bundle folder
  const TrustStore& trust;       // the keys that vouch for it: the trust store, or one repository's key
  VerifyPolicy policy;
  bool force = false;
  Origin origin;  // source, repository and pin; install fills in the time, key id and publisher
  bool refuse_source_in_store = true;  // a folder inside bundles/ is never a source
};
std::string install_folder(const std::filesystem::path& home, const FolderInstall& install);

// Removes what interrupted downloads left in <home>/downloads/ (repository.cpp).
void remove_interrupted_downloads(const std::filesystem::path& home);

}  // namespace memplan::bundle
