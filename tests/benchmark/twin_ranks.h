// A stand-in communicator for tests: rank 0 of two ranks whose other rank computed what this one
// computed, as seen from rank 0. Every sum doubles its tensors (a mean leaves them as they are),
// gathers repeat this rank's bytes, a broadcast leaves root's tensors as they are. It records what
// tests ask of it: each started sum (its size, whether the backward pass was still running), the
// calls to progress(), and each broadcast through on_broadcast.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/comm/communicator.h"

namespace mrcnn::testing {

class TwinRanks final : public comm::Communicator {
 public:
  struct Start {
    int64_t numel;
    bool during_backward;
  };
  bool in_backward = false;  // set by a test around its backward pass
  bool overlap = true;       // whether started sums of CPU tensors overlap the backward
  std::vector<Start> starts;
  int progress_calls = 0;
  std::function<void()> on_broadcast;

  std::string backend() const override { return "twin"; }
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 2; }
  void allreduce_sum(std::vector<at::Tensor>& tensors, int64_t) override {
    for (at::Tensor& t : tensors) t.mul_(2);
  }
  std::unique_ptr<PendingSum> start_allreduce_sum(at::Tensor buffer) override {
    starts.push_back({buffer.numel(), in_backward});
    buffer.mul_(2);
    return std::make_unique<PendingSum>();
  }
  bool overlaps(const at::Device& device) const override { return overlap && device.is_cpu(); }
  void progress() override { ++progress_calls; }
  void broadcast(std::vector<at::Tensor>&, int) override {
    if (on_broadcast) on_broadcast();
  }
  std::vector<std::string> allgather_bytes(const std::string& mine) override { return {mine, mine}; }
  std::vector<std::string> gather_bytes(const std::string& mine, int) override { return {mine, mine}; }
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }
};

}  // namespace mrcnn::testing
