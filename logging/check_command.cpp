#include "logging/check_command.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "logging/arguments.h"
#include "logging/compliance.h"
#include "logging/py_json.h"

namespace mrcnn::logging {
namespace {

constexpr const char* kUsage = R"(usage: mlperf-maskrcnn check [options] LOG...

Checks MLPerf Training logs of Mask R-CNN against the compliance rules of ruleset 3.1.0 (closed or
open division, as each log declares). The verdict is the official checker's; every failing line
is reported with its line number.

options:
  --ruleset V     rules version (only 3.1.0, the last round with Mask R-CNN)
  --werror        repeated EXACTLY_ONE keys with the same value are errors (official --werror)
  --strict        advisories (event order, seed, status/target consistency) are errors
  --quiet         print verdict lines only, no warnings
  --json OUT      also write the reports as JSON to OUT

exit status: 0 all logs pass, 1 a log fails, 2 a log is unreadable or the arguments are wrong
)";

Json to_json(const CheckReport& r) {
  auto msgs = [](const std::vector<CheckMessage>& v) {
    Json a = Json::array();
    for (const auto& m : v) a.push_back({{"line", m.line}, {"key", m.key}, {"message", m.text}});
    return a;
  };
  return {{"file", r.file},          {"readable", r.readable}, {"passed", r.passed},
          {"division", r.division},  {"benchmark", r.benchmark}, {"mllog_lines", r.mllog_lines},
          {"errors", msgs(r.errors)}, {"warnings", msgs(r.warnings)}};
}

}  // namespace

int check_main(int argc, char** argv) {
  const cli::Arguments args(argc, argv, {.with_value = {"--ruleset", "--json"},
                                         .switches = {"--werror", "--strict", "--quiet"},
                                         .positional = {.min = 1, .what = "one or more MLPerf logs"}});
  if (args.help()) return std::fputs(kUsage, stdout), 0;
  CheckOptions opt;
  opt.ruleset = args.value("--ruleset", opt.ruleset);
  opt.werror = args.flag("--werror");
  opt.strict = args.flag("--strict");
  const bool quiet = args.flag("--quiet");
  const std::string json_out = args.value("--json");
  const std::vector<std::string>& files = args.positional();
  if (opt.ruleset != "3.1.0")
    throw cli::UsageError("--ruleset " + opt.ruleset + " is not implemented; Mask R-CNN's last ruleset is 3.1.0");
  int status = 0;
  Json all = Json::array();
  for (const auto& f : files) {
    const CheckReport r = check_log_file(f, opt);
    std::fputs(format_report(r, !quiet).c_str(), stdout);
    if (!r.readable)
      status = 2;
    else if (!r.passed && status == 0)
      status = 1;
    all.push_back(to_json(r));
  }
  std::fflush(stdout);
  if (!json_out.empty()) {
    std::ofstream o(json_out);
    o << all.dump(2) << "\n";
    if (!o) {
      std::fprintf(stderr, "mlperf-maskrcnn check: error: cannot write %s: %s\n", json_out.c_str(),
                   std::strerror(errno));
      return 2;
    }
  }
  return status;
}

}  // namespace mrcnn::logging
