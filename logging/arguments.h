// The one command-line parser of every mlperf-maskrcnn command (and of the standalone coco-eval):
// options that take a value (`--json OUT`; main.cpp has split `--json=OUT` already), switches
// (`--quiet`), positional arguments, and `--help`/`-h` anywhere. A bad command line is one
// UsageError, which main.cpp prints as the one error line every command shares,
// "mlperf-maskrcnn <command>: error: <what>", with exit status 2.
//
//   const cli::Arguments args(argc, argv, {.with_value = {"--json"}, .switches = {"--quiet"},
//                                          .positional = {1, 1, "a run folder"}});
//   if (args.help()) return std::fputs(kUsage, stdout), 0;
//   args.value("--json")  args.flag("--quiet")  args.positional()[0]
//   args.number("--tolerance", 0, {0, 1})   // "--tolerance x: expected a number from 0 to 1"
#pragma once

#include <cstddef>
#include <limits>
#include <map>
#include <set>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace mrcnn::cli {

// A command line that cannot be run: an unknown option, a missing value, a malformed number, the
// wrong number of positional arguments. Commands throw it for their own checks too.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct ArgumentSpec {
  std::set<std::string> with_value;  // options that take the next argument (repeatable)
  std::set<std::string> switches;    // options that take none
  struct Positional {
    size_t min = 0;
    size_t max = std::numeric_limits<size_t>::max();
    std::string what;  // "one or more MLPerf logs", for "expected ..."
  } positional;
};

// Where a number given on the command line must lie (both ends included).
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
};

class Arguments {
 public:
  // Throws UsageError "unknown option '--x' (see --help)", "--x needs a value" or "expected
  // <what> (see --help)"; with --help or -h anywhere nothing is checked and help() is true.
  Arguments(int argc, char** argv, const ArgumentSpec& spec);

  bool help() const { return help_; }
  bool has(const std::string& option) const { return values_.contains(option) || switches_.contains(option); }
  bool flag(const std::string& option) const { return switches_.contains(option); }
  // The option's value (the last one when it is repeated), or `fallback`.
  std::string value(const std::string& option, const std::string& fallback = "") const;
  // Every value of a repeatable option, in order.
  std::vector<std::string> values(const std::string& option) const;
  const std::vector<std::string>& positional() const { return positional_; }

  // The option's value as a number in [lo, hi] (`fallback` when absent); throws UsageError
  // naming the option and the range.
  double number(const std::string& option, double fallback, Range range = {}) const;
  // The same for a whole number.
  long long integer(const std::string& option, long long fallback, Range range = {}) const;

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> switches_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

// Whether `--help` or `-h` is anywhere on the command line: the one test every command makes, its
// own parser or Arguments.
bool asks_help(int argc, char** argv);

// The one error line of every command, on stderr: "<program>: error: <what>", with `program`
// "mlperf-maskrcnn <command>" (or the standalone "coco-eval") and the exception's message for a
// person (logging::error_text: LibTorch's backtrace cut). Returns `status`, the exit status.
int print_error(const std::string& program, const std::exception& e, int status);

}  // namespace mrcnn::cli
