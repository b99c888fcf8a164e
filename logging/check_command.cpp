#include "logging/check_command.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

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
  CheckOptions opt;
  bool quiet = false;
  std::string json_out;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto need_value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "mlperf-maskrcnn check: error: %s needs a value\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--ruleset") {
      opt.ruleset = need_value("--ruleset");
    } else if (a == "--werror") {
      opt.werror = true;
    } else if (a == "--strict") {
      opt.strict = true;
    } else if (a == "--quiet") {
      quiet = true;
    } else if (a == "--json") {
      json_out = need_value("--json");
    } else if (a.starts_with("--")) {
      std::fprintf(stderr, "mlperf-maskrcnn check: error: unknown option '%s' (see --help)\n", a.c_str());
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::fputs("mlperf-maskrcnn check: error: expected one or more MLPerf logs (see --help)\n", stderr);
    return 2;
  }
  if (opt.ruleset != "3.1.0") {
    std::fprintf(stderr,
                 "mlperf-maskrcnn check: error: --ruleset %s is not implemented; Mask R-CNN's last ruleset is 3.1.0\n",
                 opt.ruleset.c_str());
    return 2;
  }
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
      std::fprintf(stderr, "check: cannot write %s: %s\n", json_out.c_str(), std::strerror(errno));
      return 2;
    }
  }
  return status;
}

}  // namespace mrcnn::logging
