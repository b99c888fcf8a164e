// The training command's part of a run's fingerprint (benchmark/analysis/fingerprint.h): the
// LibTorch, CUDA, cuDNN and communicator versions, the kernels LibTorch chose for this CPU, the
// thread counts, the rank layout, and, after run_stop, the data's checksums.
#pragma once

#include <string>

#include "benchmark/analysis/fingerprint.h"
#include "benchmark/config/system_config.h"

namespace mrcnn::run {

// Everything but the data: written into the run folder before run_start. `communicator` is the
// backend the ranks run on (what "auto" became).
analysis::Json run_fingerprint(const config::SystemConfig& config, int world_size,
                               const std::string& communicator);

// Adds "data": the annotation files' sizes and SHA-256, the image counts the run logged
// (train_samples and eval_samples, read back from its MLPerf log `log_path`). Called
// after run_stop (hashing the files is touching the data, which the MLPerf clock forbids before
// run_start). Files that cannot be read are recorded with their error, never thrown.
void add_data_fingerprint(analysis::Json& fingerprint, const config::SystemConfig& config, const std::string& log_path);

// One line for --version: the LibTorch version, the CUDA runtime and GPUs it sees, and whether
// this build holds the project's CUDA kernels.
std::string library_versions();

}  // namespace mrcnn::run
