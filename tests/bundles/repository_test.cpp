// Bundle repositories (issue 14) through the real command line: `bundle
// publish` writes a repository folder, Python's http.server serves it on
// 127.0.0.1 (support/http_server.hpp), `repo add` adds it to another home and
// `bundle install NAME` installs from it. Each test has its own homes and
// server; every wait is bounded (the server's start, 10 s; libcurl's stall
// limit), and no test asserts on a duration.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "http_server.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// SHA-256 with libcrypto directly, not through the core's crypto code.
std::string sha256_of(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr);
  static const char* digits = "0123456789abcdef";
  std::string text;
  for (unsigned int i = 0; i < size; ++i) {
    text.push_back(digits[digest[i] >> 4]);
    text.push_back(digits[digest[i] & 15]);
  }
  return text;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// The value of `key = "..."` in a TOML file memplan wrote.
std::string toml_value(const std::string& text, const std::string& key) {
  const std::string marker = "\n" + key + " = \"";
  const size_t start = ("\n" + text).find(marker);
  if (start == std::string::npos) return "";
  const size_t value = start + marker.size() - 1;
  return text.substr(value, text.find('"', value) - value);
}

std::string platform_from_uname() {
  return run_command("printf '%s-%s' \"$(uname -s | tr A-Z a-z)\" \"$(uname -m)\"").out;
}

// 1e9 fp32 parameters trained with `optimizer`; bundle-alpha keeps 5 states
// per weight and bundle-beta 7, so optimizer states are 5 x 4e9 or 7 x 4e9 bytes.
std::string scenario_text(const std::string& optimizer, const std::string& plugins_table = "") {
  return "name = \"repository-test\"\nmode = \"train\"\n[model]\nparams = 1e9\n[precision]\nuse = \"fp32\"\n"
         "[optimizer]\nuse = \"" + optimizer + "\"\n[activations]\nuse = \"none\"\n" + plugins_table;
}

class Repositories : public ::testing::Test {
 protected:
  TempDir tmp;

  std::string at(const std::string& relative) const { return tmp.path() + "/" + relative; }
  // The publisher's home and the user's: keys and stores never shared.
  std::string publisher_home() const { return at("publisher-home"); }
  std::string user_home() const { return at("user-home"); }
  std::string key_file(const std::string& name) const { return at("keys/" + name + ".pem"); }
  std::string public_key_file(const std::string& name) const { return at("keys/" + name + ".pub.pem"); }

  CommandResult memplan(const std::string& home, const std::string& arguments) const {
    return run_command("env MEMPLAN_HOME=" + home + " " + cli_path() + " " + arguments);
  }
  std::string ok(const std::string& home, const std::string& arguments) const {
    CommandResult result = memplan(home, arguments);
    EXPECT_EQ(result.exit_code, 0) << arguments << "\n" << result.err;
    EXPECT_EQ(result.err, "") << arguments;
    return result.out;
  }
  CommandResult user(const std::string& arguments) const { return memplan(user_home(), arguments); }
  // A user command that must be refused (status 1, one line on stderr holding every part).
  std::string refused(const std::string& arguments, const std::vector<std::string>& parts) const {
    CommandResult result = user(arguments);
    EXPECT_EQ(result.exit_code, 1) << arguments << "\n" << result.out;
    EXPECT_EQ(result.out, "") << arguments;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    for (const std::string& part : parts) EXPECT_TRUE(contains(result.err, part)) << part << "\nin: " << result.err;
    return result.err;
  }

  // keys/<name>.pem and .pub.pem; returns the key id.
  std::string keygen(const std::string& name) const {
    fs::create_directories(at("keys"));
    const std::string out = ok(publisher_home(), "bundle keygen --out " + key_file(name));
    return out.substr(out.rfind(' ') + 1, 16);
  }
  // A signed bundle folder <folder> of `library`, named `name`, at `version`, signed with key `key`.
  std::string signed_bundle(const std::string& folder, const std::string& name, const std::string& version,
                            const std::string& key, const std::string& library = BUNDLE_ALPHA_LIBRARY) const {
    fs::create_directories(fs::path(at(folder)).parent_path());
    ok(publisher_home(), "bundle create " + at(folder) + " --name " + name + " --version " + version +
                             " --publisher 'Acme Corp' --library " + library);
    ok(publisher_home(), "bundle sign " + at(folder) + " --key " + key_file(key));
    return at(folder);
  }
  std::string publish(const std::string& bundle, const std::string& repository) const {
    return ok(publisher_home(), "bundle publish " + bundle + " --to " + at(repository));
  }
  std::set<std::string> entries(const std::string& folder) const {
    std::set<std::string> names;
    std::error_code error;
    for (const auto& entry : fs::recursive_directory_iterator(folder, error))
      names.insert(fs::relative(entry.path(), folder).string());
    return names;
  }
  // The user's store holds no bundle and no download, finished or not.
  void expect_nothing_installed() const {
    EXPECT_EQ(entries(user_home() + "/bundles"), std::set<std::string>{});
    EXPECT_EQ(entries(user_home() + "/downloads"), std::set<std::string>{});
  }
  std::string optimizer_states(const std::string& scenario) const {
    const CommandResult run = user("run " + scenario + " --format json");
    EXPECT_EQ(run.exit_code, 0) << run.err;
    const size_t at = run.out.find("\"optimizer_states\": ");
    if (at == std::string::npos) return "";
    const size_t start = at + 20;
    return run.out.substr(start, run.out.find_first_of(",\n}", start) - start);
  }
};

// ---------------------------------------------------------------------------
// The whole path.

TEST_F(Repositories, PublishServeAddInstallByNameAndRun) {
  const std::string key_id = keygen("acme");
  const std::string bundle = signed_bundle("out/acme", "acme", "1.2.0", "acme");
  const std::string platform = platform_from_uname();
  const std::string archive = "bundles/acme/acme-1.2.0-" + platform + ".mpbundle";
  const std::string published = publish(bundle, "repo");
  const std::string archive_bytes = read_bytes(at("repo/" + archive));
  const std::string sha = sha256_of(archive_bytes);
  EXPECT_EQ(published, "published bundle acme 1.2.0 for " + platform + " to " + at("repo") + " (" + archive +
                           ", sha256 " + sha + "); serve the folder with any web server, and users add it with "
                           "`memplan repo add NAME URL --key PUBKEY.pem`\n");
  EXPECT_EQ(read_bytes(at("repo/index.toml")),
            "# memplan bundle repository index (docs/bundles.md, \"Repositories\"), written by `memplan bundle "
            "publish`.\n"
            "# Not signed: each archive's sha256 is checked, and each bundle's own signature with the repository's "
            "key.\n"
            "format = 1\n"
            "key_id = \"" + key_id + "\"\n"
            "\n"
            "[[bundle]]\n"
            "name = \"acme\"\n"
            "version = \"1.2.0\"\n"
            "platform = \"" + platform + "\"\n"
            "publisher = \"Acme Corp\"\n"
            "archive = \"" + archive + "\"\n"
            "sha256 = \"" + sha + "\"\n"
            "size = " + std::to_string(archive_bytes.size()) + "\n");
  // The archive format (docs/bundles.md): the manifest first, each file with its size, then "end".
  const std::string manifest = read_bytes(bundle + "/bundle.toml");
  const std::string first = "memplan-bundle-archive 1\nfile " + std::to_string(manifest.size()) + " bundle.toml\n" +
                            manifest + "\nfile ";
  EXPECT_EQ(archive_bytes.substr(0, first.size()), first);
  EXPECT_TRUE(archive_bytes.ends_with("\nend\n"));
  // Publishing the same bundle again changes nothing.
  EXPECT_EQ(publish(bundle, "repo"), "bundle acme 1.2.0 for " + platform + " is already published in " + at("repo") +
                                         " with the same content; nothing changed\n");

  LocalHttpServer server(at("repo"));
  ASSERT_TRUE(server.started()) << server.problem();
  EXPECT_EQ(ok(user_home(), "repo add team " + server.url() + "/ --key " + public_key_file("acme")),
            "added repository team (" + server.url() + "); its key " + key_id + " is trusted only for bundles "
            "installed from it: `memplan bundle install NAME --repo team`\n");
  EXPECT_EQ(ok(user_home(), "repo list"), "team\t" + server.url() + "\t" + key_id + "\n");
  // The repository's key is not in the trust store.
  EXPECT_EQ(ok(user_home(), "trust list"), "");

  const std::string installed = ok(user_home(), "bundle install acme");
  EXPECT_EQ(installed, "installed bundle acme 1.2.0 from Acme Corp (signed by key " + key_id + " (repository 'team')) "
                       "into " + user_home() + "/bundles/acme\n");
  const std::string origin = read_bytes(user_home() + "/bundles/acme/origin.toml");
  EXPECT_EQ(toml_value(origin, "source"), server.url() + "/" + archive);
  EXPECT_EQ(toml_value(origin, "repository"), "team");
  EXPECT_EQ(toml_value(origin, "key_id"), key_id);
  EXPECT_EQ(entries(user_home() + "/downloads"), std::set<std::string>{});
  EXPECT_EQ(ok(user_home(), "bundle list"), "acme\t1.2.0\tAcme Corp\t" + key_id + "\tbundle-alpha\t" + server.url() +
                                                "/" + archive + "\n");
  // bundle-alpha keeps 5 fp32 states per weight: 5 x 4 bytes x 1e9.
  EXPECT_EQ(optimizer_states(tmp.write("run.toml", scenario_text("bundle-alpha"))), "20000000000");
}

// ---------------------------------------------------------------------------
// The installed copy is the cache: no network once installed.

TEST_F(Repositories, InstalledBundleServesOfflineAndScenarioRequirementsHold) {
  keygen("acme");
  publish(signed_bundle("out/acme", "acme", "1.2.0", "acme"), "repo");
  const std::string scenario =
      tmp.write("needs.toml", scenario_text("bundle-alpha", "[plugins]\nbundles = [\"acme>=1.2\"]\n"));
  std::string url;
  {
    LocalHttpServer server(at("repo"));
    ASSERT_TRUE(server.started()) << server.problem();
    url = server.url();
    ok(user_home(), "repo add team " + url + " --key " + public_key_file("acme"));
    ok(user_home(), "bundle install acme");
  }
  // The server is gone: the install answers from the store, and runs need no network.
  EXPECT_EQ(ok(user_home(), "bundle install acme"),
            "bundle acme 1.2.0 is already installed (from repository team); nothing was downloaded. `memplan bundle "
            "install acme --upgrade` looks for a newer version\n");
  EXPECT_EQ(optimizer_states(scenario), "20000000000");
  // Looking for a newer version needs the repository, and says so.
  refused("bundle install acme --upgrade", {"no repository offers bundle 'acme'", "repository 'team': cannot download " +
                                            url + "/index.toml"});
  EXPECT_EQ(optimizer_states(scenario), "20000000000");
}

// ---------------------------------------------------------------------------
// Upgrade and pinning.

TEST_F(Repositories, NewestByDefaultPinWithAtVersionUpgradeMovesOn) {
  keygen("acme");
  publish(signed_bundle("out/1.0.0/acme", "acme", "1.0.0", "acme"), "repo");
  publish(signed_bundle("out/1.10.0/acme", "acme", "1.10.0", "acme"), "repo");
  publish(signed_bundle("out/1.9.0/acme", "acme", "1.9.0", "acme"), "repo");
  LocalHttpServer server(at("repo"));
  ASSERT_TRUE(server.started()) << server.problem();
  ok(user_home(), "repo add team " + server.url() + " --key " + public_key_file("acme"));
  auto installed_version = [&] { return toml_value(read_bytes(user_home() + "/bundles/acme/bundle.toml"), "version"); };

  // Newest by numbers (1.10.0 > 1.9.0), not by text.
  ok(user_home(), "bundle install acme");
  EXPECT_EQ(installed_version(), "1.10.0");
  EXPECT_EQ(ok(user_home(), "bundle install acme --upgrade"),
            "bundle acme 1.10.0 from repository team is the newest version for " + platform_from_uname() +
                "; nothing was downloaded\n");

  // A pin installs exactly that version (a downgrade here) and upgrade leaves it.
  EXPECT_TRUE(ok(user_home(), "bundle install acme@1.0.0").ends_with("; pinned at 1.0.0 (`memplan bundle upgrade` "
                                                                      "leaves it)\n"));
  EXPECT_EQ(installed_version(), "1.0.0");
  EXPECT_EQ(toml_value(read_bytes(user_home() + "/bundles/acme/origin.toml"), "pinned"), "1.0.0");
  EXPECT_EQ(ok(user_home(), "bundle upgrade"), "bundle acme is pinned at 1.0.0 (installed as acme@1.0.0), so it "
                                               "stays; `memplan bundle install acme --upgrade` moves it to the newest "
                                               "version\n");
  EXPECT_EQ(installed_version(), "1.0.0");
  // The same pin again is answered from the store.
  EXPECT_TRUE(contains(ok(user_home(), "bundle install acme@1.0"), "is already installed")) ;
  // A version the repository does not have.
  refused("bundle install acme@2.0.0", {"no repository offers bundle 'acme' version 2.0.0 for " + platform_from_uname(),
                                        "versions offered: 1.0.0, 1.10.0, 1.9.0"});
  // --upgrade is explicit: the newest, and the pin goes.
  ok(user_home(), "bundle install acme --upgrade");
  EXPECT_EQ(installed_version(), "1.10.0");
  EXPECT_EQ(toml_value(read_bytes(user_home() + "/bundles/acme/origin.toml"), "pinned"), "");
  // Pinning the installed version needs no download; --upgrade at the newest drops the pin.
  EXPECT_EQ(ok(user_home(), "bundle install acme@1.10.0"),
            "bundle acme 1.10.0 is already installed (from repository team), and is pinned at 1.10.0 now; nothing "
            "was downloaded. `memplan bundle install acme --upgrade` looks for a newer version\n");
  EXPECT_EQ(toml_value(read_bytes(user_home() + "/bundles/acme/origin.toml"), "pinned"), "1.10.0");
  EXPECT_TRUE(contains(ok(user_home(), "bundle upgrade"), "bundle acme is pinned at 1.10.0"));
  EXPECT_TRUE(contains(ok(user_home(), "bundle install acme --upgrade"), "is the newest version for " +
                                                                           platform_from_uname() + " (no longer pinned)"));
  EXPECT_EQ(toml_value(read_bytes(user_home() + "/bundles/acme/origin.toml"), "pinned"), "");
}

// ---------------------------------------------------------------------------
// Key scoping.

TEST_F(Repositories, RepositoryKeyVouchesOnlyForItsOwnBundles) {
  const std::string a_key = keygen("team-a");
  const std::string b_key = keygen("team-b");
  // Repository folder "a" is served with B's bundle in it, and an index that claims A's key.
  const std::string beta = signed_bundle("out/beta", "beta", "1.0.0", "team-b", BUNDLE_BETA_LIBRARY);
  publish(beta, "a");
  publish(beta, "b");
  LocalHttpServer server_a(at("a"));
  LocalHttpServer server_b(at("b"));
  ASSERT_TRUE(server_a.started() && server_b.started()) << server_a.problem() << server_b.problem();
  ok(user_home(), "repo add team-a " + server_a.url() + " --key " + public_key_file("team-a"));
  ok(user_home(), "repo add team-b " + server_b.url() + " --key " + public_key_file("team-b"));

  // The index says B's key: refused before any download.
  refused("bundle install beta --repo team-a",
          {server_a.url() + "/index.toml says its bundles are signed by key " + b_key +
           ", but you added the repository with key " + a_key});
  // The index claims A's key, but the bundle inside is signed by B's: refused, naming both.
  write_bytes(at("a/index.toml"), replaced(read_bytes(at("a/index.toml")), b_key, a_key));
  refused("bundle install beta --repo team-a",
          {"bundle 'beta' 1.0.0 from repository 'team-a' (" + server_a.url() + "/bundles/beta/", "is signed by key " +
           b_key + ", the key of repository 'team-b', not by the key of repository 'team-a' (" + a_key + ")",
           "Nothing was installed"});
  expect_nothing_installed();
  // Two repositories offer it: the user chooses.
  refused("bundle install beta", {"is offered by repositories 'team-a' and 'team-b'; choose one with --repo NAME"});
  // From its own repository it installs.
  ok(user_home(), "bundle install beta --repo team-b");

  // A repository's key is not trusted for folders: team-b's key signs this folder, and it is refused.
  const std::string folder = signed_bundle("out/gamma", "gamma", "1.0.0", "team-b");
  refused("bundle install " + folder, {"is signed by key " + b_key + ", which is not in your trust store"});

  // Removing the repository removes its key's word: its bundle is refused at load.
  EXPECT_EQ(ok(user_home(), "repo remove team-b"),
            "removed repository team-b (" + server_b.url() + "); no key vouches any more for the bundles installed "
            "from it (beta), so they are refused at load: remove them with `memplan bundle remove NAME`, or add the "
            "repository again\n");
  const std::string scenario =
      tmp.write("needs.toml", scenario_text("bundle-beta", "[plugins]\nbundles = [\"beta\"]\n"));
  const CommandResult run = user("run " + scenario);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.err, "was installed from repository 'team-b' and is signed by key " + b_key +
                                    ", but that repository is no longer configured")) << run.err;
  // Added again, it vouches again.
  ok(user_home(), "repo add team-b " + server_b.url() + " --key " + public_key_file("team-b"));
  EXPECT_EQ(optimizer_states(scenario), "28000000000");  // 7 states x 4 bytes x 1e9
}

// ---------------------------------------------------------------------------
// Downloads are verified before the store sees them; a failed one leaves nothing.

TEST_F(Repositories, InterruptedOrAlteredDownloadLeavesNothing) {
  keygen("acme");
  publish(signed_bundle("out/acme", "acme", "1.2.0", "acme"), "repo");
  LocalHttpServer server(at("repo"));
  ASSERT_TRUE(server.started()) << server.problem();
  // The server closes the connection half way through the archive.
  ok(user_home(), "repo add cut " + server.url() + "/truncated --key " + public_key_file("acme"));
  refused("bundle install acme", {"cannot download bundle 'acme' 1.2.0 from repository 'cut': " + server.url() +
                                  "/truncated/bundles/acme/", "Nothing was installed"});
  expect_nothing_installed();

  // The archive changed on the server after it was published.
  ok(user_home(), "repo add team " + server.url() + " --key " + public_key_file("acme"));
  const std::string archive = at("repo/bundles/acme/acme-1.2.0-" + platform_from_uname() + ".mpbundle");
  std::string bytes = read_bytes(archive);
  const std::string listed_sha = sha256_of(bytes);
  bytes[bytes.size() / 2] ^= 1;
  write_bytes(archive, bytes);
  refused("bundle install acme --repo team",
          {"with sha256 " + sha256_of(bytes) + ", but " + server.url() + "/index.toml lists " +
           std::to_string(bytes.size()) + " bytes with sha256 " + listed_sha + ". Nothing was installed"});
  expect_nothing_installed();
}

// ---------------------------------------------------------------------------
// Bad answers from a repository never crash and say where.

TEST_F(Repositories, BadIndexesAndServersAreRefusedWithWhere) {
  const std::string key_id = keygen("acme");
  publish(signed_bundle("out/acme", "acme", "1.2.0", "acme"), "repo");
  const std::string good_index = read_bytes(at("repo/index.toml"));
  LocalHttpServer server(at("repo"));
  ASSERT_TRUE(server.started()) << server.problem();
  ok(user_home(), "repo add team " + server.url() + " --key " + public_key_file("acme"));
  const std::string index_url = server.url() + "/index.toml";
  auto with_index = [&](const std::string& text, const std::vector<std::string>& parts) {
    write_bytes(at("repo/index.toml"), text);
    refused("bundle install acme", parts);
    expect_nothing_installed();
  };
  with_index("format = 1\n[[bundle\n", {"repository 'team': " + index_url + ":2:", "invalid TOML"});
  with_index(replaced(good_index, "publisher = \"Acme Corp\"\n", ""),
             {index_url + ":6:1: error: in [[bundle]] #1, 'publisher' is missing"});
  with_index(good_index + good_index.substr(good_index.find("\n[[bundle]]")),
             {index_url + ":15:1: error: bundle 'acme' version 1.2.0 for " + platform_from_uname() +
              " is listed twice"});
  with_index(replaced(good_index, "format = 1", "format = 2"), {"this memplan reads index format 1; upgrade memplan"});
  with_index(replaced(good_index, "archive = \"", "archive = \"../"), {"leaves the bundle folder through '..'"});
  with_index(replaced(good_index, "size = ", "size = -"), {"'size' must be between 1 and"});
  with_index(good_index + "#" + std::string(5u << 20, 'x') + "\n",
             {"cannot download " + index_url + ": it is larger than 4194304 bytes"});
  write_bytes(at("repo/index.toml"), good_index);

  // An archive that tries to write outside its folder.
  const std::string evil = "memplan-bundle-archive 1\nfile 3 ../escaped\nabc\nend\n";
  write_bytes(at("repo/bundles/acme/evil.mpbundle"), evil);
  std::string index = replaced(good_index, toml_value(good_index, "archive"), "bundles/acme/evil.mpbundle");
  index = replaced(index, toml_value(good_index, "sha256"), sha256_of(evil));
  index = replaced(index, "size = " + index.substr(index.find("size = ") + 7, index.find('\n', index.find("size = ")) -
                                                                              index.find("size = ") - 7),
                   "size = " + std::to_string(evil.size()));
  with_index(index, {"the bundle archive " + server.url() + "/bundles/acme/evil.mpbundle is not valid at byte",
                     "the file name '../escaped' leaves the bundle folder through '..'"});
  EXPECT_FALSE(fs::exists(user_home() + "/downloads/escaped"));
  write_bytes(at("repo/index.toml"), good_index);

  // Servers that answer badly.
  ok(user_home(), "repo add missing " + server.url() + "/no-such-folder --key " + public_key_file("acme"));
  refused("bundle install acme --repo missing", {"cannot download " + server.url() + "/no-such-folder/index.toml: the "
                                                 "server answered HTTP 404"});
  ok(user_home(), "repo add failing " + server.url() + "/status-500 --key " + public_key_file("acme"));
  refused("bundle install acme --repo failing", {"the server answered HTTP 500"});
  ok(user_home(), "repo add redirecting " + server.url() + "/redirect-file --key " + public_key_file("acme"));
  refused("bundle install acme --repo redirecting", {"it leads to a scheme other than http or https", "which memplan "
                                                     "never follows"});
  expect_nothing_installed();
  (void)key_id;
}

TEST_F(Repositories, RepoAndPublishRefuseBadInput) {
  keygen("acme");
  refused("repo add team file:///etc --key " + public_key_file("acme"),
          {"'file:///etc' is not an http:// or https:// URL"});
  refused("repo add Team http://127.0.0.1:1 --key " + public_key_file("acme"), {"'Team' is not a repository name"});
  refused("repo add team http://127.0.0.1:1 --key " + key_file("acme"), {"is not an Ed25519 public key",
                                                                         "it is a private key"});
  ok(user_home(), "repo add team http://127.0.0.1:1 --key " + public_key_file("acme"));
  refused("repo add team http://127.0.0.1:2 --key " + public_key_file("acme"), {"repository 'team' is already added"});
  refused("repo remove nobody", {"no repository named 'nobody' is added"});
  refused("bundle install acme --repo nobody", {"no repository named 'nobody' is added"});
  refused("bundle install Acme", {"'Acme' is not a bundle name"});
  refused("bundle install acme@1.x", {"'1.x' is not a version"});
  EXPECT_EQ(user("bundle install acme --allow-unsigned").exit_code, 2);

  // Publishing: only signed bundles, one key per repository, a version never changes.
  fs::create_directories(at("out"));
  ok(publisher_home(), "bundle create " + at("out/unsigned") + " --name acme --version 1.0.0 --publisher Acme "
                       "--library " BUNDLE_ALPHA_LIBRARY);
  const CommandResult unsigned_publish = memplan(publisher_home(), "bundle publish " + at("out/unsigned") + " --to " + at("repo"));
  EXPECT_EQ(unsigned_publish.exit_code, 1);
  EXPECT_TRUE(contains(unsigned_publish.err, "is not signed; a repository serves signed bundles only")) << unsigned_publish.err;
  EXPECT_FALSE(fs::exists(at("repo/index.toml")));
  publish(signed_bundle("out/acme", "acme", "1.0.0", "acme"), "repo");
  keygen("other");
  const CommandResult other_key =
      memplan(publisher_home(), "bundle publish " + signed_bundle("out/other", "acme", "1.1.0", "other") + " --to " + at("repo"));
  EXPECT_EQ(other_key.exit_code, 1);
  EXPECT_TRUE(contains(other_key.err, "A repository has one key")) << other_key.err;
  const CommandResult changed =
      memplan(publisher_home(), "bundle publish " + signed_bundle("out/changed", "acme", "1.0.0", "acme", BUNDLE_BETA_LIBRARY) +
                                    " --to " + at("repo"));
  EXPECT_EQ(changed.exit_code, 1);
  EXPECT_TRUE(contains(changed.err, "already publishes bundle 'acme' version 1.0.0")) << changed.err;
}

}  // namespace
}  // namespace memplan::testing
