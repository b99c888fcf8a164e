#include "benchmark/analysis/coco_eval_command.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <optional>
#include <vector>

#include "eval/coco.h"
#include "eval/coco_eval.h"
#include "eval/results_reader.h"
#include "logging/arguments.h"

namespace mrcnn::eval {

namespace {

constexpr const char* kUsage =
    "usage: mlperf-maskrcnn coco-eval GT.json RESULTS.json [--iou-type bbox,segm] [--threads N]\n"
    "                                 [--json OUT] [--arrays] [--quiet]\n"
    "       coco-eval GT.json RESULTS.json ...   (the standalone executable: the same command)\n"
    "\n"
    "Scores COCO detection results against ground truth with pycocotools' exact numbers.\n"
    "  --iou-type T   comma-separated IoU types: bbox, segm (default: bbox,segm)\n"
    "  --threads N    worker threads (default: all hardware threads)\n"
    "  --json OUT     write the 12 stats of each type (and timings) to OUT as JSON\n"
    "  --arrays       also write accumulate()'s precision, recall and scores arrays to OUT\n"
    "  --quiet        print only the summary blocks\n"
    "\n"
    "exit status: 0 scored, 1 bad input (a file that cannot be read or is not valid COCO; one line\n"
    "naming the file and the element), 2 bad arguments\n"
    "\n"
    "examples:\n"
    "  mlperf-maskrcnn coco-eval annotations/instances_val2017.json detections.json\n"
    "  mlperf-maskrcnn coco-eval gt.json detections.json --iou-type segm --json stats.json --arrays\n";

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void put_double(std::string& out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  out += buf;
}

void put_array(std::string& out, const std::vector<double>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    put_double(out, v[i]);
  }
  out += ']';
}

template <class T>
void put_shape(std::string& out, std::initializer_list<T> dims) {
  out += '[';
  bool first = true;
  for (T d : dims) {
    if (!first) out += ',';
    first = false;
    out += std::to_string(d);
  }
  out += ']';
}

}  // namespace

namespace {

struct Args {
  std::vector<std::string> positional;  // GT.json RESULTS.json
  std::vector<IouType> types;
  int threads = 0;
  std::string json_out;
  bool arrays = false, quiet = false;
};

// The command line; nullopt for --help (the usage printed). Throws cli::UsageError.
std::optional<Args> parse_args(int argc, char** argv) {
  const cli::Arguments args(argc, argv, {.with_value = {"--iou-type", "--threads", "--json"},
                                         .switches = {"--arrays", "--quiet"},
                                         .positional = {2, 2, "GT.json and RESULTS.json"}});
  if (args.help()) {
    std::fputs(kUsage, stdout);
    return std::nullopt;
  }
  Args a;
  a.positional = args.positional();
  std::vector<std::string> types = args.values("--iou-type");  // repeated: every one counts
  if (types.empty()) types = {"bbox,segm"};
  for (const std::string& list : types) {
    try {
      size_t start = 0;
      while (start <= list.size()) {
        const size_t comma = std::min(list.find(',', start), list.size());
        a.types.push_back(parse_iou_type(std::string_view(list).substr(start, comma - start)));
        start = comma + 1;
      }
    } catch (const std::exception& e) {
      throw cli::UsageError("--iou-type " + list + ": " + e.what());
    }
  }
  a.threads = static_cast<int>(args.integer("--threads", 0, {1, 1 << 20}));
  a.json_out = args.value("--json");
  a.arrays = args.flag("--arrays");
  a.quiet = args.flag("--quiet");
  return a;
}

struct Timings {
  double read_gt = 0, read_results = 0, total = 0;
};

// The stats of each type (and timings; with --arrays accumulate()'s arrays) as JSON, to `path`.
void write_json_report(const std::string& path, const std::vector<EvalResult>& results, const Timings& t,
                       int threads, bool arrays) {
  std::string out = "{\n";
  for (const EvalResult& r : results) {
    out += "  \"";
    out += to_string(r.iou_type);
    out += "\": {\"stats\": ";
    put_array(out, std::vector<double>(r.stats.begin(), r.stats.end()));
    out += ", \"num_detections\": " + std::to_string(r.num_detections);
    out += ", \"dropped_detections\": " + std::to_string(r.dropped_detections);
    out += ", \"seconds\": {\"prepare\": ";
    put_double(out, r.prepare_seconds);
    out += ", \"evaluate\": ";
    put_double(out, r.evaluate_seconds);
    out += ", \"accumulate\": ";
    put_double(out, r.accumulate_seconds);
    out += "}";
    if (arrays) {
      out += ",\n    \"precision_shape\": ";
      put_shape(out, {r.T, r.R, r.K, r.A, r.M});
      out += ", \"precision\": ";
      put_array(out, r.precision);
      out += ",\n    \"recall_shape\": ";
      put_shape(out, {r.T, r.K, r.A, r.M});
      out += ", \"recall\": ";
      put_array(out, r.recall);
      out += ",\n    \"scores\": ";
      put_array(out, r.scores);
    }
    out += "},\n";
  }
  out += "  \"seconds\": {\"read_ground_truth\": ";
  put_double(out, t.read_gt);
  out += ", \"read_results\": ";
  put_double(out, t.read_results);
  out += ", \"total\": ";
  put_double(out, t.total);
  out += "},\n  \"threads\": " + std::to_string(threads) + "\n}\n";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error(path + ": cannot open for writing: " + std::strerror(errno));
  const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  if (std::fclose(f) != 0 || !ok) throw std::runtime_error(path + ": write failed");
}

// The evaluator names the element ("detections[3]: ..."; ground-truth errors name their file
// already); the command adds the results file the detections came from.
std::vector<EvalResult> evaluate_naming_files(const CocoEvaluator& evaluator, const std::vector<Detection>& dets,
                                              const Args& a) {
  try {
    return evaluator.evaluate(dets, a.types);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (!what.starts_with("detections[")) throw;
    throw std::runtime_error(a.positional[1] + ": " + what);
  }
}

}  // namespace

int coco_eval_main(int argc, char** argv) {
  const std::optional<Args> parsed = parse_args(argc, argv);
  if (!parsed) return 0;
  const Args& a = *parsed;
  Timings t;
  const auto t0 = Clock::now();
  auto gt = std::make_shared<Dataset>(load_dataset(a.positional[0]));
  t.read_gt = since(t0);
  if (!a.quiet)
    std::printf("ground truth: %zu images, %zu categories, %zu annotations (read in %.2fs)\n", gt->images.size(),
                gt->categories.size(), gt->annotations.size(), t.read_gt);
  const auto t1 = Clock::now();
  std::vector<Detection> dets = load_results(a.positional[1]);
  t.read_results = since(t1);
  if (!a.quiet) std::printf("results: %zu detections (read in %.2fs)\n", dets.size(), t.read_results);

  CocoEvaluator evaluator(gt, EvalOptions{a.threads});
  const std::vector<EvalResult> results = evaluate_naming_files(evaluator, dets, a);
  if (!results.empty() && results[0].dropped_detections > 0)
    std::fprintf(stderr,
                 "coco-eval: note: %zu detections have a category_id that is not a ground-truth "
                 "category; they are ignored (as pycocotools does)\n",
                 results[0].dropped_detections);
  for (const EvalResult& r : results) {
    if (!a.quiet) {
      std::printf("Evaluate annotation type *%s*\n", to_string(r.iou_type));
      std::printf("DONE (t=%.2fs: prepare %.2fs, evaluate %.2fs, accumulate %.2fs).\n",
                  r.prepare_seconds + r.evaluate_seconds + r.accumulate_seconds, r.prepare_seconds,
                  r.evaluate_seconds, r.accumulate_seconds);
    }
    std::fputs(r.summary().c_str(), stdout);
  }
  t.total = since(t0);
  if (!a.quiet)
    std::printf("total %.2fs on %d threads (prepare and evaluate are shared by the IoU types)\n", t.total,
                evaluator.threads());
  if (!a.json_out.empty()) write_json_report(a.json_out, results, t, evaluator.threads(), a.arrays);
  // The detections are left to the process's exit (reachable from here, not a leak; the next
  // call frees them): freeing half a million of them one by one costs tens of milliseconds and
  // changes nothing for a command that is about to end.
  static std::vector<Detection>* kept = nullptr;
  delete kept;
  kept = new std::vector<Detection>(std::move(dets));
  return 0;
}

}  // namespace mrcnn::eval
