// MLPerf log key names and fixed values, as the reference emitter (mlperf_logging.mllog.constants)
// spells them. Use these instead of string literals: a misspelt key is silently ignored by the
// official checker. Values are kept in alphabetical order within each section.
#pragma once

#include <string_view>

namespace mrcnn::logging::key {

// ---- submission info ----------------------------------------------------------------------------
inline constexpr std::string_view kSubmissionBenchmark = "submission_benchmark";
inline constexpr std::string_view kSubmissionDivision = "submission_division";
inline constexpr std::string_view kSubmissionOrg = "submission_org";
inline constexpr std::string_view kSubmissionPlatform = "submission_platform";
inline constexpr std::string_view kSubmissionStatus = "submission_status";

// ---- timing info (intervals: *_start is INTERVAL_START, *_stop is INTERVAL_END) -----------------
inline constexpr std::string_view kBlockStart = "block_start";
inline constexpr std::string_view kBlockStop = "block_stop";
inline constexpr std::string_view kEpochStart = "epoch_start";
inline constexpr std::string_view kEpochStop = "epoch_stop";
inline constexpr std::string_view kEvalStart = "eval_start";
inline constexpr std::string_view kEvalStop = "eval_stop";
inline constexpr std::string_view kInitStart = "init_start";
inline constexpr std::string_view kInitStop = "init_stop";
inline constexpr std::string_view kRunStart = "run_start";
inline constexpr std::string_view kRunStop = "run_stop";

// ---- common and run info ------------------------------------------------------------------------
inline constexpr std::string_view kCacheClear = "cache_clear";
inline constexpr std::string_view kEvalAccuracy = "eval_accuracy";
inline constexpr std::string_view kEvalSamples = "eval_samples";
inline constexpr std::string_view kSeed = "seed";
inline constexpr std::string_view kTrainSamples = "train_samples";
inline constexpr std::string_view kTrainedSamples = "trained_samples";
inline constexpr std::string_view kWeightsInitialization = "weights_initialization";

// ---- hyperparameters ----------------------------------------------------------------------------
inline constexpr std::string_view kGlobalBatchSize = "global_batch_size";
inline constexpr std::string_view kGradientAccumulationSteps = "gradient_accumulation_steps";
inline constexpr std::string_view kMaxImageSize = "max_image_size";
inline constexpr std::string_view kMinImageSize = "min_image_size";
inline constexpr std::string_view kNumImageCandidates = "num_image_candidates";
inline constexpr std::string_view kOptBaseLearningRate = "opt_base_learning_rate";
inline constexpr std::string_view kOptGradientClipNorm = "opt_gradient_clip_norm";
inline constexpr std::string_view kOptLearningRateDecayFactor = "opt_learning_rate_decay_factor";
inline constexpr std::string_view kOptLearningRateDecaySteps = "opt_learning_rate_decay_steps";
inline constexpr std::string_view kOptLearningRateWarmupFactor = "opt_learning_rate_warmup_factor";
inline constexpr std::string_view kOptLearningRateWarmupSteps = "opt_learning_rate_warmup_steps";
inline constexpr std::string_view kOptMomentum = "opt_momentum";
inline constexpr std::string_view kOptName = "opt_name";
inline constexpr std::string_view kOptWeightDecay = "opt_weight_decay";

// ---- statistics (NVIDIA-style; unknown keys are ignored by the checker) -------------------------
inline constexpr std::string_view kThroughput = "throughput";
inline constexpr std::string_view kTrackedStats = "tracked_stats";

// ---- the project's own (the checker ignores keys it does not know) -----------------------------
inline constexpr std::string_view kEvalInferenceSeconds = "eval_inference_seconds";  // per epoch
// Per epoch: {"median": [...], "p95": [...]}, seconds, one entry per rank (null where its device
// does not time), of each rank's own steps up to their gradient all-reduce.
inline constexpr std::string_view kRankStepSeconds = "rank_step_seconds";
// A measurement (run.max_steps_per_epoch > 0): the steps each epoch was cut to, logged once after
// run_start, so that its log alone says how many steps an epoch's time holds.
inline constexpr std::string_view kMaxStepsPerEpoch = "max_steps_per_epoch";
// run.warm_up: logged once before init_stop, its value the warm-up's seconds; its metadata the
// shapes, the training passes, the mask head's RoI counts and the CUDA graphs captured.
inline constexpr std::string_view kInitWarmUp = "init_warm_up";
inline constexpr std::string_view kResumedFromCheckpoint = "resumed_from_checkpoint";
inline constexpr std::string_view kRunFingerprint = "run_fingerprint";  // its summary; the file beside the log

}  // namespace mrcnn::logging::key

namespace mrcnn::logging::meta {
// Metadata field names.
inline constexpr std::string_view kEpochCount = "epoch_count";
inline constexpr std::string_view kEpochNum = "epoch_num";
inline constexpr std::string_view kFirstEpochNum = "first_epoch_num";
inline constexpr std::string_view kStatus = "status";
inline constexpr std::string_view kStepNum = "step_num";
inline constexpr std::string_view kTensor = "tensor";  // weights_initialization
// The project's own, on train_samples: where the annotations were read from ("index": the
// prepared binary index; "json"), how long that took, and why the JSON served when an index was
// allowed. The official checker ignores metadata it does not know.
inline constexpr std::string_view kAnnotations = "annotations";
inline constexpr std::string_view kAnnotationsSeconds = "annotations_seconds";
inline constexpr std::string_view kAnnotationsNote = "annotations_note";
}  // namespace mrcnn::logging::meta

namespace mrcnn::logging::value {
// Fixed values.
inline constexpr std::string_view kAborted = "aborted";
inline constexpr std::string_view kBbox = "BBOX";  // eval_accuracy object fields
inline constexpr std::string_view kClosed = "closed";
inline constexpr std::string_view kCloud = "cloud";
inline constexpr std::string_view kMaskrcnn = "maskrcnn";
inline constexpr std::string_view kOnprem = "onprem";
inline constexpr std::string_view kOpen = "open";
inline constexpr std::string_view kPreview = "preview";
inline constexpr std::string_view kResearch = "research";
inline constexpr std::string_view kSegm = "SEGM";
inline constexpr std::string_view kSgdWithMomentum = "sgd_with_momentum";
inline constexpr std::string_view kSuccess = "success";
}  // namespace mrcnn::logging::value
