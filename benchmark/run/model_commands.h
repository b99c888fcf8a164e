// Commands that use a trained network outside a timed run:
//
//   mlperf-maskrcnn eval --weights W --data DIR [--system S] [--split val2017] [--json OUT]
//       COCO box and mask metrics of the weights on a dataset (pycocotools' summary blocks), with
//       a progress display.
//   mlperf-maskrcnn predict --weights W [--system S] [--data DIR] [--out DIR] IMAGE...
//       detections of each image as a COCO results JSON, and a PNG of the image with the boxes
//       and masks drawn over it.
//
// W is a weights file (model/weights.h) or a training checkpoint; the system file gives the
// network's options and the image transform. Exit status 0, 1 on a runtime error, 2 on bad input.
#pragma once

namespace mrcnn::run {

int eval_main(int argc, char** argv);
int predict_main(int argc, char** argv);

}  // namespace mrcnn::run
