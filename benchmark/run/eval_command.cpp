#include <cstdio>
#include <filesystem>
#include <fstream>

#include "benchmark/run/assemble.h"
#include "benchmark/run/process_settings.h"
#include "benchmark/run/coco_results.h"
#include "benchmark/run/command_line.h"
#include "benchmark/run/device_backend.h"
#include "benchmark/run/commands.h"
#include "benchmark/run/validation_split.h"
#include "eval/coco_eval.h"
#include "logging/console.h"
#include "logging/progress.h"

namespace mrcnn::run {
namespace {

namespace fs = std::filesystem;
using config::ConfigError;

constexpr const char* kUsage = R"(usage: mlperf-maskrcnn eval --weights W --data DIR [options]

COCO box and mask AP of the weights W on the validation split of the COCO-format folder DIR.

options:
  --system FILE   network options and transforms (default: systems/cpu-dev.json)
  --set K=V       override a system value (repeatable)
  --split NAME    the split to evaluate (default: the system's data.val_split)
  --json OUT      also write the 12 bbox and 12 segm stats as JSON
  --results OUT   also write the detections as a COCO results JSON (what was scored)

exit status: 0 scored, 1 an error while reading the data or evaluating, 2 bad arguments,
configuration or weights (nothing read)

examples:
  mlperf-maskrcnn eval --weights out/cpu-dev/latest/model.safetensors --data data/synthetic
  mlperf-maskrcnn eval --system systems/aws-p5.48xlarge.json --weights model.safetensors \
      --data /data/coco2017 --json stats.json --results detections.json
)";

struct EvalInputs {
  SystemConfig config;
  std::string weights, split, json_out, results_out;
  data::CocoLayout layout;
};

EvalInputs read_inputs(int argc, char** argv) {
  const CommandLine cl(argc, argv, {"--weights", "--data", "--split", "--json", "--results"}, {});
  if (!cl.positional().empty()) throw ConfigError("unexpected argument '" + cl.positional()[0] + "' (see --help)");
  EvalInputs in{.weights = cl.required("--weights"), .json_out = cl.value("--json"),
                .results_out = cl.value("--results")};
  require_file(in.weights, "weights file");
  const std::string data_dir = cl.required("--data");
  in.config = cl.system_config();
  in.split = cl.value("--split", in.config.data.val_split);
  in.layout = coco_layout(in.config, data_dir);
  require_file(in.layout.annotation_file(in.split).string(), "annotation file");
  return in;
}

// COCO results of the network on every image of the split, in the sampler's order.
std::vector<eval::Detection> infer(const SystemConfig& cfg, const ValidationSplit& split, model::MaskRCNN& net) {
  CocoData val(split.dataset, eval_data_options(cfg, device_of(cfg)), 0, 1);
  std::vector<eval::Detection> results;
  at::NoGradGuard no_grad;
  logging::Progress bar("eval " + split.split, split.dataset->size(), "img");
  auto stream = val.epoch(1);
  int64_t done = 0;
  while (auto batch = stream->next()) {
    for (const auto& d : net->inference(*batch))
      to_coco_results(d, split.label_to_category, cfg.data.transform.legacy_plus_one, results);
    done += batch->size();
    bar.update(done);
  }
  bar.finish(std::to_string(results.size()) + " detections");
  return results;
}

void write_json(const std::string& path, const logging::Json& j) {
  std::ofstream f(path);
  f << j.dump(1) << "\n";
  if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int eval_main(int argc, char** argv) {
  if (wants_help(argc, argv)) return std::fputs(kUsage, stdout), 0;
  EvalInputs in;
  try {
    in = read_inputs(argc, argv);
    require_device_backend(in.config);  // before anything is read or written
  } catch (const std::exception& e) {
    return report_error("eval", e, 2);
  }
  try {
    logging::setup_console();
    apply_launch_settings(in.config);
    model::MaskRCNN net = load_network(in.config, in.weights);
    const ValidationSplit split =
        ValidationSplit::read(in.layout, in.split, dataset_options(in.config, in.layout, in.split, false, true));
    const std::vector<eval::Detection> results = infer(in.config, split, net);
    eval::CocoEvaluator evaluator(split.ground_truth, {.threads = static_cast<int>(in.config.run.eval_threads)});
    const std::vector<eval::IouType> types{eval::IouType::kBbox, eval::IouType::kSegm};
    logging::Json out = logging::Json::object();
    for (const auto& r : evaluator.evaluate(results, types)) {
      std::printf("IoU metric: %s\n%s", eval::to_string(r.iou_type), r.summary().c_str());
      out[eval::to_string(r.iou_type)] = r.stats;
    }
    if (!in.json_out.empty()) write_json(in.json_out, out);
    if (!in.results_out.empty()) {
      logging::Json all = logging::Json::array();
      for (const auto& det : results) all.push_back(to_json(det));
      write_json(in.results_out, all);
    }
    return 0;
  } catch (const std::exception& e) {
    return report_error("eval", e, 1);
  }
}

}  // namespace mrcnn::run
