// `mlperf-maskrcnn data verify|prepare|load`: a COCO 2017 folder checked, its training index
// prepared, and its training split read as `train` reads it (time and memory reported).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "benchmark/data/coco_dataset.h"
#include "benchmark/data/coco_index.h"
#include "benchmark/data/coco_layout.h"
#include "benchmark/data/coco_verify.h"
#include "benchmark/run/assemble.h"
#include "benchmark/run/command_line.h"
#include "benchmark/run/commands.h"
#include "eval/coco.h"
#include "logging/arguments.h"
#include "logging/mllog.h"

namespace mrcnn::run {
namespace {

namespace fs = std::filesystem;
using config::ConfigError;

constexpr const char* kUsage = R"(usage: mlperf-maskrcnn data <verify|prepare|load> DIR [options]

  verify DIR    whether the COCO-format folder DIR is usable: annotation files present, parseable,
                instances files of the year their names say; every image present, decodable to
                the end and of its record's size; the images the reference trains on counted;
                compared with the COCO 2017 release (sizes, SHA-256, counts, category ids).
                Exit 0 usable, 1 not (one error a problem class, naming files), 2 bad arguments.
      --split S       a split to check (repeatable; default: train2017 and val2017)
      --threads N     image checks in parallel (default: the machine's cores)
      --release       differences from the COCO 2017 release are errors (a closed-division check)

  prepare DIR   writes the training split's binary index beside its annotations
                (annotations/instances_<split>.mrcnn-index): what `train` reads instead of the
                JSON when data.annotation_source is auto or index. Once per dataset, before runs.
      --split S       default: the system's data.train_split

  load DIR      reads the training split exactly as `train` does (no image decoding) and prints
                one JSON line: source, seconds, images, instances, max_rss_bytes, pss_bytes.
      --split S       default: the system's data.train_split
      --source X      auto | json | index (default: the system's data.annotation_source)
      --hold-until F  then wait until file F exists before exiting (several ranks measured together)

  --system FILE and --set K=V (repeatable) choose the data settings (default: systems/cpu-dev.json).

exit status: verify: 0 usable, 1 not; prepare and load: 0 done, 1 an error while reading or
writing; all: 2 bad arguments

examples:
  mlperf-maskrcnn data verify /data/coco2017 --release
  mlperf-maskrcnn data prepare /data/coco2017
  mlperf-maskrcnn data load /data/coco2017 --source index
)";

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Proportional set size (shared pages divided among their sharers), from /proc; 0 if unknown.
int64_t pss_bytes() {
  std::ifstream f("/proc/self/smaps_rollup");
  std::string key;
  int64_t kb = 0;
  while (f >> key) {
    if (key == "Pss:") {
      f >> kb;
      return kb * 1024;
    }
    f.ignore(1 << 20, '\n');
  }
  return 0;
}

int64_t max_rss_bytes() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

std::string folder_argument(const CommandLine& cl) {
  if (cl.positional().size() != 1)
    throw ConfigError(cl.positional().empty() ? "the dataset folder DIR is required (see --help)"
                                              : "unexpected argument '" + cl.positional()[1] + "' (see --help)");
  require_path(cl.positional()[0], true, "dataset folder");
  return cl.positional()[0];
}

int verify(int argc, char** argv) {
  const CommandLine cl(argc, argv, {"--split", "--threads"}, {"--release"});
  data::VerifyOptions o;
  o.root = folder_argument(cl);
  if (!cl.values("--split").empty()) o.splits = cl.values("--split");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string threads = cl.value("--threads", std::to_string(cores));
  try {
    o.threads = std::stoi(threads);
  } catch (const std::exception&) {
    o.threads = 0;
  }
  if (o.threads < 1 || o.threads > 1024) throw ConfigError("--threads must be 1..1024, got '" + threads + "'");
  o.release = cl.flag("--release");
  const data::VerifyReport r = data::verify_coco(o);
  std::fputs(r.text().c_str(), stdout);
  return r.ok() ? 0 : 1;
}

int prepare(int argc, char** argv) {
  const CommandLine cl(argc, argv, {"--split"}, {});
  const std::string root = folder_argument(cl);
  const SystemConfig cfg = cl.system_config();
  const std::string split = cl.value("--split", cfg.data.train_split);
  const data::CocoLayout layout{root};
  const std::string json = layout.annotation_file(split).string(), index = layout.index_file(split).string();
  require_file(json, "annotation file");
  require_writable_folder(layout.root / "annotations", "index folder");

  const auto t0 = std::chrono::steady_clock::now();
  const data::IndexSource source = data::describe_source(json);  // before the parse: a later change shows
  const eval::Dataset coco = eval::load_dataset(json);
  // The settings training will open the index with (one rule: CocoDataset's).
  const data::CocoIndexOptions options =
      data::CocoDataset::index_options(dataset_options(cfg, layout, split, true, false));
  const data::CocoArrays arrays = data::build_coco_arrays(coco, options, json, true);
  const double built = seconds_since(t0);
  data::write_coco_index(index, arrays, source);
  const data::IndexOpen back = data::open_coco_index(index, json, options);  // read back: what train will see
  if (!back.arrays || back.arrays->stats.images_kept != arrays.stats.images_kept)
    throw std::runtime_error(index + ": the index written does not read back (" + back.reason + ")");
  std::printf("%s: %s\n  %lld bytes; parsed and built in %.1f s, written and read back in %.1f s\n", index.c_str(),
              arrays.stats.summary().c_str(), static_cast<long long>(fs::file_size(index)), built,
              seconds_since(t0) - built);
  return 0;
}

int load(int argc, char** argv) {
  const CommandLine cl(argc, argv, {"--split", "--source", "--hold-until"}, {});
  const std::string root = folder_argument(cl);
  if (const std::string s = cl.value("--source", "auto"); s != "auto" && s != "json" && s != "index")
    throw ConfigError("--source must be auto, json or index, got '" + s + "'");
  SystemConfig cfg = cl.system_config();
  const std::string split = cl.value("--split", cfg.data.train_split);
  const std::string source = cl.value("--source", cfg.data.annotation_source);
  data::CocoDatasetOptions o = dataset_options(cfg, coco_layout(cfg, root), split, true, false);
  o.source = source;
  require_file(o.annotation_file, "annotation file");

  const auto t0 = std::chrono::steady_clock::now();
  const data::CocoDataset ds(o);
  const double seconds = seconds_since(t0);
  logging::Json line{{"source", ds.source().index ? "index" : "json"},
                     {"seconds", seconds},
                     {"images", ds.size()},
                     {"instances", ds.stats().instances_kept},
                     {"max_rss_bytes", max_rss_bytes()},
                     {"pss_bytes", pss_bytes()}};
  if (!ds.source().note.empty()) line["note"] = ds.source().note;
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
  if (const std::string hold = cl.value("--hold-until"); !hold.empty())
    while (!fs::exists(hold)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return 0;
}

}  // namespace

int data_main(int argc, char** argv) {
  if (argc < 2 || wants_help(argc, argv)) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string sub = argv[1];
  int (*run)(int, char**) = sub == "verify" ? verify : sub == "prepare" ? prepare : sub == "load" ? load : nullptr;
  if (!run) {
    std::fprintf(stderr, "mlperf-maskrcnn data: error: unknown subcommand '%s' (verify, prepare or load)\n", sub.c_str());
    return 2;
  }
  const std::string name = "data " + sub;
  // Arguments (parsed first, inside `run`) are bad input: exit 2; a failure while working: 1.
  try {
    return run(argc - 1, argv + 1);
  } catch (const ConfigError& e) {
    return report_error(name.c_str(), e, 2);
  } catch (const cli::UsageError& e) {
    return report_error(name.c_str(), e, 2);
  } catch (const std::exception& e) {
    return report_error(name.c_str(), e, 1);
  }
}

}  // namespace mrcnn::run
