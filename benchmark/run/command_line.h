// What the commands share on their command lines: the system file with its --set overrides,
// a few value flags, and one way to report a bad argument.
//
//   CommandLine cl(argc, argv, {"--weights", "--data"}, {"--quiet"});  // flags with and without a value
//   cl.value("--weights")  cl.flag("--quiet")  cl.positional()  cl.system_config()
#pragma once

#include <set>
#include <string>
#include <vector>

#include "benchmark/config/system_config.h"
#include "logging/arguments.h"

namespace mrcnn::run {

inline constexpr const char* kDefaultSystem = "systems/cpu-dev.json";

class CommandLine {
 public:
  // `with_value`: flags that take the next argument; `switches`: flags that take none. Every
  // command also takes --system FILE and --set KEY=VALUE (repeatable). The environment gives
  // defaults that these override: MRCNN_SYSTEM (--system), MRCNN_DATA_DIR (run.data_dir) and
  // MRCNN_OUT (run.output_dir). (main.cpp has split --name=value already.) Parsed by the parser
  // every command shares (logging/arguments.h): throws cli::UsageError on an unknown flag or a
  // flag without its value.
  CommandLine(int argc, char** argv, const std::set<std::string>& with_value, const std::set<std::string>& switches);

  bool has(const std::string& flag) const { return args_.has(flag); }
  // The flag's value (the last one when it is repeated).
  std::string value(const std::string& flag, const std::string& fallback = "") const {
    return args_.value(flag, fallback);
  }
  // Every value of a repeatable flag, in order.
  std::vector<std::string> values(const std::string& flag) const { return args_.values(flag); }
  // A value that must be given; throws ConfigError "<flag> is required".
  std::string required(const std::string& flag) const;
  bool flag(const std::string& s) const { return args_.flag(s); }
  const std::vector<std::string>& positional() const { return args_.positional(); }

  // Adds an override, e.g. from a shorthand flag (--seed N -> run.seed=N).
  void add_override(std::string assignment) { overrides_.push_back(std::move(assignment)); }
  const std::string& system() const { return system_; }
  const std::vector<std::string>& overrides() const { return overrides_; }
  config::SystemConfig system_config() const;

 private:
  cli::Arguments args_;
  std::string system_ = kDefaultSystem;
  std::vector<std::string> overrides_;
};

// A folder a command will create files in: it, or the nearest part of it that exists, must be a
// writable folder. Throws ConfigError naming `what`, the path and the part in the way.
void require_writable_folder(const std::string& path, const std::string& what);

// Throws ConfigError "<what> <path> does not exist", "... is a directory, not a file" or "... is
// not a directory"; `hint` follows a missing path's message.
void require_path(const std::string& path, bool directory, const std::string& what, const std::string& hint = "");
inline void require_file(const std::string& path, const std::string& what) { require_path(path, false, what); }

// True when argv holds --help or -h.
bool wants_help(int argc, char** argv);

// Prints "mlperf-maskrcnn <command>: error: <what>" and returns `status`.
int report_error(const char* command, const std::exception& e, int status);

}  // namespace mrcnn::run
