// The fixed-shape front of a training step -- backbone, FPN and the RPN head on the full maps --
// replayed from CUDA graphs: one forward graph and one backward graph per padded batch shape,
// captured the first time the shape is seen (after warm-up runs) and replayed from then on, the
// way torch.cuda.make_graphed_callables graphs a module. The rest of the step (proposals,
// sampling, RoI heads, losses) runs as before; gradients reach the graphed part through one
// autograd node whose backward replays the backward graph.
//
// What a replay sees: the batch's images and true sizes are copied into the shape's static
// buffers, so the padding masks are computed inside the graph from the sizes on the device (every
// map is masked, multiplied by exactly 1 where nothing is padding: the same values as the eager
// path, which skips those maps). The parameters are read from their storage: an optimizer
// updating them in place is seen; a parameter given new storage (set_data, to()) drops every
// graph, and the next batch captures again.
//
// Memory: the graphs of all shapes share one private pool, captured on one stream. Live between
// steps are each shape's outputs and parameter gradients; the activations kept for backward are
// reused by every shape, so a backward replay must follow its own forward replay with no other
// forward between (as in a training step): the autograd node checks that and throws
// std::logic_error otherwise (gradient accumulation over two forwards, a second backward).
// Gradients are handed to autograd as copies, so no parameter's .grad aliases a graph's memory.
// Shapes beyond `max_shapes` run without graphs.
//
// Hooks: the warm-ups and the backward capture compute the parameters' gradients with
// autograd::grad, which calls hooks registered on the parameters (Tensor::register_hook); such
// hooks must ignore gradients outside the step's backward pass (train::GradientReducer does).
// Under kRerun the replayed backward calls them too, so each sees its gradient twice there.
//
// Replay::kRerun replays by running the captured work again, on any device: the same static
// buffers, autograd node and gradient path without CUDA (tests on the CPU).
//
// Thread-safety: none; one training loop per instance. Capture must not run concurrently with
// other work on the same GPU (the caller's step is the only work).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "model/backbone/padding_masks.h"

namespace mrcnn::model {

class FeatureGraphs {
 public:
  // What the graphed part computes: P2..P6 (with gradient) and the RPN head's (objectness,
  // deltas) on every level (without), as RPNHead::forward returns them.
  struct Outputs {
    std::vector<at::Tensor> features;
    std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> head;
  };
  // The eager computation, from the batch's images and its padding masks (null: none).
  using Body = std::function<Outputs(const at::Tensor& images, PaddingMasks* masks)>;

  enum class Replay { kCudaGraph, kRerun };

  struct Stats {
    int64_t captured = 0;     // shapes captured (again after a parameter moved)
    int64_t replayed = 0;     // batches run from graphs
    int64_t eager = 0;        // batches of shapes beyond max_shapes, run without graphs
    int64_t invalidated = 0;  // times every graph was dropped because a parameter moved
  };

  // trainable: the parameters gradients flow to (requires_grad); watched: every parameter and
  // buffer the body reads (trainable ones included), whose storage the graphs hold. mask_padding:
  // whether the body gets padding masks.
  FeatureGraphs(Body body, std::vector<at::Tensor> trainable, std::vector<at::Tensor> watched,
                bool mask_padding, int64_t max_shapes, Replay replay);
  ~FeatureGraphs();
  FeatureGraphs(const FeatureGraphs&) = delete;
  FeatureGraphs& operator=(const FeatureGraphs&) = delete;

  // The body's outputs for `images` (on the parameters' device, in the memory format the body
  // expects) of true sizes `image_sizes` (int64 [N, 2], CPU), from the shape's graphs; nullopt when
  // the shape is new and max_shapes are already captured (run the body eagerly then). The
  // returned tensors are the graph's static outputs: valid until the next call. Throws
  // std::runtime_error naming the shape when a capture fails.
  std::optional<Outputs> run(const at::Tensor& images, const at::Tensor& image_sizes);

  const Stats& stats() const { return stats_; }

  struct Entry;     // one shape's buffers and graphs
  struct Sequence;  // pairs each backward replay with its forward

 private:
  using Key = std::tuple<std::vector<int64_t>, std::vector<int64_t>, int, int>;  // sizes, strides, dtype, device
  std::shared_ptr<Entry> capture(const at::Tensor& images, const at::Tensor& device_sizes);
  // Runs capture_all on the pool's side stream of `device`, ordered after the work queued so far
  // and before the work that follows (a CUDA graph cannot capture the default stream).
  void capture_on_side_stream(c10::Device device, Entry& e, const std::function<void()>& capture_all);
  bool parameters_moved();

  Body body_;
  std::vector<at::Tensor> trainable_, watched_;
  std::vector<const void*> watched_storage_;
  bool mask_padding_;
  int64_t max_shapes_;
  Replay replay_;
  struct Pool;
  std::unique_ptr<Pool> pool_;  // the graphs' shared memory pool and capture stream (kCudaGraph)
  std::shared_ptr<Sequence> sequence_;
  std::map<Key, std::shared_ptr<Entry>> entries_;  // destroyed before pool_
  Stats stats_;
};

}  // namespace mrcnn::model
