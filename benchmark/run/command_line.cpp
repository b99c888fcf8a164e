#include "benchmark/run/command_line.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include "logging/arguments.h"
#include "logging/console.h"

namespace mrcnn::run {

using config::ConfigError;

namespace {

// Every command's own flags, and the --system and --set that all of them take.
cli::ArgumentSpec spec_with_system(std::set<std::string> with_value, const std::set<std::string>& switches) {
  with_value.insert({"--system", "--set"});
  return {.with_value = std::move(with_value), .switches = switches};
}

}  // namespace

CommandLine::CommandLine(int argc, char** argv, const std::set<std::string>& with_value,
                         const std::set<std::string>& switches)
    : args_(argc, argv, spec_with_system(with_value, switches)) {
  // The environment's defaults, which the command line overrides: MRCNN_SYSTEM for --system,
  // MRCNN_DATA_DIR for run.data_dir, MRCNN_OUT for run.output_dir (before any --set, which wins).
  if (const char* s = std::getenv("MRCNN_SYSTEM"); s != nullptr && *s != '\0') system_ = s;
  if (const char* d = std::getenv("MRCNN_DATA_DIR"); d != nullptr && *d != '\0')
    overrides_.push_back("run.data_dir=" + nlohmann::json(std::string(d)).dump());
  if (const char* o = std::getenv("MRCNN_OUT"); o != nullptr && *o != '\0')
    overrides_.push_back("run.output_dir=" + nlohmann::json(std::string(o)).dump());
  system_ = args_.value("--system", system_);
  for (const std::string& o : args_.values("--set")) overrides_.push_back(o);
}

std::string CommandLine::required(const std::string& flag) const {
  if (!args_.has(flag)) throw ConfigError(flag + " is required");
  return value(flag);
}

config::SystemConfig CommandLine::system_config() const { return config::load_system_config(system_, overrides_); }

void require_path(const std::string& path, bool directory, const std::string& what, const std::string& hint) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) throw ConfigError(what + " " + path + " does not exist" + hint);
  if (!directory && std::filesystem::is_directory(st))
    throw ConfigError(what + " " + path + " is a directory, not a file");
  if (directory && !std::filesystem::is_directory(st)) throw ConfigError(what + " " + path + " is not a directory");
}

void require_writable_folder(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path existing = fs::absolute(path, ec);
  while (!existing.empty() && !fs::exists(existing, ec) && existing != existing.parent_path())
    existing = existing.parent_path();
  const std::string in_the_way = existing.string() == fs::absolute(path, ec).string() ? "" : " (" + existing.string() + ")";
  if (!fs::is_directory(existing, ec))
    throw ConfigError(what + " " + path + in_the_way + " is a file, not a folder");
  if (::access(existing.c_str(), W_OK | X_OK) != 0)
    throw ConfigError(what + " " + path + in_the_way + " is not writable: " + std::strerror(errno));
}

bool wants_help(int argc, char** argv) { return cli::asks_help(argc, argv); }

int report_error(const char* command, const std::exception& e, int status) {
  return cli::print_error(std::string("mlperf-maskrcnn ") + command, e, status);
}

}  // namespace mrcnn::run
