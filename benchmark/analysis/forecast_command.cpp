#include "benchmark/analysis/forecast_command.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "benchmark/analysis/forecast.h"
#include "logging/arguments.h"
#include "logging/json_file.h"

namespace mrcnn::analysis {

namespace {

namespace fs = std::filesystem;
using logging::Json;

constexpr const char* kUsage = R"usage(usage: mlperf-maskrcnn forecast --measured RESULTS... (--nodes N,N,... | --system FILE...)
                                [--global-batch auto|N] [--network-gbps G] [--price USD] [--json FILE]
                                [--html DIR [--published TREE]...] [--epoch-images N]
       mlperf-maskrcnn forecast --validate TREE... [--json FILE]

Predicts the MLPerf Mask R-CNN score (minutes to train) of a system that has not run, from the
runs of one node (results folders as `report` reads them, or run folders as `train --out DIR`
leaves them: each system or DIR is one measurement, at its per-accelerator batch; measure two
batches to replace the assumed fixed cost a step; `--set run.max_steps_per_epoch=N` measures a
batch in minutes). Where the runs log every rank's own step times (this project's harness), the
wait for the slowest rank grows with the target's ranks. For
each target: the forecast with a low-high band from what was not measured, the assumption that
dominates the band and what to measure to remove it, the parts (compute, exposed all-reduce,
evaluation pauses, start and tail, epochs from the RCP), accelerator-hours, cost, and flags
(batch measured or extrapolated, network-bound, dedicated evaluation ranks, another node).

  --measured RESULTS...  results folders or `train --out` folders of the measured node
  --nodes N,N,...        targets: the measured node at these node counts
  --system FILE          a target described by an MLPerf system JSON (or a project system file,
                         its "system" section and "extends" followed); repeatable
  --global-batch auto|N  auto (default): the fastest global batch with an RCP, per target, at a
                         whole per-accelerator batch up to the largest measured; N: that batch
  --network-gbps G       the network between nodes, Gbit/s per node, where a target's description
                         gives none (default: the measured node's description, else 100, "assumed")
  --price USD            price per node-hour: the cost of one time to train
  --epoch-images N       images a target epoch (default 117266, COCO train2017): another dataset's
                         forecast (the epochs still come from the RCP)
  --validate TREE...     the method on published results (public training_results_vX.Y trees):
                         each series' smallest system measured, its bigger systems forecast
  --json FILE            one record per target (per validated pair)
  --html DIR             DIR/index.html: the table, minutes against nodes (log-log, the band shaded,
                         ideal scaling from the measured node) and where the time goes per target
  --published TREE       results (a public training_results_vX.Y tree) whose systems of the same
                         node (accelerator model and count a node) are drawn beside the forecast

exit status: 0 forecast written, 2 bad input

examples:
  mlperf-maskrcnn forecast --measured results/aws-p5.48xlarge --nodes 2,4,8,16 --price 98.3
  mlperf-maskrcnn forecast --measured measure/b12 measure/b16 --system systems/aws-p5.48xlarge-4n.json
  mlperf-maskrcnn forecast --validate training_results_v2.1 training_results_v3.0
)usage";

[[noreturn]] void bad(const std::string& what) { throw ForecastError(what); }

std::vector<int64_t> node_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 100000) bad("--nodes " + text + ": expected node counts >= 1, like 2,4,8");
    out.push_back(v);
  }
  if (out.empty()) bad("--nodes: expected node counts >= 1, like 2,4,8");
  return out;
}

Json read_json(const std::string& path) {
  Json j;
  try {
    j = logging::read_json_file(path);
  } catch (const logging::JsonFileError& e) {
    bad(e.what());
  }
  if (!j.is_object()) bad(path + ": not a JSON object");
  return j;
}

// A project system file with its "extends" chain merged key by key (objects merge, values replace).
Json resolved_system_file(const std::string& path, int depth = 0) {
  Json j = read_json(path);
  if (depth > 8) bad(path + ": \"extends\" nests too deep");
  if (!j.contains("extends")) return j;
  if (!j["extends"].is_string()) bad(path + ": \"extends\" must name a file");
  Json base = resolved_system_file((fs::path(path).parent_path() / j["extends"].get<std::string>()).string(), depth + 1);
  base.merge_patch(j);
  return base;
}

struct Setup {
  std::vector<Measurement> measured;
  Assumptions assumptions;
  std::optional<double> network_gbps, price;
  std::string global_batch = "auto";
};

// The target at its global batch: given, or the fastest with an RCP at a whole batch an
// accelerator up to the largest measured one.
Forecast forecast_for(const Setup& s, Target t, std::optional<int64_t> fixed_batch) {
  const int64_t accelerators = t.nodes * t.accelerators_per_node;
  const auto priced = [&](Forecast f) {
    if (s.price && f.refused.empty()) f.cost = f.minutes / 60 * *s.price * static_cast<double>(f.target.nodes);
    return f;
  };
  if (fixed_batch || s.global_batch != "auto") {
    const int64_t gb = fixed_batch ? *fixed_batch : std::stoll(s.global_batch);
    t.global_batch = gb;
    t.batch = static_cast<double>(gb) / static_cast<double>(accelerators);
    if (gb % accelerators != 0) {
      Forecast f{.target = t, .refused = "global batch " + std::to_string(gb) + " over " + std::to_string(accelerators) + " accelerators is not a whole batch each"};
      return f;
    }
    return priced(predict(s.measured, t, s.assumptions));
  }
  double largest = 0;
  for (const Measurement& m : s.measured) largest = std::max(largest, m.batch);
  std::optional<Forecast> best;
  Forecast last;
  for (int64_t b = 1; b <= static_cast<int64_t>(std::floor(largest)); ++b) {
    t.batch = static_cast<double>(b);
    t.global_batch = b * accelerators;
    Forecast f = predict(s.measured, t, s.assumptions);
    if (!f.refused.empty()) {
      if (last.refused.empty()) last = f;  // the smallest batch's reason: the larger ones fail as well or better
      continue;
    }
    if (!best || f.minutes < best->minutes) best = f;
  }
  if (!best) {
    if (last.refused.empty()) last = Forecast{.target = t, .refused = "no measured batch"};
    return last;
  }
  return priced(*best);
}

Target target_from_nodes(const Setup& s, int64_t nodes) {
  const Measurement& m = s.measured.front();
  Target t;
  t.name = std::to_string(nodes) + " x " + m.label;
  t.nodes = nodes;
  t.accelerators_per_node = m.accelerators_per_node;
  t.accelerator_model = m.accelerator_model;
  t.network_gbps = s.network_gbps ? s.network_gbps : m.network_gbps;
  t.network_basis = s.network_gbps ? "--network-gbps" : m.network_basis;
  if (!t.network_gbps && nodes > 1)
    t.network_gbps = s.assumptions.network_gbps, t.network_assumed = true, t.network_basis = "the default (give --network-gbps)";
  return t;
}

std::pair<Target, std::optional<int64_t>> target_from_file(const Setup& s, const std::string& path) {
  Json j = resolved_system_file(path);
  std::optional<int64_t> gb;
  if (j.contains("hyperparameters") && j["hyperparameters"].is_object() && j["hyperparameters"].contains("global_batch_size") &&
      j["hyperparameters"]["global_batch_size"].is_number_integer())
    gb = j["hyperparameters"]["global_batch_size"].get<int64_t>();
  const SystemDescription d = describe(j.contains("system") ? j["system"] : j, path);
  if (!d.ok()) bad(d.problem);
  Target t;
  t.name = fs::path(path).stem().string();
  t.nodes = d.nodes;
  t.accelerators_per_node = d.accelerators_per_node;
  t.accelerator_model = d.accelerator_model;
  NodeNetwork net = parse_host_networking(d.host_networking);
  if (const auto stated = stated_network_gbps(j)) net = {*stated, "launch.network_gbps"};
  t.network_gbps = net.gbps ? net.gbps : s.network_gbps;
  t.network_basis = net.gbps ? net.basis : "--network-gbps";
  if (!t.network_gbps && t.nodes > 1)
    t.network_gbps = s.assumptions.network_gbps, t.network_assumed = true, t.network_basis = "the default (give --network-gbps)";
  if (s.global_batch != "auto") gb.reset();
  return {t, gb};
}

void write_json(const std::string& path, const Json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) bad("cannot write " + path);
  std::printf("\nJSON: %s\n", path.c_str());
}

}  // namespace

int forecast_main(int argc, char** argv) {
  const cli::Arguments args(argc, argv, {.with_value = {"--nodes", "--system", "--global-batch", "--network-gbps", "--price", "--json",
                                                        "--html", "--published", "--epoch-images"},
                                         .switches = {"--measured", "--validate"},
                                         .positional = {.min = 1, .what = "results folders after --measured or --validate"}});
  if (args.help()) return std::printf("%s", kUsage), 0;
  Setup s;
  if (args.has("--network-gbps")) s.network_gbps = args.number("--network-gbps", 0, {.lo = 1e-3, .hi = 1e6});
  if (args.has("--price")) s.price = args.number("--price", 0, {.lo = 0, .hi = 1e9});
  s.global_batch = args.value("--global-batch", "auto");
  s.assumptions.epoch_images = args.integer("--epoch-images", s.assumptions.epoch_images, {.lo = 1, .hi = 1e9});
  if (s.global_batch != "auto") args.integer("--global-batch", 0, {.lo = 1, .hi = 1e6});
  const std::string json = args.value("--json");
  try {
    if (args.has("--validate")) {
      if (args.has("--measured")) throw cli::UsageError("--validate and --measured do not go together (see --help)");
      const Validation v = validate(build_report(args.positional(), {}), s.assumptions);
      if (v.rows.empty()) bad("no series with more than one node count in the folders given");
      std::fputs(format_validation(v).c_str(), stdout);
      if (!json.empty()) write_json(json, validation_json(v));
      return 0;
    }
    if (!args.has("--measured")) throw cli::UsageError("expected --measured RESULTS... or --validate TREE... (see --help)");
    if (args.has("--nodes") == args.has("--system")) throw cli::UsageError("expected --nodes N,... or --system FILE... (see --help)");
    for (const SystemReport& r : build_report(args.positional(), {})) s.measured.push_back(measure(r));
    std::vector<Forecast> out;
    if (args.has("--nodes")) {
      for (const int64_t n : node_list(args.value("--nodes"))) out.push_back(forecast_for(s, target_from_nodes(s, n), std::nullopt));
    } else {
      for (const std::string& f : args.values("--system")) {
        const auto [t, gb] = target_from_file(s, f);
        out.push_back(forecast_for(s, t, gb));
      }
    }
    std::fputs(format_forecasts(s.measured, out).c_str(), stdout);
    if (!json.empty()) {
      Json rows = Json::array();
      for (const Forecast& f : out) rows.push_back(forecast_json(f));
      write_json(json, {{"forecasts", rows}});
    }
    if (args.has("--html")) {
      std::vector<PublishedPoint> published;
      const Measurement& m = s.measured.front();
      if (args.has("--published"))
        for (const SystemReport& r : build_report(args.values("--published"), {}))
          if (r.described && r.score_minutes && model_key(r.accelerator_model) == model_key(m.accelerator_model) &&
              r.accelerators / r.nodes == m.accelerators_per_node)
            published.push_back({r.label, r.nodes, *r.score_minutes});
      std::printf("HTML: %s\n", write_forecast_html(s.measured, out, published, args.value("--html")).c_str());
    }
    return 0;
  } catch (const ReportError& e) {
    return cli::print_error("mlperf-maskrcnn forecast", e, 2);
  } catch (const ForecastError& e) {
    return cli::print_error("mlperf-maskrcnn forecast", e, 2);
  }
}

}  // namespace mrcnn::analysis
