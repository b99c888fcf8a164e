// The training step's loss heads on CUDA streams of their own: the RPN's loss, the box head and
// the mask head, as NVIDIA's MLPerf Mask R-CNN runs them (Combined_RPN_ROI on three streams), so
// that one head's kernels fill the GPU while another's wait on their inputs or on the host that
// launches them. Off (ModelOptions::head_streams false), or on a CPU, every head runs on the
// step's current stream, as it always did.
//
// Ordering: each head's work starts after everything queued so far on the step's stream (an event
// its stream waits on), and join() makes the step's stream wait for every head, so what follows
// (the loss sum, backward) sees their results. Autograd runs each op's backward on its forward's
// stream and synchronises the streams where gradients meet. Memory: the tensors join() is given
// (what the heads return to the step) are marked as used by the step's stream, and the inputs
// run() is given (made on the step's stream) as used by the head's, so that the caching allocator
// hands neither's memory to another stream's work while the first still reads it (a head's
// backward kernels included, which are queued on the head's stream after join()).
// Arithmetic: the same kernels on the same inputs, in the same host order: the step's results are
// the one-stream step's bit for bit where its kernels are deterministic
// (MaskRCNNTest.HeadStreamsOnCudaGiveTheOneStreamStep).
//
// Thread-safety: one step at a time (the model's).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <vector>

namespace mrcnn::model {

class HeadStreams {
 public:
  enum class Head { kRpn = 0, kBox = 1, kMask = 2 };

  HeadStreams();  // off: every head on the current stream
  // On when `enabled` and `device` is a CUDA device (three streams of its pool, kept for the
  // object's life); off otherwise.
  HeadStreams(bool enabled, c10::Device device);
  ~HeadStreams();
  HeadStreams(const HeadStreams&) = delete;
  HeadStreams& operator=(const HeadStreams&) = delete;

  bool on() const { return impl_ != nullptr; }

  // Runs `fn` with `head`'s stream current, after the work queued so far on the current stream.
  // `inputs`: the tensors made before that `fn` reads (its forward and backward kernels on the
  // head's stream); each CUDA one is marked as used by that stream.
  void run(Head head, const std::vector<at::Tensor>& inputs, const std::function<void()>& fn);

  // The current stream waits for every head; each CUDA tensor of `outputs` is marked as used by it.
  void join(const std::vector<at::Tensor>& outputs);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mrcnn::model
