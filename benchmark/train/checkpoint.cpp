#include "benchmark/train/checkpoint.h"

#include <bit>
#include <cstdio>
#include <stdexcept>

#include "model/safetensors.h"

namespace mrcnn::train {
namespace {

constexpr const char* kFormat = "mlperf-maskrcnn-checkpoint-1";

uint64_t checksum(const std::map<std::string, at::Tensor>& tensors) {
  uint64_t h = kFnvOffset;
  for (const auto& [name, t] : tensors) {  // std::map: name order, as the file stores them
    h = fnv1a64(name.data(), name.size(), h);
    const at::Tensor c = t.to(at::kCPU).contiguous();
    h = fnv1a64(c.data_ptr(), c.nbytes(), h);
  }
  return h;
}

std::string hex(uint64_t v) {
  char b[20];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace

uint64_t fnv1a64(const void* data, size_t n, uint64_t hash) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    hash ^= p[i];
    hash *= 1099511628211ULL;
  }
  return hash;
}

void save_checkpoint(const std::string& path, const Checkpoint& ck) {
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [k, v] : ck.model) tensors.emplace("model/" + k, v.detach().to(at::kCPU).contiguous());
  for (const auto& [k, v] : ck.trainer.optimizer) tensors.emplace("optimizer/" + k, v.detach().to(at::kCPU).contiguous());
  std::map<std::string, std::string> meta{{"format", kFormat},
                                          {"epoch", std::to_string(ck.epoch)},
                                          {"step", std::to_string(ck.trainer.step)},
                                          {"seed", std::to_string(ck.seed)},
                                          {"loss_scale", hex(std::bit_cast<uint64_t>(ck.trainer.loss_scale))},
                                          {"scaler_good_steps", std::to_string(ck.trainer.scaler_good_steps)},
                                          {"config_fingerprint", ck.config_fingerprint},
                                          {"checksum_fnv1a64", hex(checksum(tensors))}};
  try {
    model::write_safetensors(path, tensors, meta);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot write checkpoint " + path + ": " + e.what());
  }
}

namespace {

// A training checkpoint's tensors and metadata as read, or its read error naming the file.
model::TensorFile read_checkpoint_file(const std::string& path) {
  try {
    return model::read_safetensors(path);
  } catch (const std::exception& e) {
    throw std::runtime_error("checkpoint " + path + " cannot be read: " + e.what());
  }
}

// A checkpoint is told from a weights file by its sealing checksum.
bool is_checkpoint(const model::TensorFile& f) { return f.metadata.contains("checksum_fnv1a64"); }

Checkpoint checkpoint_of(model::TensorFile f, const std::string& path) {
  auto field = [&](const char* k) -> const std::string& {
    auto it = f.metadata.find(k);
    if (it == f.metadata.end()) throw std::runtime_error("checkpoint " + path + " lacks metadata field '" + k + "'");
    return it->second;
  };
  if (field("format") != kFormat)
    throw std::runtime_error("checkpoint " + path + " is not a " + kFormat + " file (format '" + field("format") + "')");
  if (field("checksum_fnv1a64") != hex(checksum(f.tensors)))
    throw std::runtime_error("checkpoint " + path + " is corrupt: its tensors do not match the stored checksum");
  Checkpoint ck;
  try {
    ck.epoch = std::stoll(field("epoch"));
    ck.trainer.step = std::stoll(field("step"));
    ck.seed = std::stoull(field("seed"));
    ck.trainer.loss_scale = std::bit_cast<double>(static_cast<uint64_t>(std::stoull(field("loss_scale"), nullptr, 16)));
    ck.trainer.scaler_good_steps = std::stoll(field("scaler_good_steps"));
  } catch (const std::logic_error&) {
    throw std::runtime_error("checkpoint " + path + " has a malformed metadata number");
  }
  ck.config_fingerprint = field("config_fingerprint");
  for (auto& [name, t] : f.tensors) {
    if (name.starts_with("model/"))
      ck.model.emplace(name.substr(6), std::move(t));
    else if (name.starts_with("optimizer/"))
      ck.trainer.optimizer.emplace(name.substr(10), std::move(t));
    else
      throw std::runtime_error("checkpoint " + path + " holds an unexpected tensor '" + name + "'");
  }
  if (ck.epoch < 1 || ck.trainer.step < 0) throw std::runtime_error("checkpoint " + path + " has an invalid epoch or step");
  return ck;
}

}  // namespace

Checkpoint load_checkpoint(const std::string& path) { return checkpoint_of(read_checkpoint_file(path), path); }

std::map<std::string, at::Tensor> network_tensors(const std::string& path) {
  model::TensorFile f = model::read_safetensors(path);
  if (!is_checkpoint(f)) return std::move(f.tensors);
  return checkpoint_of(std::move(f), path).model;
}

}  // namespace mrcnn::train
