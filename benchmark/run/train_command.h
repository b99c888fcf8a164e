// `mlperf-maskrcnn train --system systems/<name>.json [--set key=value ...]`: one timed, seeded
// MLPerf run. Writes, under <run.output_dir>/<UTC time>-seed<seed>/ (and a "latest" link):
//   mlperf_log.txt   the :::MLLOG log (also printed on stdout)
//   metrics.jsonl    step losses, learning rate, images/s; one line per scored epoch
//   config.json      the configuration after overrides
//   checkpoints/     epoch_<N>.safetensors when run.checkpoint_every_epoch
//   model.safetensors the trained weights (written after run_stop), for eval and predict
// Exit status: 0 targets reached, 3 epoch budget spent without reaching them, 1 error during
// the run (logged as run_stop "aborted"), 2 bad configuration or arguments (nothing written).
#pragma once

namespace mrcnn::run {

int train_main(int argc, char** argv);

}  // namespace mrcnn::run
