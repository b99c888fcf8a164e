#include "benchmark/analysis/report_command.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "benchmark/analysis/report.h"
#include "logging/arguments.h"

namespace mrcnn::analysis {

namespace {

constexpr const char* kUsage = R"usage(usage: mlperf-maskrcnn report RESULTS_DIR... [--json FILE] [--html DIR] [--price [SYSTEM=]USD] [--ruleset V]

Compares systems from their results: for each system under the folders given (a results tree as
run_and_time.sh files it, results/<system>/maskrcnn/result_N.txt with runs/result_N/ kept beside
them; a submission folder <org>/ with results/ and systems/; or whole public MLPerf
training_results_vX.Y checkouts of several rounds, of which only Mask R-CNN is read), each by
the rules of its round (the round its path names, training_results_v2.1 -> 2.1.0, else 3.1.0;
the rules column says which):
  submitter, accelerator model and count, nodes and framework; the score (the official
  result_summarizer's olympic mean of the runs' time to train, at most one run failing the
  round's compliance check dropped) and accelerator-hours; the round's RCP check (the official
  rcp_checker's verdict; n/a in the open division) and the RCP-normalized score; epochs to
  converge against the reference; training images/s per accelerator from the best evidence (the
  log's throughput events, else the images the kept steps cover, else the epochs x the real
  epoch size: 117,266 for COCO, train_samples elsewhere), the source named and a disagreeing
  train_samples noted; the scaling efficiency of one node at several node counts; where the time
  went; and the cost of a result when priced. Systems are grouped by accelerator model.

  --json FILE           the report as JSON
  --html DIR            DIR/index.html with SVG plots (score per system with every run, throughput
                        per accelerator by accelerator model, accuracy over time against the
                        targets, where the time goes), viewable offline
  --price [SYSTEM=]USD  price per node-hour (repeatable; without SYSTEM= for every system)
  --systems DIR         where systems/<name>.json describe systems without kept run folders
                        (default: systems)
  --ruleset V           read every system by ruleset V (1.0.0, 1.1.0, 2.0.0, 2.1.0, 3.0.0, 3.1.0)
                        instead of its round's

exit status: 0 report written, 2 bad input (nothing found, unreadable results)

examples:
  mlperf-maskrcnn report results/
  mlperf-maskrcnn report results/ training_results_v3.1 --html out/report --json out/report.json
  mlperf-maskrcnn report training_results_v1.0 training_results_v1.1 training_results_v2.0 training_results_v2.1
  mlperf-maskrcnn report results/ --price aws-p5.48xlarge=98.3 --price aws-p3dn.24xlarge=31.2
)usage";

[[noreturn]] void bad(const std::string& what) { throw ReportError(what); }

double parse_price(const std::string& text, const std::string& arg) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(v >= 0) || v > 1e9) bad("--price " + arg + ": expected a price >= 0 in USD per node-hour");
  return v;
}

}  // namespace

int report_main(int argc, char** argv) {
  const cli::Arguments args(argc, argv, {.with_value = {"--json", "--html", "--systems", "--price", "--ruleset"},
                                         .positional = {.min = 1, .what = "at least one results folder"}});
  if (args.help()) return std::printf("%s", kUsage), 0;
  const std::vector<std::string>& paths = args.positional();
  const std::string json = args.value("--json"), html = args.value("--html");
  ReportOptions options;
  options.systems_dir = args.value("--systems", options.systems_dir);
  options.ruleset = args.value("--ruleset");
  if (args.has("--ruleset") && options.ruleset.empty()) throw cli::UsageError("--ruleset: expected a ruleset such as 2.1.0");
  try {
    for (const std::string& v : args.values("--price")) {
      const auto eq = v.find('=');
      if (eq == std::string::npos) options.price_per_node_hour[""] = parse_price(v, v);
      else options.price_per_node_hour[v.substr(0, eq)] = parse_price(v.substr(eq + 1), v);
    }
    const std::vector<SystemReport> systems = build_report(paths, options);
    std::fputs(format_report_table(systems).c_str(), stdout);
    if (!json.empty()) {
      std::ofstream out(json);
      out << report_json(systems).dump(2) << "\n";
      if (!out) bad("cannot write " + json);
      std::printf("\nJSON: %s\n", json.c_str());
    }
    if (!html.empty()) std::printf("HTML: %s\n", write_report_html(systems, html).c_str());
    return 0;
  } catch (const std::exception& e) {
    return cli::print_error("mlperf-maskrcnn report", e, 2);
  }
}

}  // namespace mrcnn::analysis
