// FlopCounter: the arithmetic of whatever ATen runs while it is active, counted from the shapes of
// the operators as they execute, attributed to the network's stages and timed per stage.
//
// What counts (the convention of torch.utils.flop_counter, so that a torchvision step counted
// there and a step of this network counted here are comparable): the matrix products and
// convolutions, 2 FLOPs per multiply-add, of
//   aten::mm, aten::addmm (the bias add not counted), aten::bmm, aten::baddbmm,
//   aten::convolution (2 * N * C_out * C_in/groups * k_h * k_w * H_out * W_out; for a transposed
//     convolution the input's spatial size instead of the output's), and
//   aten::convolution_backward (the forward's count once for the input gradient and once for the
//     weight gradient, each only when it is asked for: frozen layers cost no weight gradient, the
//     first trainable layer no input gradient).
// Element-wise work (norms, activations, losses, the optimizer), RoIAlign and NMS are not counted:
// they are memory-bound and would only blur a rate that is compared with a convolution's.
// Composite operators (conv2d, linear, matmul) are counted once, at the operator that does the
// arithmetic. A convolution weight gradient that the network computes itself (conv2d_train's
// matrix products per kernel tap) runs in a kConvWeightGradScope scope with inputs (grad_output,
// input, weight): counted as convolution_backward's weight gradient, the products in it not.
//
// Where it goes: RECORD_FUNCTION scopes of the network name the stage ("mrcnn::backbone" ->
// backbone, see kStageScopes) and the trainer's scopes name the phase ("mrcnn::forward" ->
// forward, "mrcnn::backward", "mrcnn::optimizer"). Backward work is attributed to the stage whose
// forward created the autograd node that runs it (matched by the node's sequence number), so
// "backbone/backward" is the backbone's own backward pass. Work in no stage goes to "other".
// Seconds are exclusive wall time on the thread that opened the phase: a nested stage's time is
// its own, not its parent's.
//
// One counter may be active at a time (it installs a global RecordFunction callback that asks for
// the operators' inputs and outputs: slower, so count one step and time the others without it).
// Not thread-safe to start/stop concurrently; ops on other threads are counted (under a mutex)
// in "other" unless they run inside an attributed scope of their own thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mrcnn::model {

// Scope name -> stage it belongs to (sub-scopes map to their stage).
inline constexpr std::array<std::pair<const char*, const char*>, 9> kStageScopes{{
    {"mrcnn::backbone", "backbone"},
    {"mrcnn::fpn", "fpn"},
    {"mrcnn::rpn", "rpn"},
    {"mrcnn::rpn_proposals", "rpn"},
    {"mrcnn::rpn_loss", "rpn"},
    {"mrcnn::roi_sampling", "roi_sampling"},
    {"mrcnn::mask_targets", "roi_sampling"},
    {"mrcnn::roi_box", "roi_box"},
    {"mrcnn::roi_mask", "roi_mask"},
}};
inline constexpr const char* kConvWeightGradScope = "mrcnn::conv_weight_grad";
inline constexpr std::array<std::pair<const char*, const char*>, 3> kPhaseScopes{{
    {"mrcnn::forward", "forward"},
    {"mrcnn::backward", "backward"},
    {"mrcnn::optimizer", "optimizer"},
}};

// One distinct convolution or matrix product seen, with how often and how much it cost.
struct OpShape {
  enum class Kind { kConvolution, kMatmul };
  Kind kind = Kind::kConvolution;
  // Convolution: input [N, C, H, W], weight [C_out, C_in/g, kh, kw] (transposed: [C_in, C_out/g,
  // kh, kw]), stride, padding, dilation, groups, transposed, channels_last (the input's layout).
  // Matmul: input {B, M, K} and weight {B, K, N} (B = 1 for mm/addmm).
  std::vector<int64_t> input, weight;
  std::array<int64_t, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
  bool transposed = false;
  bool channels_last = false;
  std::string stage;  // where it ran first (forward)
  int64_t calls = 0;
  double flops = 0;   // all calls together, forward only

  double flops_per_call() const { return calls ? flops / static_cast<double>(calls) : 0.0; }
  std::string describe() const;  // "conv 3x3/1 [2,256,200,336] -> 256 (channels-last)", "mm 1024x12544x256"
};

struct FlopCell {
  double flops = 0;
  double seconds = 0;
  int64_t ops = 0;  // counted operators
};

class FlopCounter {
 public:
  FlopCounter();
  ~FlopCounter();  // stops if active
  FlopCounter(const FlopCounter&) = delete;
  FlopCounter& operator=(const FlopCounter&) = delete;

  // Throws std::logic_error when another counter is active.
  void start();
  void stop();

  // (stage, phase) -> flops and exclusive seconds; stage "other" holds the rest of each phase.
  std::map<std::pair<std::string, std::string>, FlopCell> cells() const;
  double total_flops() const;
  // Distinct forward convolutions and matrix products, most FLOPs first.
  std::vector<OpShape> shapes() const;

  struct State;  // shared with the RecordFunction callbacks

 private:
  std::unique_ptr<State> state_;
  uint64_t handle_ = 0;
  bool active_ = false;
};

}  // namespace mrcnn::model
