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

Checks MLPerf Training logs of Mask R-CNN against the compliance rules of their round (closed or
open division, as each log declares): rulesets 1.0.0, 1.1.0, 2.0.0, 2.1.0, 3.0.0 and 3.1.0, the
rounds with Mask R-CNN. The verdict is the official checker's of that ruleset; every failing line
is reported with its line number, and each log's verdict line names the ruleset used.

Without --ruleset, a log is checked against the round its path names (a folder such as
training_results_v2.1, as the public results repositories are named: ruleset 2.1.0), else 3.1.0;
published logs carry no line naming their round.

The last line is the official checker's word for the whole: SUCCESS when every log passes,
FAILED otherwise. The official command line's options are taken as they are: --usage training,
--ruleset V, --log_output FILE.

options:
  --ruleset V       rules version for every log: 1.0.0, 1.1.0, 2.0.0, 2.1.0, 3.0.0 or 3.1.0
  --usage U         only training (the official checker's --usage)
  --werror          repeated EXACTLY_ONE keys with the same value are errors (official --werror)
  --strict          advisories (event order, seed, status/target consistency) are errors
  --quiet           print verdict lines only, no warnings
  --json OUT        also write the reports as JSON to OUT
  --log_output OUT  also write the printed report to OUT (the official checker's option)

exit status: 0 all logs pass, 1 a log fails, 2 a log is unreadable or the arguments are wrong

examples:
  mlperf-maskrcnn check out/cpu-dev/latest/mlperf_log.txt
  mlperf-maskrcnn check --usage training --ruleset 3.1.0 results/aws-p5.48xlarge/maskrcnn/result_*.txt
  mlperf-maskrcnn check training_results_v1.0/Google/results/tpu-v4-128-TF/maskrcnn/result_*.txt
  mlperf-maskrcnn check --ruleset 2.1.0 result_0.txt
  mlperf-maskrcnn check --strict --json checks.json result_0.txt result_1.txt
)";

Json to_json(const CheckReport& r) {
  auto msgs = [](const std::vector<CheckMessage>& v) {
    Json a = Json::array();
    for (const auto& m : v) a.push_back({{"line", m.line}, {"key", m.key}, {"message", m.text}});
    return a;
  };
  return {{"file", r.file},          {"readable", r.readable}, {"passed", r.passed},
          {"ruleset", r.ruleset},    {"ruleset_source", r.ruleset_source},
          {"division", r.division},  {"benchmark", r.benchmark}, {"mllog_lines", r.mllog_lines},
          {"errors", msgs(r.errors)}, {"warnings", msgs(r.warnings)}};
}

}  // namespace

int check_main(int argc, char** argv) {
  const cli::Arguments args(argc, argv, {.with_value = {"--ruleset", "--usage", "--json", "--log_output"},
                                         .switches = {"--werror", "--strict", "--quiet"},
                                         .positional = {.min = 1, .what = "one or more MLPerf logs"}});
  if (args.help()) return std::fputs(kUsage, stdout), 0;
  CheckOptions opt;
  opt.ruleset = args.value("--ruleset", opt.ruleset);
  opt.werror = args.flag("--werror");
  opt.strict = args.flag("--strict");
  const bool quiet = args.flag("--quiet");
  const std::string json_out = args.value("--json");
  const std::string text_out = args.value("--log_output");
  const std::vector<std::string>& files = args.positional();
  if (args.has("--ruleset") && !is_ruleset(opt.ruleset)) {
    std::string list;
    for (const std::string& r : rulesets()) list += (list.empty() ? "" : ", ") + r;
    throw cli::UsageError("--ruleset " + opt.ruleset + " is not implemented; Mask R-CNN's rulesets are " + list);
  }
  if (const std::string usage = args.value("--usage", "training"); usage != "training")
    throw cli::UsageError("--usage " + usage + " is not implemented; Mask R-CNN is a training benchmark");
  int status = 0;
  Json all = Json::array();
  std::string text;
  for (const auto& f : files) {
    const CheckReport r = check_log_file(f, opt);
    const std::string one = format_report(r, !quiet);
    std::fputs(one.c_str(), stdout);
    text += one;
    if (!r.readable)
      status = 2;
    else if (!r.passed && status == 0)
      status = 1;
    all.push_back(to_json(r));
  }
  // The official checker's last word for the whole.
  const char* verdict = status == 0 ? "SUCCESS\n" : "FAILED\n";
  std::fputs(verdict, stdout);
  text += verdict;
  std::fflush(stdout);
  if (!text_out.empty()) {
    std::ofstream o(text_out);
    o << text;
    if (!o) {
      std::fprintf(stderr, "mlperf-maskrcnn check: error: cannot write %s: %s\n", text_out.c_str(),
                   std::strerror(errno));
      return 2;
    }
  }
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
