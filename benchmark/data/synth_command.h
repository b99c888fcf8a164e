// `mlperf-maskrcnn synth --out DIR [--train N] [--val M] [--size S|WxH] [--seed K] ...`:
// writes the synthetic COCO-format shapes dataset (synth.h), byte-identical for the same arguments.
// Exit status: 0 written, 1 an error while writing (message names the file), 2 bad arguments.
#pragma once

namespace mrcnn::data {

int synth_main(int argc, char** argv);

}  // namespace mrcnn::data
