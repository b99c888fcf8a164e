// The standalone coco-eval executable (the same command as `mlperf-maskrcnn coco-eval`).
#include <cstdio>
#include <exception>

#include "eval/coco_eval_command.h"
#include "logging/arguments.h"

int main(int argc, char** argv) {
  try {
    return mrcnn::eval::coco_eval_main(argc, argv);
  } catch (const mrcnn::cli::UsageError& e) {
    std::fprintf(stderr, "coco-eval: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "coco-eval: error: %s\n", e.what());
    return 1;
  }
}
