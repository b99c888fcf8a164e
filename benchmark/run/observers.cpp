#include "benchmark/run/observers.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "benchmark/run/run_fingerprint.h"
#include "benchmark/train/checkpoint.h"
#include "logging/console.h"
#include "logging/keys.h"

namespace mrcnn::run {

using logging::Json;

// ---- MetricsFile ---------------------------------------------------------------------------------

MetricsFile::MetricsFile(const std::string& path, bool append) : file_(std::fopen(path.c_str(), append ? "a" : "w")) {
  if (file_ == nullptr) throw std::runtime_error("cannot write metrics file '" + path + "': " + std::strerror(errno));
}

MetricsFile::~MetricsFile() { std::fclose(file_); }

void MetricsFile::write(const std::string& json_line) {
  std::lock_guard lock(mutex_);
  std::fputs(json_line.c_str(), file_);
  std::fputc('\n', file_);
  std::fflush(file_);
}

void MetricsFile::step_done(int64_t epoch, const train::StepResult& r, int64_t epoch_images, double epoch_seconds) {
  Json m{{"event", "step"}, {"epoch", epoch}, {"step", r.step}, {"lr", r.lr}, {"loss", r.loss},
         {"losses", r.losses}, {"images_per_s", epoch_seconds > 0 ? epoch_images / epoch_seconds : 0.0},
         {"time_ms", logging::now_ms()}};
  if (r.skipped) m["skipped"] = true;
  if (r.grad_norm > 0) m["grad_norm"] = r.grad_norm;
  // The rank's own forward and backward (device events on a GPU): a step planned on the clock
  // (cuDNN, a graph capture) stands out here, where images_per_s averages it away.
  if (r.compute_seconds >= 0) m["compute_s"] = r.compute_seconds;
  write(m.dump());
}

void MetricsFile::eval_done(int64_t epoch, double inference_seconds) {
  write(Json{{"event", "eval_inference"}, {"epoch", epoch}, {"seconds", inference_seconds},
             {"time_ms", logging::now_ms()}}
            .dump());
}

void MetricsFile::scored(int64_t epoch, const Accuracy& acc) {
  write(Json{{"event", "eval"}, {"epoch", epoch}, {"bbox", acc.bbox}, {"segm", acc.segm},
             {"scoring_seconds", acc.scoring_seconds}, {"time_ms", logging::now_ms()}}
            .dump());
}

// ---- ProgressDisplay -----------------------------------------------------------------------------

void ProgressDisplay::epoch_started(int64_t epoch, int64_t rank_images) {
  bar_ = std::make_unique<logging::Progress>("epoch " + std::to_string(epoch), rank_images, "img");
}

void ProgressDisplay::step_done(int64_t, const train::StepResult& r, int64_t epoch_images, double) {
  char extra[96];
  std::snprintf(extra, sizeof extra, "loss %.4f  lr %.5f", r.loss, r.lr);
  if (bar_) bar_->update(epoch_images, extra);
}

void ProgressDisplay::epoch_done(int64_t) {
  if (bar_) bar_->finish();
  bar_.reset();
}

void ProgressDisplay::eval_started(int64_t epoch, int64_t batches) {
  bar_ = std::make_unique<logging::Progress>("eval  " + std::to_string(epoch), batches, "batch");
}

void ProgressDisplay::eval_batch_done(int64_t, int64_t batches_done) {
  if (bar_) bar_->update(batches_done);
}

void ProgressDisplay::eval_done(int64_t, double) {
  if (bar_) bar_->finish();
  bar_.reset();
}

// ---- CheckpointWriter ----------------------------------------------------------------------------

CheckpointWriter::CheckpointWriter(std::string dir, train::TrainableModel& model, const train::Trainer& trainer,
                                   uint64_t seed, std::string config_fingerprint)
    : dir_(std::move(dir)), model_(model), trainer_(trainer), seed_(seed), fingerprint_(std::move(config_fingerprint)) {
  std::filesystem::create_directories(dir_);
}

void CheckpointWriter::epoch_done(int64_t epoch) {
  train::Checkpoint ck{.epoch = epoch,
                       .seed = seed_,
                       .config_fingerprint = fingerprint_,
                       .model = model_.state_dict(),
                       .trainer = trainer_.state()};
  train::save_checkpoint((std::filesystem::path(dir_) / ("epoch_" + std::to_string(epoch) + ".safetensors")).string(),
                         ck);
}

FingerprintWriter::FingerprintWriter(const config::SystemConfig& config, int world_size,
                                     const std::string& communicator, std::string path, std::string log_path,
                                     logging::MLLogger& mllog)
    : config_(config),
      world_size_(world_size),
      path_(std::move(path)),
      log_path_(std::move(log_path)),
      fingerprint_(run_fingerprint(config, world_size, communicator)) {
  analysis::write_fingerprint(fingerprint_, path_);
  mllog.log(logging::key::kRunFingerprint, analysis::fingerprint_summary(fingerprint_),
            logging::Json{{"file", std::filesystem::path(path_).filename().string()}});
}

void FingerprintWriter::run_stopped(bool aborted) {
  if (aborted && world_size_ > 1) return;
  add_data_fingerprint(fingerprint_, config_, log_path_);
  analysis::write_fingerprint(fingerprint_, path_);
}

}  // namespace mrcnn::run
