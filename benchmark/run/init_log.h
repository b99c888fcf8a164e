// The MLPerf events of a run's init phase: submission keys and cache_clear before init_start,
// then the seed and every hyperparameter the Mask R-CNN rules check (and those worth logging).
// global_batch_size is logged before opt_base_learning_rate: the official checker's learning-rate
// rule reads it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "benchmark/config/system_config.h"
#include "logging/mllog.h"

namespace mrcnn::run {

using config::SubmissionInfo;

struct LoggedHyperparameters {
  int64_t global_batch_size = 0;
  int64_t gradient_accumulation_steps = 1;
  int64_t num_image_candidates = 1000;
  double base_lr = 0;
  int64_t warmup_steps = 0;
  double warmup_factor = 0;
  std::vector<int64_t> decay_steps;
  double decay_factor = 0.1;
  double weight_decay = 1e-4;
  double momentum = 0.9;
  double gradient_clip_norm = 0;  // logged when > 0
  int64_t min_image_size = 800;
  int64_t max_image_size = 1333;
};

// submission_benchmark/org/division/status/platform, then cache_clear (value: whether the
// launcher dropped the caches; the rules ask for a flush or a restart before benchmarking).
void log_submission(logging::MLLogger& mllog, const SubmissionInfo& info, bool cache_cleared);

// seed, then the hyperparameters (opt_name "sgd_with_momentum" included).
void log_hyperparameters(logging::MLLogger& mllog, int64_t seed, const LoggedHyperparameters& hp);

// The 21 weights_initialization events of rulesets 1.1-2.1 (dropped in 3.0, still logged by
// reference submissions): one per named tensor.
void log_weights_initialization(logging::MLLogger& mllog, const std::vector<std::string>& tensor_names);

}  // namespace mrcnn::run
