// Strict reading of configuration JSON: every value is fetched by a dotted path with its expected
// type and range, every error names the file, the path and what was expected, and keys nobody
// asked for are reported (a misspelt key must not be silently ignored).
//
//   ConfigReader r(json, "systems/cpu-dev.json");
//   auto run = r.object("run");
//   int64_t epochs = run.integer("max_epochs", {.min = 1});
//   run.finish();   // throws if run.* holds keys that were never read
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mrcnn::run {

using Json = nlohmann::ordered_json;

// Configuration errors carry one line: "<file>: <path>: <problem>".
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
};

class ConfigReader {
 public:
  // `node` must outlive the reader. `path` is the dotted location of `node` ("" for the root).
  ConfigReader(const Json& node, std::string file, std::string path = "");

  bool has(const std::string& key) const;
  ConfigReader object(const std::string& key);
  std::optional<ConfigReader> optional_object(const std::string& key);

  int64_t integer(const std::string& key, Range range = {});
  int64_t integer_or(const std::string& key, int64_t fallback, Range range = {});
  double number(const std::string& key, Range range = {});
  double number_or(const std::string& key, double fallback, Range range = {});
  bool boolean(const std::string& key);
  bool boolean_or(const std::string& key, bool fallback);
  std::string string(const std::string& key, const std::vector<std::string>& allowed = {});
  std::string string_or(const std::string& key, const std::string& fallback,
                        const std::vector<std::string>& allowed = {});
  std::vector<int64_t> integers(const std::string& key, Range range = {});
  std::vector<double> numbers(const std::string& key, Range range = {});
  // Any JSON value, unchecked (for sections another component reads, e.g. the MLPerf system
  // description).
  const Json& raw(const std::string& key);

  // The keys and values of this object, in file order (for maps keyed by data, not by name).
  std::vector<std::pair<std::string, const Json*>> raw_keys() const;

  // Marks a key as read without reading it (documentation-only keys such as "comment").
  void ignore(const std::string& key);
  // Throws ConfigError listing the keys of this object that were never read.
  void finish() const;

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;
  std::string where(const std::string& key) const;
  const std::string& file() const { return file_; }

 private:
  const Json& at(const std::string& key);
  double checked_number(const std::string& key, const Json& v, Range range, bool integral);

  const Json* node_;
  std::string file_;
  std::string path_;
  std::set<std::string> read_;
};

// Applies a command-line override "a.b.c=value" to `config`. The path must name an existing
// key (an unknown key is an error that lists the keys at that level); the value is parsed as
// JSON when it is valid JSON, else taken as a string, and must have the type of the value it
// replaces (a number for a number, a list for a list...). `origin` names the override in errors.
void apply_override(Json& config, const std::string& assignment, const std::string& origin = "--set");

// Reads a JSON file; errors name the file and, for syntax errors, the byte offset.
Json read_json_file(const std::string& path);

}  // namespace mrcnn::run
