#include "logging/arguments.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "logging/console.h"

namespace mrcnn::cli {
namespace {

std::string range_text(Range r) {
  std::ostringstream s;
  if (std::isfinite(r.lo) && std::isfinite(r.hi)) s << "from " << r.lo << " to " << r.hi;
  else if (std::isfinite(r.lo)) s << "of at least " << r.lo;
  else if (std::isfinite(r.hi)) s << "of at most " << r.hi;
  return s.str();
}

}  // namespace

bool asks_help(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") return true;
  return false;
}

int print_error(const std::string& program, const std::exception& e, int status) {
  std::fprintf(stderr, "%s: error: %s\n", program.c_str(), logging::error_text(e).c_str());
  return status;
}

Arguments::Arguments(int argc, char** argv, const ArgumentSpec& spec) {
  help_ = asks_help(argc, argv);
  if (help_) return;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (spec.with_value.contains(s)) {
      if (i + 1 >= argc) throw UsageError(s + " needs a value");
      values_[s].push_back(argv[++i]);
    } else if (spec.switches.contains(s)) {
      switches_.insert(s);
    } else if (s.size() > 1 && s[0] == '-') {
      throw UsageError("unknown option '" + s + "' (see --help)");
    } else {
      positional_.push_back(s);
    }
  }
  const auto& p = spec.positional;
  if (positional_.size() < p.min || positional_.size() > p.max) {
    if (positional_.size() > p.max && p.max == 0)
      throw UsageError("unexpected argument '" + positional_[0] + "' (see --help)");
    throw UsageError("expected " + p.what + (positional_.empty() ? "" : ", got " + std::to_string(positional_.size()) +
                                                                            " argument(s)") +
                     " (see --help)");
  }
}

std::string Arguments::value(const std::string& option, const std::string& fallback) const {
  const auto it = values_.find(option);
  return it == values_.end() ? fallback : it->second.back();
}

std::vector<std::string> Arguments::values(const std::string& option) const {
  const auto it = values_.find(option);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

double Arguments::number(const std::string& option, double fallback, Range range) const {
  if (!values_.contains(option)) return fallback;
  const std::string v = value(option);
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno != 0 || !(x >= range.lo && x <= range.hi))
    throw UsageError(option + " " + v + ": expected a number " + range_text(range));
  return x;
}

long long Arguments::integer(const std::string& option, long long fallback, Range range) const {
  if (!values_.contains(option)) return fallback;
  const std::string v = value(option);
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || !(static_cast<double>(x) >= range.lo && static_cast<double>(x) <= range.hi))
    throw UsageError(option + " " + v + ": expected a whole number " + range_text(range));
  return x;
}

}  // namespace mrcnn::cli
