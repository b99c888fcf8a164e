// mlperf-maskrcnn: the project's one executable. Each subcommand lives in the library that owns
// it and is a plain `int main`-like function; this file only routes to them and turns any escaped
// exception into one clear line and a non-zero exit.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>

#include "logging/check_command.h"
#include "logging/console.h"
// A command is compiled in when its library is part of the build (MRCNN_<LIB>=1 from CMake).
#if MRCNN_EVAL && __has_include("eval/coco_eval_command.h")
#define MRCNN_CMD_COCO_EVAL 1
#include "eval/coco_eval_command.h"
#endif
#if MRCNN_HARNESS && __has_include("benchmark/run/model_commands.h")
#define MRCNN_CMD_MODEL 1
#include "benchmark/run/model_commands.h"
#endif
#if MRCNN_HARNESS && __has_include("benchmark/data/synth_command.h")
#define MRCNN_CMD_SYNTH 1
#include "benchmark/data/synth_command.h"
#endif
#if MRCNN_HARNESS && __has_include("benchmark/run/train_command.h")
#define MRCNN_CMD_TRAIN 1
#include "benchmark/run/train_command.h"
#endif

namespace {

struct Command {
  const char* name;
  int (*main)(int argc, char** argv);  // argv[0] is the subcommand's name
  const char* summary;
};

constexpr Command kCommands[] = {
    {"check", mrcnn::logging::check_main,
     "check MLPerf logs against the Mask R-CNN 3.1.0 compliance rules"},
#if MRCNN_CMD_COCO_EVAL
    {"coco-eval", mrcnn::eval::coco_eval_main,
     "score COCO results (bbox, segm) against ground truth, pycocotools-exact"},
#endif
#if MRCNN_CMD_MODEL
    {"eval", mrcnn::run::eval_main, "COCO metrics of trained weights on a dataset"},
    {"predict", mrcnn::run::predict_main, "detections of trained weights on images (JSON + PNG)"},
#endif
#if MRCNN_CMD_TRAIN
    {"train", mrcnn::run::train_main, "the timed, seeded MLPerf training run"},
#endif
#if MRCNN_CMD_SYNTH
    {"synth", mrcnn::data::synth_main, "write the synthetic COCO-format dataset"},
#endif
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: mlperf-maskrcnn <command> [args...]\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out, "\n'mlperf-maskrcnn <command> --help' describes a command.\n");
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
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.main(argc - 1, argv + 1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mlperf-maskrcnn %s: error: %s\n", c.name, mrcnn::logging::error_text(e).c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "mlperf-maskrcnn: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
