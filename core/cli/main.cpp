// memplan command line: `memplan run FILE [--format ...]`, `memplan plugins`,
// `memplan bundle ...` and `memplan trust ...` (docs/bundles.md).
// Exit status: 0 success, 1 an estimate or plugin error, 2 a usage error,
// 3 `run --check` on a job that does not fit.
#include <boost/program_options.hpp>
#include <algorithm>
#include <filesystem>
#include <sstream>
#include <iostream>
#include <string>
#include <vector>

#include "catalog_commands.hpp"
#include "estimate_command.hpp"
#include "explain_command.hpp"
#include "search_command.hpp"
#include "scenario_report.hpp"
#include "terminal_output.hpp"
#include "memplan/bundle/bundle.hpp"
#include "memplan/core/catalog.hpp"
#include "memplan/core/error.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/install_layout.hpp"
#include "memplan/core/limits.hpp"
#include "memplan/core/report.hpp"
#include "memplan/core/text.hpp"
#include "memplan/core/validation.hpp"

namespace po = boost::program_options;

namespace {

constexpr int kExitDoesNotFit = 3;

constexpr const char* kUsage =
    "usage: memplan <command> [options]\n"
    "\n"
    "commands:\n"
    "  run FILE... [--set key.path=value]... [--format table|json|csv|markdown|html] [--check]\n"
    "                                                estimate the per-GPU memory of scenarios (- reads one\n"
    "                                                from standard input); --set changes a key first; --check\n"
    "                                                exits with status 3 when a job does not fit\n"
    "  estimate MODEL [--task NAME] [--gpu NAME] [--gpus N] [--micro-batch N] ...\n"
    "                                                the same report for a model preset or config.json, no\n"
    "                                                scenario file (memplan estimate --help: tasks, options)\n"
    "  search FILE [--threads N] [--top N] [--output ROWS.csv] [--shard K/N] | --merge ROWS.csv...\n"
    "                                                every combination of the scenario's [search] axes,\n"
    "                                                ranked by step time or memory, with the Pareto front\n"
    "  explain FILE                                  for a job that does not fit: what fills the GPU and the\n"
    "                                                smallest changes that make it fit, with their time cost\n"
    "  plugins [NAME]                                list every plugin found: kind, name, version, library,\n"
    "                                                and every framework profile; NAME: one plugin's options,\n"
    "                                                or a framework profile's defaults and dated blocks\n"
    "  presets [--allow-unsigned]                    the model presets ([model] preset), built-in\n"
    "                                                and from installed bundles\n"
    "  gpus [--allow-unsigned]                       the GPUs of the catalog ([hardware] gpu), built-in\n"
    "                                                and from installed bundles\n"
    "  validate [FOLDER|FILE ...] [--by-framework]   compare estimates with measured runs (default: validation/)\n"
    "  bundle create|keygen|sign|verify|install|list|remove|publish|upgrade\n"
    "                                                signed plugin bundles (docs/bundles.md)\n"
    "  trust add|list|remove                         the public keys whose bundles you trust\n"
    "  repo add|list|remove                          bundle repositories, each with its own key\n"
    "\n"
    "options:\n"
    "  -h, --help      show this help (or `memplan <command> --help`)\n"
    "  --version       print the version\n"
    "\n"
    "Plugins are searched beside the binary (../lib/memplan/plugins), then in MEMPLAN_PLUGIN_PATH\n"
    "(folders separated by ':'), then in the installed bundles, then in the scenario's [plugins]\n"
    "search_path. Bundles and trusted keys live in $MEMPLAN_HOME (default: $XDG_DATA_HOME/memplan,\n"
    "else ~/.local/share/memplan). Which plugin each library holds is kept in $MEMPLAN_CACHE_DIR/plugin-index\n"
    "(default: $XDG_CACHE_HOME/memplan, else ~/.cache/memplan; MEMPLAN_CACHE_DIR= turns it off).\n";

constexpr const char* kBundleUsage =
    "usage: memplan bundle <command> [options]\n"
    "\n"
    "  create DIR --name NAME --version VERSION --publisher TEXT --library FILE.so [--library ...] [--data FOLDER]\n"
    "                               make an unsigned bundle folder\n"
    "  keygen --out KEYFILE         make an Ed25519 key pair: KEYFILE (private) and its .pub.pem (public)\n"
    "  sign DIR --key KEYFILE       write the key id into DIR/bundle.toml and sign it (DIR/bundle.sig)\n"
    "  verify DIR [--allow-unsigned]\n"
    "                               run every check install runs, write nothing\n"
    "  install DIR [--allow-unsigned] [--force]\n"
    "                               verify, copy into the store, verify again, then rename into place\n"
    "  install NAME[@VERSION] [--repo REPO] [--upgrade] [--force]\n"
    "                               from a repository (memplan repo add): the newest version for this\n"
    "                               platform, or exactly VERSION (pinned); nothing is fetched when it is\n"
    "                               installed already, unless --upgrade (newest, drops a pin) or another\n"
    "                               VERSION is asked for\n"
    "  upgrade [NAME...]            install the newest version of bundles from repositories, except pinned ones\n"
    "  publish DIR --to FOLDER      pack a signed bundle into FOLDER, a static repository any web server can\n"
    "                               serve, and add it to FOLDER/index.toml\n"
    "  list                         the installed bundles\n"
    "  remove NAME                  uninstall a bundle\n"
    "\n"
    "install reads its argument as a folder when it contains '/' or names an existing folder, else as\n"
    "a bundle name. --allow-unsigned (folders only) accepts unsigned bundles and bundles signed by keys\n"
    "you do not trust (never a bad signature or a revoked key); docs/security.md says what that risks.\n"
    "--force replaces an installed bundle of the same name from another publisher or signer.\n";

constexpr const char* kTrustUsage =
    "usage: memplan trust <command>\n"
    "\n"
    "  add PUBKEY.pem [--name LABEL] [--reinstate]   trust bundles signed by this key\n"
    "  list                                          trusted and revoked keys\n"
    "  remove KEYID                                  revoke a key: its bundles are refused from now on\n"
    "\n"
    "A removed key stays revoked: adding it again needs --reinstate.\n";

constexpr const char* kRepoUsage =
    "usage: memplan repo <command>\n"
    "\n"
    "  add NAME URL --key PUBKEY.pem   add a bundle repository (http:// or https://); its key is trusted\n"
    "                                  only for bundles installed from it\n"
    "  list                            the repositories: name, URL, key id\n"
    "  remove NAME                     remove a repository: the bundles installed from it are refused\n"
    "                                  from then on\n"
    "\n"
    "Install from one with `memplan bundle install NAME[@VERSION] [--repo REPO]` (docs/bundles.md,\n"
    "\"Repositories\").\n";

using memplan::cli::print_line;

using memplan::cli::print_warnings;

// Parses `args` against `options`, with `positional` names taking the bare
// arguments in order (at most one each).
po::variables_map parse(const std::vector<std::string>& args, const po::options_description& options,
                        std::initializer_list<const char*> positional_names) {
  po::positional_options_description positional;
  for (const char* name : positional_names) positional.add(name, 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
  po::notify(vm);
  return vm;
}

// Several scenarios print one report each, in the order given: tables and
// markdown one after the other, CSV under one header (each row names its
// scenario), JSON as an array of the estimate objects (one scenario prints
// the object itself, as the contract says), HTML as one page with a section
// per scenario.
int run_command(const std::vector<std::string>& args) {
  po::options_description options("run options");
  options.add_options()("help,h", "show help")("format,f", po::value<std::string>()->default_value("table"),
                                               "table, json, csv, markdown or html")(
      "file", po::value<std::vector<std::string>>(), "scenario files; - reads one from standard input")(
      "set", po::value<std::vector<std::string>>(),
      "key.path=value: set a scenario key before it is read (repeatable; e.g. --set batch.micro_batch=4 --set "
      "strategy.1.size=8)")("allow-unsigned",
                            "load installed bundles that are unsigned or signed by keys you do not trust")(
      "check", "exit with status 3 when a job does not fit the GPU (for CI gates); the report is printed either way");
  po::positional_options_description positional;
  positional.add("file", -1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << "usage: memplan run FILE... [--set key.path=value]... [--format table|json|csv|markdown|html] [--check] "
                 "[--allow-unsigned]\n\n"
              << options;
    return 0;
  }
  if (!vm.count("file")) {
    std::cerr << "memplan: error: `memplan run` needs a scenario file, e.g. memplan run examples/llama2-7b-single-gpu.toml\n";
    return 2;
  }
  const std::string format_name = vm["format"].as<std::string>();
  const auto format = memplan::parse_report_format(format_name);
  if (!format) {
    std::cerr << "memplan: error: unknown --format '" << format_name << "'; use table, json, csv, markdown or html\n";
    return 2;
  }
  const std::vector<std::string> files = vm["file"].as<std::vector<std::string>>();
  if (std::count(files.begin(), files.end(), "-") > 1) {
    std::cerr << "memplan: error: standard input (-) can be read once; name it once\n";
    return 2;
  }
  const std::vector<std::string> overrides =
      vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
  const bool check = vm.count("check") > 0;
  const memplan::InstallLayout layout = memplan::layout_beside(memplan::current_executable());
  const memplan::Catalog catalog = memplan::cli::load_catalog(layout, vm.count("allow-unsigned") > 0);
  std::vector<memplan::Scenario> scenarios;
  for (const std::string& file : files) {
    scenarios.push_back(memplan::load_scenario(file, catalog, overrides));
    for (const std::string& warning : scenarios.back().warnings) print_line(std::cerr, warning);
    if (check && scenarios.back().hardware.memory_bytes == 0) {
      print_line(std::cerr, "memplan: error: --check compares the peak with the GPU's memory, but " +
                                (file == "-" ? std::string("the scenario on standard input") : file) +
                                " names no GPU; add [hardware] gpu = \"...\" or memory_gib = N");
      return 2;
    }
  }
  bool every_job_fits = true;
  for (size_t i = 0; i < scenarios.size(); ++i) {
    const memplan::Scenario& scenario = scenarios[i];
    const memplan::cli::ScenarioReport report =
        memplan::cli::report_scenario(scenario, layout, *format, vm.count("allow-unsigned") > 0);
    const bool several = scenarios.size() > 1;
    if (several && *format == memplan::ReportFormat::json) std::cout << (i == 0 ? "[\n" : ",\n");
    if (several && *format == memplan::ReportFormat::html) {
      if (i == 0)
        std::cout << memplan::html_page_begin("memplan estimates: " + std::to_string(scenarios.size()) + " scenarios");
      std::cout << memplan::html_sections(report.text);
      if (i + 1 == scenarios.size()) std::cout << memplan::html_page_end();
    }
    if (i > 0 && (*format == memplan::ReportFormat::table || *format == memplan::ReportFormat::markdown))
      std::cout << "\n";
    std::string text = report.text;
    // One header for all the rows; JSON objects joined into the array without their final newline.
    if (i > 0 && *format == memplan::ReportFormat::csv) text.erase(0, text.find('\n') + 1);
    if (several && *format == memplan::ReportFormat::json && !text.empty() && text.back() == '\n') text.pop_back();
    if (!(several && *format == memplan::ReportFormat::html)) std::cout << text;
    if (check && !report.fits) {
      every_job_fits = false;
      std::cout.flush();
      print_line(std::cerr, "memplan: " + scenario.name + " does not fit (--check): exit status 3");
    }
  }
  if (scenarios.size() > 1 && *format == memplan::ReportFormat::json) std::cout << "\n]\n";
  return every_job_fits ? 0 : kExitDoesNotFit;
}

int plugins_command(const std::vector<std::string>& args) {
  bool allow_unsigned = false;
  std::string name;  // `memplan plugins NAME`: that plugin or framework profile in detail
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      std::cout << "usage: memplan plugins [NAME] [--allow-unsigned]\n\nLists every plugin found; exit status 1 if a "
                   "library or bundle was rejected. With NAME, that plugin in detail: kind, version, library,\n"
                   "summary and each option with its type, default and help. NAME may also be a framework\n"
                   "profile's name or alias: then its version, file, summary, source, aliases, what it is the\n"
                   "default for, its defaults per plugin table, its readings and runtime components, and each\n"
                   "dated [[since]] block in file order (version, released day, note, GPU conditions, the\n"
                   "defaults it changes). A name that is both shows both, the plugin first; exit status 1 when\n"
                   "it is neither.\n";
      return 0;
    }
    if (arg == "--allow-unsigned") {
      allow_unsigned = true;
      continue;
    }
    if (arg.starts_with("-") || !name.empty()) {
      print_line(std::cerr, "memplan: error: `memplan plugins` takes one plugin or framework profile name and "
                            "--allow-unsigned, got '" + arg + "'");
      return 2;
    }
    name = arg;
  }
  if (!name.empty()) return memplan::cli::plugin_detail_command(name, allow_unsigned);
  const memplan::InstallLayout layout = memplan::layout_beside(memplan::current_executable());
  memplan::PluginRegistry registry;
  const memplan::PluginLoadOptions load_options = memplan::cli::cli_load_options(allow_unsigned);
  memplan::load_plugins(registry, layout, nullptr, load_options);
  for (int32_t kind : {MEMPLAN_KIND_PRECISION, MEMPLAN_KIND_OPTIMIZER, MEMPLAN_KIND_ACTIVATIONS,
                       MEMPLAN_KIND_STRATEGY}) {
    for (const auto& plugin : registry.plugins()) {
      if (plugin->descriptor.kind != kind) continue;
      print_line(std::cout, std::string(memplan::kind_name(kind)) + "\t" + plugin->name + "\t" + plugin->version + "\t" +
                                plugin->path);
    }
  }
  // Framework profiles are data in the catalog, not libraries: their file stands where a library would.
  const memplan::Catalog catalog = memplan::cli::load_catalog(layout, allow_unsigned);
  for (const memplan::FrameworkProfile& profile : catalog.frameworks())
    std::cout << "framework\t" << profile.name << "\t" << profile.version << "\t" << profile.file << "\n";
  print_warnings(registry);
  return registry.diagnostics().empty() ? 0 : 1;
}

int validate_command(const std::vector<std::string>& args) {
  std::vector<std::string> paths;
  bool by_framework = false;
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      std::cout << "usage: memplan validate [FOLDER|FILE ...] [--by-framework]\n\n"
                   "Estimates each measured run (a scenario whose leading comments give '# measured_bytes = N',\n"
                   "'# quantity = allocated|reserved|device', '# framework = NAME [VERSION]' and optionally\n"
                   "'# tolerance_percent = T', default 10) and prints id, framework, quantity, measured, estimate\n"
                   "and signed error, then a summary line. A case without a [framework] table runs under the\n"
                   "profile its framework line names (a profile's name or alias; a note on standard error says so).\n"
                   "Folders are read for *.toml; the default is validation/. Exit status 1 when a case fails or\n"
                   "falls outside its tolerance (docs/validation.md).\n\n"
                   "  --by-framework  before the summary line, a table per framework profile: cases, median\n"
                   "                  |error|, median signed error, estimates below the measurement, within 10 %\n";
      return 0;
    }
    if (arg == "--by-framework") {
      by_framework = true;
      continue;
    }
    if (!arg.empty() && arg[0] == '-') {
      std::cerr << "memplan: error: `memplan validate` takes folders or case files, not '" << arg << "'\n";
      return 2;
    }
    paths.push_back(arg);
  }
  if (paths.empty()) paths.push_back("validation");
  const memplan::InstallLayout layout = memplan::layout_beside(memplan::current_executable());
  const memplan::Catalog catalog = memplan::cli::load_catalog(layout, false);
  const memplan::PluginLoadOptions load_options = memplan::cli::cli_load_options(false);
  std::vector<memplan::ValidationResult> results;
  for (const std::string& file : memplan::validation_files(paths))
    results.push_back(memplan::validate_case(memplan::read_validation_case(file), catalog, layout, load_options));
  memplan::write_validation_notes(std::cerr, results);
  memplan::write_validation_table(std::cout, results, by_framework);
  bool ok = true;
  for (const memplan::ValidationResult& result : results) ok = ok && result.failure.empty() && result.within;
  return ok ? 0 : 1;
}

std::string plural(size_t count, const std::string& noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

std::string joined(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

std::vector<std::string> plugin_names(const memplan::bundle::Manifest& manifest) {
  std::vector<std::string> names;
  for (const auto& library : manifest.libraries) names.insert(names.end(), library.plugins.begin(), library.plugins.end());
  return names;
}

// `bundle list`'s key column: the key id only where a trusted key's signature
// verifies now; the manifest's key_id is a claim anyone can copy.
std::string signer_column(const memplan::bundle::InstalledBundle& installed, const std::string& verified_key_id) {
  if (!verified_key_id.empty()) return verified_key_id;
  return installed.has_signature ? "unverified" : "unsigned";
}

// `memplan bundle <command>`: an unknown or missing argument is a usage error (2).
int bundle_command(const std::vector<std::string>& all_args) {
  namespace bundle = memplan::bundle;
  if (all_args.empty() || all_args[0] == "--help" || all_args[0] == "-h") {
    std::cout << kBundleUsage;
    return all_args.empty() ? 2 : 0;
  }
  const std::string command = all_args[0];
  const std::vector<std::string> args(all_args.begin() + 1, all_args.end());
  po::options_description options("bundle " + command + " options");
  options.add_options()("help,h", "show help");
  auto needs = [&](const po::variables_map& vm, const char* key, const char* what) {
    if (vm.count(key)) return true;
    std::cerr << "memplan: error: `memplan bundle " << command << "` needs " << what << " (see memplan bundle --help)\n";
    return false;
  };

  if (command == "create") {
    options.add_options()("dir", po::value<std::string>(), "the bundle folder to make")(
        "name", po::value<std::string>(), "bundle name")("version", po::value<std::string>(), "bundle version")(
        "publisher", po::value<std::string>(), "who publishes it")(
        "library", po::value<std::vector<std::string>>()->composing(), "a plugin library (repeatable)")(
        "data", po::value<std::string>(), "a folder of scenario or preset files to ship");
    const auto vm = parse(args, options, {"dir"});
    if (vm.count("help")) return std::cout << kBundleUsage, 0;
    if (!needs(vm, "dir", "the folder to create, e.g. memplan bundle create out/acme-optimizers") ||
        !needs(vm, "name", "--name") || !needs(vm, "version", "--version") || !needs(vm, "publisher", "--publisher"))
      return 2;
    bundle::CreateRequest request;
    request.folder = vm["dir"].as<std::string>();
    request.name = vm["name"].as<std::string>();
    request.version = vm["version"].as<std::string>();
    request.publisher = vm["publisher"].as<std::string>();
    if (vm.count("library"))
      for (const std::string& library : vm["library"].as<std::vector<std::string>>()) request.libraries.push_back(library);
    if (vm.count("data")) request.data = vm["data"].as<std::string>();
    const bundle::Manifest manifest = bundle::create_bundle(request);
    std::cout << "created bundle " << manifest.name << " " << manifest.version << " in " << request.folder.string()
              << ": " << plural(manifest.libraries.size(), "library file") << " (plugins "
              << joined(plugin_names(manifest)) << "), " << plural(manifest.data.size(), "data file")
              << "; unsigned: sign it with `memplan bundle sign " << request.folder.string() << " --key KEYFILE`\n";
    return 0;
  }
  if (command == "keygen") {
    options.add_options()("out", po::value<std::string>(), "private key file to write");
    const auto vm = parse(args, options, {});
    if (vm.count("help")) return std::cout << kBundleUsage, 0;
    if (!needs(vm, "out", "--out KEYFILE, the private key file to write")) return 2;
    const bundle::KeygenResult key = bundle::generate_key(vm["out"].as<std::string>());
    std::cout << "private key: " << key.private_key.string() << " (keep it secret: it signs bundles in your name)\n"
              << "public key:  " << key.public_key.string() << " (users trust it with `memplan trust add "
              << key.public_key.string() << "`)\n"
              << "key id:      " << key.key_id << "\n";
    return 0;
  }
  if (command == "sign") {
    options.add_options()("dir", po::value<std::string>(), "the bundle folder")(
        "key", po::value<std::string>(), "private key file (memplan bundle keygen)");
    const auto vm = parse(args, options, {"dir"});
    if (vm.count("help")) return std::cout << kBundleUsage, 0;
    if (!needs(vm, "dir", "the bundle folder") || !needs(vm, "key", "--key KEYFILE")) return 2;
    const std::string id = bundle::sign_bundle(vm["dir"].as<std::string>(), vm["key"].as<std::string>());
    std::cout << "signed bundle " << vm["dir"].as<std::string>() << " with key " << id << "\n";
    return 0;
  }
  if (command == "verify" || command == "install") {
    options.add_options()("dir", po::value<std::string>(), "the bundle folder")(
        "allow-unsigned", "accept an unsigned bundle, or one signed by a key you do not trust");
    if (command == "install")
      options.add_options()("force", "replace an installed bundle of the same name from another publisher or signer")(
          "repo", po::value<std::string>(), "install by name from this repository only")(
          "upgrade", "install the newest version even when one is installed (drops a pin)");
    const auto vm = parse(args, options, {"dir"});
    if (vm.count("help")) return std::cout << kBundleUsage, 0;
    if (!needs(vm, "dir", command == "install" ? "a bundle folder or NAME[@VERSION]" : "the bundle folder")) return 2;
    const bool allow_unsigned = vm.count("allow-unsigned") > 0;
    const std::filesystem::path home = bundle::memplan_home();
    const std::string target = vm["dir"].as<std::string>();
    std::error_code error;
    const bool by_name = command == "install" && (vm.count("repo") > 0 || (target.find('/') == std::string::npos &&
                                                                          !std::filesystem::is_directory(target, error)));
    if (by_name) {
      if (allow_unsigned) {
        std::cerr << "memplan: error: --allow-unsigned applies to bundle folders only; a bundle from a repository is "
                     "always checked against the repository's key\n";
        return 2;
      }
      bundle::RepositoryInstallRequest request;
      const size_t at = target.find('@');
      request.name = target.substr(0, at);
      if (at != std::string::npos) request.version = target.substr(at + 1);
      if (at != std::string::npos && request.version.empty()) {
        std::cerr << "memplan: error: '" << target << "' has no version after '@'; write NAME@VERSION, e.g. "
                  << request.name << "@1.0.0, or NAME for the newest\n";
        return 2;
      }
      if (vm.count("repo")) request.repository = vm["repo"].as<std::string>();
      request.upgrade = vm.count("upgrade") > 0;
      request.force = vm.count("force") > 0;
      if (request.upgrade && !request.version.empty()) {
        std::cerr << "memplan: error: --upgrade installs the newest version and " << target << " names one; pass "
                  << "one of them\n";
        return 2;
      }
      print_line(std::cout, bundle::install_from_repository(home, request));
      return 0;
    }
    if (vm.count("upgrade")) {
      std::cerr << "memplan: error: --upgrade applies to installs by name from a repository, and " << target
                << " is a folder\n";
      return 2;
    }
    if (command == "install") {
      bundle::InstallRequest request{vm["dir"].as<std::string>(), allow_unsigned, vm.count("force") > 0};
      print_line(std::cout, bundle::install_bundle(home, request));
      return 0;
    }
    bundle::VerifyPolicy policy;
    policy.allow_unsigned = allow_unsigned;
    const bundle::VerifiedBundle verified =
        bundle::verify_bundle(vm["dir"].as<std::string>(), bundle::TrustStore(home), policy);
    for (const std::string& warning : verified.warnings) print_line(std::cerr, "memplan: warning: " + warning);
    const bundle::Manifest& manifest = verified.manifest;
    print_line(std::cout, "bundle " + manifest.name + " " + manifest.version + " from " + manifest.publisher + ": " +
                              (verified.trusted ? "signed by trusted key " + manifest.key_id + " (" +
                                                      verified.signer_label + ")"
                               : verified.is_signed ? std::string("signed by an untrusted key, accepted by --allow-unsigned")
                                                    : std::string("unsigned, accepted by --allow-unsigned")) +
                              "; " + plural(manifest.libraries.size(), "library file") + " and " +
                              plural(manifest.data.size(), "data file") + " match their sha256; plugins " +
                              joined(plugin_names(manifest)));
    return 0;
  }
  if (command == "publish") {
    options.add_options()("dir", po::value<std::string>(), "the signed bundle folder")(
        "to", po::value<std::string>(), "the repository folder to publish into (created when missing)");
    const auto vm = parse(args, options, {"dir"});
    if (vm.count("help")) return std::cout << kBundleUsage, 0;
    if (!needs(vm, "dir", "the signed bundle folder") || !needs(vm, "to", "--to FOLDER, the repository folder"))
      return 2;
    print_line(std::cout, bundle::publish_bundle(bundle::memplan_home(),
                                                 bundle::PublishRequest{vm["dir"].as<std::string>(),
                                                                        vm["to"].as<std::string>()}));
    return 0;
  }
  if (command == "upgrade") {
    options.add_options()("name", po::value<std::vector<std::string>>(), "bundles to upgrade (default: all from repositories)");
    po::positional_options_description positional;
    positional.add("name", -1);
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
    po::notify(vm);
    if (vm.count("help")) return std::cout << kBundleUsage, 0;
    const std::filesystem::path home = bundle::memplan_home();
    std::vector<std::string> names;
    if (vm.count("name")) {
      names = vm["name"].as<std::vector<std::string>>();
    } else {
      for (const bundle::InstalledBundle& installed : bundle::installed_bundles(home))
        if (installed.origin && !installed.origin->repository.empty()) names.push_back(installed.folder.filename());
    }
    int status = 0;
    for (const std::string& name : names) {
      std::string repository;
      bool installed_here = false;
      for (const bundle::InstalledBundle& installed : bundle::installed_bundles(home))
        if (installed.folder.filename() == name) {
          installed_here = true;
          repository = installed.origin ? installed.origin->repository : "";
        }
      if (!installed_here || repository.empty()) {
        print_line(std::cerr, "memplan: error: bundle '" + name + "' " +
                                  (installed_here ? "was not installed from a repository, so it cannot be upgraded "
                                                    "by name; install the new folder with `memplan bundle install DIR`"
                                                  : "is not installed; `memplan bundle list` shows what is"));
        status = 1;
        continue;
      }
      bundle::RepositoryInstallRequest request;
      request.name = name;
      request.repository = repository;
      request.upgrade = true;
      request.keep_pinned = true;
      try {
        print_line(std::cout, bundle::install_from_repository(home, request));
      } catch (const memplan::Error& error) {
        print_line(std::cerr, error.what());
        status = 1;
      }
    }
    if (names.empty()) std::cout << "no bundle was installed from a repository; nothing to upgrade\n";
    return status;
  }
  if (command == "list") {
    const auto vm = parse(args, options, {});
    if (vm.count("help")) return std::cout << kBundleUsage, 0;
    const std::filesystem::path home = bundle::memplan_home();
    bundle::remove_interrupted_leftovers(home);
    for (const bundle::InstalledBundle& installed : bundle::installed_bundles(home)) {
      const std::string name = installed.folder.filename().string();
      if (!installed.manifest) {
        print_line(std::cout, name + "\tunreadable: " + installed.problem);
        continue;
      }
      const bundle::Manifest& manifest = *installed.manifest;
      print_line(std::cout, name + "\t" + manifest.version + "\t" + manifest.publisher + "\t" +
                                signer_column(installed, bundle::verified_signer(
                                                             installed.folder, bundle::trust_for_installed(home, installed))) +
                                "\t" +
                                joined(plugin_names(manifest), ",") + "\t" +
                                (installed.origin ? installed.origin->source : "origin unknown"));
    }
    return 0;
  }
  if (command == "remove") {
    options.add_options()("name", po::value<std::string>(), "the bundle to remove");
    const auto vm = parse(args, options, {"name"});
    if (vm.count("help")) return std::cout << kBundleUsage, 0;
    if (!needs(vm, "name", "the name of an installed bundle (memplan bundle list)")) return 2;
    print_line(std::cout, bundle::remove_bundle(bundle::memplan_home(), vm["name"].as<std::string>()));
    return 0;
  }
  std::cerr << "memplan: error: unknown bundle command '" << command
            << "'; the commands are create, keygen, sign, verify, install, list, remove, publish and upgrade (see memplan "
               "bundle --help)\n";
  return 2;
}

int trust_command(const std::vector<std::string>& all_args) {
  namespace bundle = memplan::bundle;
  if (all_args.empty() || all_args[0] == "--help" || all_args[0] == "-h") {
    std::cout << kTrustUsage;
    return all_args.empty() ? 2 : 0;
  }
  const std::string command = all_args[0];
  const std::vector<std::string> args(all_args.begin() + 1, all_args.end());
  po::options_description options("trust " + command + " options");
  options.add_options()("help,h", "show help");
  if (command == "add") {
    options.add_options()("file", po::value<std::string>(), "public key PEM")(
        "name", po::value<std::string>()->default_value(""), "a label for the key")(
        "reinstate", "trust a key that was removed (revoked) before");
    const auto vm = parse(args, options, {"file"});
    if (vm.count("help")) return std::cout << kTrustUsage, 0;
    if (!vm.count("file")) {
      std::cerr << "memplan: error: `memplan trust add` needs a public key file, e.g. memplan trust add acme.pub.pem\n";
      return 2;
    }
    bundle::TrustStore store(bundle::memplan_home());
    print_line(std::cout,
               store.add(vm["file"].as<std::string>(), vm["name"].as<std::string>(), vm.count("reinstate") > 0));
    return 0;
  }
  if (command == "list") {
    const auto vm = parse(args, options, {});
    if (vm.count("help")) return std::cout << kTrustUsage, 0;
    bundle::TrustStore store(bundle::memplan_home());
    for (const bundle::TrustedKey& key : store.trusted()) print_line(std::cout, key.key_id + "\ttrusted\t" + key.label);
    for (const std::string& id : store.revoked_ids()) std::cout << id << "\trevoked\n";
    return 0;
  }
  if (command == "remove") {
    options.add_options()("key", po::value<std::string>(), "key id");
    const auto vm = parse(args, options, {"key"});
    if (vm.count("help")) return std::cout << kTrustUsage, 0;
    if (!vm.count("key")) {
      std::cerr << "memplan: error: `memplan trust remove` needs a key id (`memplan trust list` shows them)\n";
      return 2;
    }
    bundle::TrustStore store(bundle::memplan_home());
    print_line(std::cout, store.remove(vm["key"].as<std::string>()));
    return 0;
  }
  std::cerr << "memplan: error: unknown trust command '" << command
            << "'; the commands are add, list and remove (see memplan trust --help)\n";
  return 2;
}

int repo_command(const std::vector<std::string>& all_args) {
  namespace bundle = memplan::bundle;
  if (all_args.empty() || all_args[0] == "--help" || all_args[0] == "-h") {
    std::cout << kRepoUsage;
    return all_args.empty() ? 2 : 0;
  }
  const std::string command = all_args[0];
  const std::vector<std::string> args(all_args.begin() + 1, all_args.end());
  po::options_description options("repo " + command + " options");
  options.add_options()("help,h", "show help");
  if (command == "add") {
    options.add_options()("name", po::value<std::string>(), "repository name")(
        "url", po::value<std::string>(), "http:// or https:// URL of the folder holding index.toml")(
        "key", po::value<std::string>(), "the repository's Ed25519 public key PEM");
    const auto vm = parse(args, options, {"name", "url"});
    if (vm.count("help")) return std::cout << kRepoUsage, 0;
    if (!vm.count("name") || !vm.count("url") || !vm.count("key")) {
      std::cerr << "memplan: error: `memplan repo add` needs NAME, URL and --key PUBKEY.pem, e.g. memplan repo add "
                   "team http://plugins.example.org/memplan --key team.pub.pem\n";
      return 2;
    }
    print_line(std::cout, bundle::add_repository(bundle::memplan_home(), vm["name"].as<std::string>(),
                                                 vm["url"].as<std::string>(), vm["key"].as<std::string>()));
    return 0;
  }
  if (command == "list") {
    const auto vm = parse(args, options, {});
    if (vm.count("help")) return std::cout << kRepoUsage, 0;
    for (const bundle::Repository& repository : bundle::repositories(bundle::memplan_home()))
      print_line(std::cout, repository.name + "\t" + repository.url + "\t" + repository.key_id);
    return 0;
  }
  if (command == "remove") {
    options.add_options()("name", po::value<std::string>(), "repository name");
    const auto vm = parse(args, options, {"name"});
    if (vm.count("help")) return std::cout << kRepoUsage, 0;
    if (!vm.count("name")) {
      std::cerr << "memplan: error: `memplan repo remove` needs a repository name (`memplan repo list` shows them)\n";
      return 2;
    }
    print_line(std::cout, bundle::remove_repository(bundle::memplan_home(), vm["name"].as<std::string>()));
    return 0;
  }
  std::cerr << "memplan: error: unknown repo command '" << command
            << "'; the commands are add, list and remove (see memplan repo --help)\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string command;  // for the usage hint of an option error
  try {
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
      std::cout << kUsage;
      return args.empty() ? 2 : 0;
    }
    if (args[0] == "--version") {
      std::cout << "memplan " << MEMPLAN_VERSION << " (plugin ABI " << MEMPLAN_ABI_MAJOR << "." << MEMPLAN_ABI_MINOR
                << ")\n";
      return 0;
    }
    command = args[0];
    args.erase(args.begin());
    if (command == "run") return run_command(args);
    if (command == "plugins") return plugins_command(args);
    if (command == "estimate") return memplan::cli::estimate_command(args);
    if (command == "presets") return memplan::cli::presets_command(args);
    if (command == "gpus") return memplan::cli::gpus_command(args);
    if (command == "validate") return validate_command(args);
    if (command == "search") return memplan::cli::search_command(args);
    if (command == "explain") return memplan::cli::explain_command(args);
    if (command == "bundle") return bundle_command(args);
    if (command == "trust") return trust_command(args);
    if (command == "repo") return repo_command(args);
    std::cerr << "memplan: error: unknown command '" << command
              << "'; the commands are run, estimate, search, explain, plugins, presets, gpus, validate, bundle, trust and repo "
                 "(see memplan --help)\n";
    return 2;
  } catch (const memplan::Error& error) {
    print_line(std::cerr, error.what());
    return 1;
  } catch (const po::error& error) {
    // Each command has its own options: point at its help.
    print_line(std::cerr, "memplan: error: " + std::string(error.what()) + " (see memplan " +
                              (command.empty() ? std::string() : command + " ") + "--help)");
    return 2;
  } catch (const std::exception& error) {
    print_line(std::cerr, "memplan: error: " + std::string(error.what()));
    return 1;
  }
}
