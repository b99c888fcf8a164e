// The standalone coco-eval executable (the same command as `mlperf-maskrcnn coco-eval`).
#include <cstdio>
#include <exception>

#include "benchmark/analysis/coco_eval_command.h"
#include "logging/arguments.h"

int main(int argc, char** argv) {
  try {
    return mrcnn::eval::coco_eval_main(argc, argv);
  } catch (const mrcnn::cli::UsageError& e) {
    return mrcnn::cli::print_error("coco-eval", e, 2);
  } catch (const std::exception& e) {
    return mrcnn::cli::print_error("coco-eval", e, 1);
  }
}
