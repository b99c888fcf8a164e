// mlperf-maskrcnn: the project's one executable. Each subcommand lives in the library that owns
// it and is a plain `int main`-like function; this file only routes to them and turns any escaped
// exception into one clear line and a non-zero exit (2 for a bad command line: cli::UsageError). Every command takes `--name=value` for
// `--name value`; `mlperf-maskrcnn --version` says what this build is.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "benchmark/analysis/audit_command.h"
#include "benchmark/analysis/export_command.h"
#include "benchmark/analysis/forecast_command.h"
#include "benchmark/analysis/fingerprint.h"
#include "benchmark/analysis/report_command.h"
#include "benchmark/analysis/coco_eval_command.h"
#include "logging/arguments.h"
#include "logging/check_command.h"
#include "logging/console.h"
// The LibTorch part of the project (MRCNN_WITH_TORCH, on by default) brings the harness's commands.
#if MRCNN_WITH_TORCH
#include "benchmark/data/synth_command.h"
#include "benchmark/run/commands.h"
#include "benchmark/run/run_fingerprint.h"
#endif

namespace {

struct Command {
  const char* name;
  int (*main)(int argc, char** argv);  // argv[0] is the subcommand's name
  const char* group;                   // the heading it is listed under in --help
  const char* summary;
};

constexpr const char* kGroups[] = {"run", "data", "results", "models", "setup"};

constexpr Command kCommands[] = {
#if MRCNN_WITH_TORCH
    {"train", mrcnn::run::train_main, "run", "the timed, seeded MLPerf training run of a system file"},
    {"launch", mrcnn::run::launch_main, "run", "start a system's ranks: mpirun, a Slurm batch job or torchrun"},
    {"data", mrcnn::run::data_main, "data", "a COCO 2017 folder: verify it, prepare its training index, time its read"},
    {"synth", mrcnn::data::synth_main, "data", "write the synthetic COCO-format dataset"},
#endif
    {"check", mrcnn::logging::check_main, "results", "check MLPerf logs against the Mask R-CNN compliance rules (1.0.0-3.1.0)"},
    {"report", mrcnn::analysis::report_main, "results", "compare systems from their results: score, RCP check, throughput, time, plots"},
    {"forecast", mrcnn::analysis::forecast_main, "results", "predict a system's score from one measured node; --validate on published results"},
    {"audit", mrcnn::analysis::audit_main, "results", "compare two runs: setup differences, first diverging step, verdict"},
    {"export", mrcnn::analysis::export_main, "results", "a run's metrics as a TensorBoard event file and CSV tables"},
#if MRCNN_WITH_TORCH
    {"eval", mrcnn::run::eval_main, "models", "COCO metrics of trained weights on a dataset"},
    {"predict", mrcnn::run::predict_main, "models", "detections of trained weights on images (JSON + PNG)"},
#endif
    {"coco-eval", mrcnn::eval::coco_eval_main, "models", "score COCO results (bbox, segm) against ground truth, pycocotools-exact"},
#if MRCNN_WITH_TORCH
    {"config", mrcnn::run::config_main, "setup", "the resolved configuration of a system file (or some of its keys)"},
#endif
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: mlperf-maskrcnn <command> [args...]   |   mlperf-maskrcnn --version\n");
  for (const char* group : kGroups) {
    bool heading = false;
    for (const Command& c : kCommands) {
      if (std::string_view(c.group) != group) continue;
      if (!heading) std::fprintf(out, "\n%s:\n", group);
      heading = true;
      std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
    }
  }
  std::fprintf(out,
               "\n'mlperf-maskrcnn <command> --help' describes a command: its options, exit statuses and "
               "examples.\nOptions take '--name value' or '--name=value'. Environment: MRCNN_SYSTEM (the default "
               "--system),\nMRCNN_DATA_DIR (run.data_dir), MRCNN_OUT (run.output_dir); --system and --set win over "
               "them.\n\nexit status: the command's; 2 for a bad command line (one line: "
               "mlperf-maskrcnn <command>: error: ...)\n\nexamples:\n"
               "    mlperf-maskrcnn train --system systems/cpu-dev.json --data data/synthetic\n"
               "    mlperf-maskrcnn check out/cpu-dev/latest/mlperf_log.txt\n"
               "    mlperf-maskrcnn report results/ --html out/report\n");
}

int version() {
  const mrcnn::analysis::BuildInfo& b = mrcnn::analysis::build_info();
  std::printf("mlperf-maskrcnn %s (commit %s%s, %s, %s)\n", b.version.c_str(), b.git_commit.c_str(),
              b.git_dirty ? ", modified" : "", b.build_type.c_str(), b.compiler.c_str());
#if MRCNN_WITH_TORCH
  std::printf("%s\n", mrcnn::run::library_versions().c_str());
#else
  std::printf("built without LibTorch (MRCNN_WITH_TORCH=OFF): train, eval and predict are not in it\n");
#endif
  return 0;
}

// --name=value -> --name value, after a bare "--" too (launch reads the train arguments there).
std::vector<std::string> split_assignments(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    if (a.starts_with("--") && eq != std::string::npos && eq > 2) {
      out.push_back(a.substr(0, eq));
      out.push_back(a.substr(eq + 1));
    } else {
      out.push_back(a);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const std::string_view name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    usage(stdout);
    return 0;
  }
  if (name == "--version" || name == "version") return version();
  std::vector<std::string> args = split_assignments(argc - 1, argv + 1);
  std::vector<char*> command_argv;
  for (std::string& a : args) command_argv.push_back(a.data());
  command_argv.push_back(nullptr);
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.main(static_cast<int>(args.size()), command_argv.data());
    } catch (const mrcnn::cli::UsageError& e) {  // the command line itself: nothing ran
      return mrcnn::cli::print_error(std::string("mlperf-maskrcnn ") + c.name, e, 2);
    } catch (const std::exception& e) {
      return mrcnn::cli::print_error(std::string("mlperf-maskrcnn ") + c.name, e, 1);
    }
  }
  std::string names;
  for (const Command& c : kCommands) names += (names.empty() ? "" : ", ") + std::string(c.name);
  std::fprintf(stderr, "mlperf-maskrcnn: error: unknown command '%s' (commands: %s; see --help)\n", argv[1],
               names.c_str());
  return 2;
}
