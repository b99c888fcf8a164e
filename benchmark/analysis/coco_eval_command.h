// The coco-eval command: scores a COCO results file against ground truth, pycocotools-exact.
//
//   coco-eval GT.json RESULTS.json [--iou-type bbox,segm] [--threads N] [--json OUT] [--arrays]
//
// Prints pycocotools' summary block for each IoU type (and where the time went) and, with --json,
// writes the 12 stats per type (and, with --arrays, accumulate()'s precision / recall / scores
// arrays) as JSON. Built as the standalone `coco-eval` executable and as
// `mlperf-maskrcnn coco-eval`.
#pragma once

namespace mrcnn::eval {

// argv[0] is the command's name. Returns the exit status: 0 on success, 2 on a usage error.
// Errors in the input files throw (CocoError / std::runtime_error) with one clear line.
int coco_eval_main(int argc, char** argv);

}  // namespace mrcnn::eval
