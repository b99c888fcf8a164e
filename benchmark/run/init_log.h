// The MLPerf events of a run's init phase: submission keys and cache_clear before init_start,
// then the seed and every hyperparameter the Mask R-CNN rules check (and those worth logging).
// global_batch_size is logged before opt_base_learning_rate: the official checker's learning-rate
// rule reads it.
#pragma once

#include <string>
#include <vector>

#include "benchmark/config/system_config.h"
#include "logging/mllog.h"

namespace mrcnn::run {

using config::SubmissionInfo;

// submission_benchmark/org/division/status/platform, then cache_clear (value: whether the
// launcher dropped the caches; the rules ask for a flush or a restart before benchmarking).
void log_submission(logging::MLLogger& mllog, const SubmissionInfo& info, bool cache_cleared);

// run.seed, then the hyperparameters as the configuration resolved them (opt_name
// "sgd_with_momentum" included; opt_gradient_clip_norm where clipping is on; min_image_size and
// max_image_size from data.transform).
void log_hyperparameters(logging::MLLogger& mllog, const config::SystemConfig& config);

// The 21 weights_initialization events of rulesets 1.1-2.1 (dropped in 3.0, still logged by
// reference submissions): one per named tensor.
void log_weights_initialization(logging::MLLogger& mllog, const std::vector<std::string>& tensor_names);

}  // namespace mrcnn::run
