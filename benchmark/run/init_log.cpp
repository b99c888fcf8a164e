#include "benchmark/run/init_log.h"

#include "logging/keys.h"

namespace mrcnn::run {

using logging::Json;
namespace key = logging::key;

void log_submission(logging::MLLogger& mllog, const SubmissionInfo& info, bool cache_cleared) {
  mllog.log(key::kSubmissionBenchmark, info.benchmark);
  mllog.log(key::kSubmissionOrg, info.org);
  mllog.log(key::kSubmissionDivision, info.division);
  mllog.log(key::kSubmissionStatus, info.status);
  mllog.log(key::kSubmissionPlatform, info.platform);
  mllog.log(key::kCacheClear, cache_cleared);
}

void log_hyperparameters(logging::MLLogger& mllog, const config::SystemConfig& config) {
  const config::Hyperparameters& hp = config.hp;
  mllog.log(key::kSeed, config.run.seed);
  mllog.log(key::kGlobalBatchSize, hp.global_batch_size);
  mllog.log(key::kGradientAccumulationSteps, hp.gradient_accumulation_steps);
  mllog.log(key::kNumImageCandidates, hp.num_image_candidates);
  mllog.log(key::kOptName, logging::value::kSgdWithMomentum);
  mllog.log(key::kOptBaseLearningRate, hp.base_lr);
  mllog.log(key::kOptMomentum, hp.momentum);
  mllog.log(key::kOptWeightDecay, hp.weight_decay);
  mllog.log(key::kOptLearningRateWarmupSteps, hp.warmup_steps);
  mllog.log(key::kOptLearningRateWarmupFactor, hp.warmup_factor);
  mllog.log(key::kOptLearningRateDecayFactor, hp.decay_factor);
  mllog.log(key::kOptLearningRateDecaySteps, Json(hp.decay_steps));
  if (hp.gradient_clip_norm > 0) mllog.log(key::kOptGradientClipNorm, hp.gradient_clip_norm);
  mllog.log(key::kMinImageSize, config.data.transform.min_size);
  mllog.log(key::kMaxImageSize, config.data.transform.max_size);
}

void log_weights_initialization(logging::MLLogger& mllog, const std::vector<std::string>& tensor_names) {
  for (const auto& name : tensor_names)
    mllog.log(key::kWeightsInitialization, nullptr, Json{{logging::meta::kTensor, name}});
}

}  // namespace mrcnn::run
