// Strict reading of configuration JSON: every value is fetched by a dotted path with its expected
// type and range, every error names the file (or the `--set` argument that put the value there),
// the path and what was expected, and keys nobody asked for are reported (a misspelt key must not
// be silently ignored).
//
//   ConfigReader r(json, "systems/cpu-dev.json");
//   auto run = r.object("run");
//   int64_t epochs = run.integer("max_epochs", {.min = 1});
//   run.finish();   // throws if run.* holds keys that were never read
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mrcnn::config {

using Json = nlohmann::ordered_json;

// Configuration errors carry one line: "<file>: <path>: <problem>", or, for a value that came
// from the command line, "--set <assignment>: <path>: <problem>".
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where values came from when not from the file: dotted path -> "--set a.b=value". A path that
// an override created (a section the file lacked) maps to the override that created it.
using Origins = std::map<std::string, std::string>;

// Where the value at a dotted path came from: the override that set it or created a section on
// its path, else `file`.
std::string source_of(const Origins* origins, const std::string& file, const std::string& path);

struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
};

class ConfigReader {
 public:
  // `node` (and `origins`, when given) must outlive the reader. `path` is the dotted location of
  // `node` ("" for the root).
  ConfigReader(const Json& node, std::string file, std::string path = "", const Origins* origins = nullptr);

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
  // The source of `key`'s value: the file, or the --set argument that set it.
  std::string source(const std::string& key) const;
  const std::string& file() const { return file_; }

 private:
  const Json& at(const std::string& key);
  double checked_number(const std::string& key, const Json& v, Range range, bool integral);

  const Json* node_;
  std::string file_;
  std::string path_;
  const Origins* origins_;
  std::set<std::string> read_;   // keys whose value was taken
  mutable std::set<std::string> known_;  // keys asked about, present or not (this level's schema)
};

// Applies a command-line override "a.b.c=value" to `config`, creating the key (and any section
// on its path) when the file leaves it out, and records where the value came from in `origins`.
// The value is parsed as JSON when it is valid JSON, else taken as a string. Whether the key
// exists and the value fits is decided by the reader, which then names the --set argument.
void apply_override(Json& config, const std::string& assignment, Origins& origins);

// Reads a JSON file; errors name the file and, for syntax errors, the byte offset.
Json read_json_file(const std::string& path);

}  // namespace mrcnn::config
