// The folder of one run, <run.output_dir>/<UTC time>-seed<N>[-resumed]/, and what it holds:
//   config.json        the resolved configuration (every value the run used; loads as a system file)
//   fingerprint.json   the binary, libraries, host, threads, ranks and data checksums (run_fingerprint.h)
//   mlperf_log.txt     the MLPerf log
//   metrics.jsonl      per-step and per-epoch metrics
//   checkpoints/       epoch_<N>.safetensors when run.checkpoint_every_epoch
//   model.safetensors  the trained weights, written after run_stop
// with <run.output_dir>/latest pointing at the newest run.
#pragma once

#include <filesystem>

#include "benchmark/config/system_config.h"

namespace mrcnn::run {

struct RunFolder {
  std::filesystem::path dir;
  std::filesystem::path log() const { return dir / "mlperf_log.txt"; }
  std::filesystem::path metrics() const { return dir / "metrics.jsonl"; }
  std::filesystem::path checkpoints() const { return dir / "checkpoints"; }
  std::filesystem::path weights() const { return dir / "model.safetensors"; }
  std::filesystem::path config() const { return dir / "config.json"; }
  std::filesystem::path fingerprint() const { return dir / "fingerprint.json"; }
};

// Names the run's folder; on the main rank (`create`) also creates it, writes config.json and
// points `latest` at it.
RunFolder open_run_folder(const config::SystemConfig& config, bool resumed, bool create);

}  // namespace mrcnn::run
