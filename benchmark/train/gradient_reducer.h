// The gradient all-reduce, overlapped with the backward pass.
//
// The parameters are cut into buckets of about `bucket_bytes`, in the reverse of their order
// (the order in which the backward pass produces their gradients), each bucket one flat buffer.
// A hook on every parameter copies its gradient into its bucket as soon as autograd has it; when
// a bucket is complete its sum over the ranks is started (Communicator::start_allreduce_sum), so
// the reduction of the last layers' gradients runs while the first layers' are computed.
// Buckets are started strictly in bucket order on every rank (a bucket that completes early
// waits for those before it), as the collectives require. finish(), after the backward pass,
// fills the parameters no gradient reached with zeros, starts what is left, waits, and writes
// the averaged gradients into the parameters' .grad.
//
// Every element is summed once, over the same ranks, whatever the bucket boundaries: with two
// ranks the result is bit-identical to reducing after the backward pass.
// Without overlap (asked for, or where the communicator cannot be called from the backward pass's
// thread for the parameters' device: Communicator::overlaps), finish() fills every bucket from
// the accumulated .grad and starts them all.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "benchmark/comm/communicator.h"

namespace mrcnn::train {

class GradientReducer {
 public:
  // `overlap` false: every bucket is filled from .grad and started by finish().
  GradientReducer(std::vector<at::Tensor> params, comm::Communicator& comm, bool overlap = true,
                  int64_t bucket_bytes = 25 << 20);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Before each backward pass.
  void prepare();
  // After it: every parameter's .grad holds the mean over ranks.
  void finish();
  // Gradients the hooks see outside prepare() .. finish() are not the step's and are ignored:
  // CUDA graphs' warm-ups and captures (model::FeatureGraphs) compute parameter gradients with
  // autograd::grad, which calls the hooks, during the forward pass.

  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    at::Tensor buffer;             // flat, contiguous, the parameters' dtype and device
    std::vector<size_t> params;    // indices into params_
    int64_t missing = 0;           // gradients not yet copied in this step
    std::unique_ptr<comm::Communicator::PendingSum> sum;
  };
  void on_gradient(size_t param, const at::Tensor& grad);
  void start_ready_buckets();

  std::vector<at::Tensor> params_;
  comm::Communicator& comm_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;   // parameter -> bucket
  std::vector<int64_t> offset_of_;  // parameter -> first element in its bucket
  std::vector<bool> arrived_;       // parameter -> its gradient arrived this step
  std::vector<unsigned> hooks_;
  size_t next_ = 0;                 // the next bucket to start
  bool overlap_ = false;
  bool armed_ = false;              // between prepare() and finish()
};

}  // namespace mrcnn::train
