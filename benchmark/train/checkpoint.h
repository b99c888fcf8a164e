// Training checkpoints: everything needed to continue a run exactly where it stopped -- the
// network's tensors, the optimizer's momentum buffers, the step counter, the loss scaler and
// the epoch just finished -- in one safetensors file (model/safetensors.h), written atomically
// (a temporary file renamed over the target) and sealed with a checksum of every tensor byte,
// verified on load so that a corrupt or truncated checkpoint is refused with a clear error.
//
// Tensor names: "model/<name>" and "optimizer/<name>"; metadata: format, epoch, step, seed,
// loss scaler, config fingerprint, checksum.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>

#include "benchmark/train/trainer_state.h"

namespace mrcnn::train {

struct Checkpoint {
  int64_t epoch = 0;  // the last finished epoch (1-based); a resumed run starts at epoch + 1
  uint64_t seed = 0;
  std::string config_fingerprint;  // of the settings that must match to resume
  std::map<std::string, at::Tensor> model;
  TrainerState trainer;  // step, momentum buffers, loss scaler
};

// Throws std::runtime_error naming the file on an I/O failure.
void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);

// Throws std::runtime_error naming the file and the problem: not a checkpoint, a checksum
// mismatch (corrupt), a missing field.
Checkpoint load_checkpoint(const std::string& path);

// The network's tensors of a file that holds one, by name: a training checkpoint's "model/"
// tensors (verified as load_checkpoint verifies them), or a plain weights file's tensors. Throws
// std::runtime_error naming the file.
std::map<std::string, at::Tensor> network_tensors(const std::string& path);

// FNV-1a 64 of a byte range, continuing from `hash` (start with kFnvOffset).
inline constexpr uint64_t kFnvOffset = 14695981039346656037ULL;
uint64_t fnv1a64(const void* data, size_t n, uint64_t hash = kFnvOffset);

}  // namespace mrcnn::train
