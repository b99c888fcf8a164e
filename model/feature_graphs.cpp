#include "model/feature_graphs.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "model/ops/host_copy.h"

#if MRCNN_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/cuda/MemPool.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace mrcnn::model {
namespace {

// Warm-up runs (forward and backward, results dropped) before a capture: the libraries' lazy
// set-up (handles, workspaces, kernel choices) must happen outside the graph. Rerun does them too,
// so that tests on the CPU go through the same sequence.
constexpr int kWarmups = 3;

// A piece of work captured once and replayed. Its work adopts its outputs the first time it runs
// and writes into them afterwards, so that a rerun replays into the same buffers a graph would.
class Recording {
 public:
  virtual ~Recording() = default;
  virtual void capture(std::function<void()> work) = 0;
  virtual void replay() = 0;
};

class Rerun final : public Recording {
 public:
  void capture(std::function<void()> work) override {
    work_ = std::move(work);
    work_();
  }
  void replay() override { work_(); }

 private:
  std::function<void()> work_;
};

#if MRCNN_HAVE_CUDA
class CudaGraph final : public Recording {
 public:
  explicit CudaGraph(at::cuda::MempoolId_t pool) : pool_(pool) {}
  void capture(std::function<void()> work) override {
    // Thread-local: the loader's workers allocate page-locked memory while a capture runs; only
    // this thread's calls must be capturable (the autograd engine's device thread launches the
    // backward's kernels onto the capturing stream, which captures them whatever the mode).
    graph_.capture_begin(pool_, cudaStreamCaptureModeThreadLocal);
    try {
      work();
    } catch (...) {
      try {
        graph_.capture_end();  // ends the stream's (invalidated) capture; its own error is secondary
      } catch (...) {
      }
      throw;
    }
    graph_.capture_end();
  }
  void replay() override { graph_.replay(); }

 private:
  at::cuda::MempoolId_t pool_;
  at::cuda::CUDAGraph graph_;
};
#endif

// Copies `from` into `to`, or makes `to` an alias of it the first time (empty `to`).
void adopt_or_copy(std::vector<at::Tensor>& to, const std::vector<at::Tensor>& from) {
  if (to.empty()) {
    to.reserve(from.size());
    for (const at::Tensor& t : from) to.push_back(t.defined() ? t.detach() : t);
    return;
  }
  const c10::NoGradGuard no_grad;  // a copy into a static buffer is no step of the autograd graph
  for (size_t i = 0; i < from.size(); ++i)
    if (to[i].defined()) to[i].copy_(from[i]);
}

std::string shape_string(const at::Tensor& t) {
  std::ostringstream s;
  s << t.sizes() << " " << t.scalar_type();
  return s.str();
}

}  // namespace

// Which forward replay a backward replay belongs to, for all shapes of one FeatureGraphs: the
// activations a backward graph reads are those the latest forward replay left in the shared pool.
struct FeatureGraphs::Sequence {
  int64_t forwards = 0;
  int64_t pending = 0;  // the forward whose backward may run next; 0: none
};

struct FeatureGraphs::Entry {
  Entry();
  ~Entry();
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;

  uint64_t serial;  // names the entry to the autograd node (registry below)
  std::shared_ptr<FeatureGraphs::Sequence> sequence;
  at::Tensor images, sizes;  // static inputs: the batch is copied into them before a replay
  std::unique_ptr<Recording> forward, backward;
  int64_t levels = 0;
  std::vector<at::Tensor> outputs;        // static: features, objectness, deltas (3 x levels)
  std::vector<at::Tensor> live;           // the forward's features with their autograd graph
  std::vector<at::Tensor> grad_features;  // static: the features' incoming gradients
  std::vector<at::Tensor> grads;          // static: the trainable parameters' gradients
};

namespace {

// The entries alive, by serial: an autograd node saves its entry's serial (an IValue), and its
// backward finds the entry here, or learns that its graphs were dropped since its forward.
std::mutex registry_mutex;
std::unordered_map<uint64_t, std::weak_ptr<FeatureGraphs::Entry>>& registry() {
  static auto* entries = new std::unordered_map<uint64_t, std::weak_ptr<FeatureGraphs::Entry>>();
  return *entries;
}
uint64_t next_serial = 1;  // guarded by registry_mutex

std::shared_ptr<FeatureGraphs::Entry> make_entry(std::shared_ptr<FeatureGraphs::Sequence> sequence) {
  auto e = std::make_shared<FeatureGraphs::Entry>();
  e->sequence = std::move(sequence);
  const std::lock_guard<std::mutex> lock(registry_mutex);
  registry()[e->serial] = e;
  return e;
}

std::shared_ptr<FeatureGraphs::Entry> find_entry(uint64_t serial) {
  const std::lock_guard<std::mutex> lock(registry_mutex);
  const auto it = registry().find(serial);
  return it == registry().end() ? nullptr : it->second.lock();
}

// The graphed part as one autograd node: forward replays the forward graph, backward copies the
// incoming gradients into the static buffers, replays the backward graph and hands out copies of
// the parameters' gradients.
struct Replayed : public torch::autograd::Function<Replayed> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, FeatureGraphs::Entry* e,
                                                at::TensorList trainable) {
    (void)trainable;  // inputs only for autograd (each one an input): the graphs read their storage
    e->forward->replay();
    const int64_t id = ++e->sequence->forwards;
    e->sequence->pending = id;
    ctx->saved_data["entry"] = static_cast<int64_t>(e->serial);
    ctx->saved_data["forward"] = id;
    // Gradients that do not reach a feature are zeros, written into the static buffer here
    // rather than materialized by autograd (the head's maps never get one).
    ctx->set_materialize_grads(false);
    torch::autograd::variable_list out;
    out.reserve(e->outputs.size());
    for (const at::Tensor& t : e->outputs) out.push_back(t.detach());
    // Only the features carry a gradient; the RPN head's maps feed the proposals. (One call:
    // each call replaces the set.)
    ctx->mark_non_differentiable(torch::autograd::variable_list(out.begin() + e->levels, out.end()));
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const std::shared_ptr<FeatureGraphs::Entry> e =
        find_entry(static_cast<uint64_t>(ctx->saved_data["entry"].toInt()));
    if (!e)
      throw std::logic_error("FeatureGraphs: the graphs of this forward were dropped (a parameter moved) before its "
                             "backward ran");
    if (ctx->saved_data["forward"].toInt() != e->sequence->pending)
      throw std::logic_error("FeatureGraphs: a backward must follow its own forward, once: another forward was "
                             "replayed in between, or this backward already ran (the graphs keep one step's "
                             "activations)");
    e->sequence->pending = 0;
    for (int64_t l = 0; l < e->levels; ++l) {
      const at::Tensor& g = grad_outputs[static_cast<size_t>(l)];
      if (g.defined()) e->grad_features[static_cast<size_t>(l)].copy_(g);
      else e->grad_features[static_cast<size_t>(l)].zero_();
    }
    e->backward->replay();
    torch::autograd::variable_list grads;
    grads.reserve(e->grads.size() + 1);
    grads.emplace_back();  // the entry pointer
    for (const at::Tensor& g : e->grads) grads.push_back(g.defined() ? g.clone() : g);
    return grads;
  }
};

}  // namespace

FeatureGraphs::Entry::Entry() {
  const std::lock_guard<std::mutex> lock(registry_mutex);
  serial = next_serial++;
}

FeatureGraphs::Entry::~Entry() {
  const std::lock_guard<std::mutex> lock(registry_mutex);
  registry().erase(serial);
}

// The graphs' memory and stream, made on the model's device at the first capture. Every capture
// uses the one stream: the allocator reuses a pool's free blocks only on the stream that
// allocated them, so shapes captured on one stream share their activations' memory.
struct FeatureGraphs::Pool {
#if MRCNN_HAVE_CUDA
  std::optional<at::cuda::MemPool> memory;
  std::optional<c10::cuda::CUDAStream> stream;
#endif
};

FeatureGraphs::FeatureGraphs(Body body, std::vector<at::Tensor> trainable, std::vector<at::Tensor> watched,
                             bool mask_padding, int64_t max_shapes, Replay replay)
    : body_(std::move(body)),
      trainable_(std::move(trainable)),
      watched_(std::move(watched)),
      mask_padding_(mask_padding),
      max_shapes_(max_shapes),
      replay_(replay),
      sequence_(std::make_shared<Sequence>()) {
  if (max_shapes_ < 1) throw std::invalid_argument("FeatureGraphs: max_shapes must be at least 1");
#if !MRCNN_HAVE_CUDA
  if (replay_ == Replay::kCudaGraph)
    throw std::invalid_argument("FeatureGraphs: CUDA graphs need a build with CUDA (MRCNN_HAVE_CUDA)");
#endif
  pool_ = std::make_unique<Pool>();
  for (const at::Tensor& p : watched_) watched_storage_.push_back(p.data_ptr());
}

FeatureGraphs::~FeatureGraphs() = default;

bool FeatureGraphs::parameters_moved() {
  bool moved = false;
  for (size_t i = 0; i < watched_.size(); ++i) {
    const void* now = watched_[i].data_ptr();
    moved |= now != watched_storage_[i];
    watched_storage_[i] = now;
  }
  return moved;
}

std::optional<FeatureGraphs::Outputs> FeatureGraphs::run(const at::Tensor& images, const at::Tensor& image_sizes) {
  if (parameters_moved() && !entries_.empty()) {
    entries_.clear();
    ++stats_.invalidated;
  }
  const Key key{images.sizes().vec(), images.strides().vec(), static_cast<int>(images.scalar_type()),
                static_cast<int>(images.device().index())};
  auto it = entries_.find(key);
  if (it == entries_.end() && static_cast<int64_t>(entries_.size()) >= max_shapes_) {
    ++stats_.eager;
    return std::nullopt;
  }
  // The sizes go to the device without blocking (page-locked), then into the static buffer.
  const at::Tensor sizes = ops::copy_to_device_async(image_sizes.to(at::kCPU, at::kLong).contiguous(), images.device());
  if (it == entries_.end()) {
    it = entries_.emplace(key, capture(images, sizes)).first;
    ++stats_.captured;
  }
  Entry& e = *it->second;
  e.images.copy_(images);
  e.sizes.copy_(sizes);
  const torch::autograd::variable_list out = Replayed::apply(&e, at::TensorList(trainable_));
  ++stats_.replayed;
  const auto levels = static_cast<std::ptrdiff_t>(e.levels);
  return Outputs{{out.begin(), out.begin() + levels},
                 {{out.begin() + levels, out.begin() + 2 * levels}, {out.begin() + 2 * levels, out.end()}}};
}

void FeatureGraphs::capture_on_side_stream(c10::Device device, Entry& e, const std::function<void()>& capture_all) {
#if MRCNN_HAVE_CUDA
  // Warm-up and capture on a side stream (a graph cannot capture the default stream), ordered
  // after the work queued so far and before the work that follows.
  const c10::DeviceIndex index = device.index();
  if (!pool_->memory) {
    const c10::cuda::CUDAGuard on(index);
    pool_->memory.emplace();
    pool_->stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index);
  }
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(index);
  const c10::cuda::CUDAStream side = *pool_->stream;
  at::cuda::CUDAEvent before;
  before.record(current);
  before.block(side);
  {
    const c10::cuda::CUDAStreamGuard guard(side);
    capture_all();
  }
  // Made on the side stream, written on the step's from now on.
  for (const at::Tensor& g : e.grad_features) g.record_stream(current);
  at::cuda::CUDAEvent after;
  after.record(side);
  after.block(current);
#else
  (void)device, (void)e;
  capture_all();
#endif
}

std::shared_ptr<FeatureGraphs::Entry> FeatureGraphs::capture(const at::Tensor& images, const at::Tensor& device_sizes) {
  const std::shared_ptr<Entry> e = make_entry(sequence_);
  e->images = images.clone();  // same sizes, strides and memory format
  e->sizes = device_sizes.clone();
  const int64_t ph = images.size(2), pw = images.size(3);
  Entry* entry = e.get();

  // One evaluation of the body from the static inputs, with fresh masks: the masks are computed
  // from the sizes on the device every time the work runs (or its graph replays).
  auto evaluate = [this, entry, ph, pw] {
    const at::AutoGradMode grad(true);  // the autograd node's forward runs without gradient mode
    std::optional<PaddingMasks> masks;
    if (mask_padding_) masks.emplace(PaddingMasks::from_device_sizes(entry->sizes, ph, pw));
    return body_(entry->images, masks ? &*masks : nullptr);
  };
  auto gradients = [this](const std::vector<at::Tensor>& features, const std::vector<at::Tensor>& grad_features) {
    if (trainable_.empty()) return std::vector<at::Tensor>{};
    return torch::autograd::grad(features, trainable_, grad_features, /*retain_graph=*/false,
                                 /*create_graph=*/false, /*allow_unused=*/true);
  };

  // Autocast's cast cache stays off: a weight cast during capture is never computed, and later
  // eager code must not reuse it; each replay casts the current weights inside the graph.
  const bool cache = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(false);
  struct RestoreCache {
    bool on;
    ~RestoreCache() { at::autocast::set_autocast_cache_enabled(on); }
  } restore{cache};

  auto record = [&](std::unique_ptr<Recording>& r, std::function<void()> work) {
#if MRCNN_HAVE_CUDA
    if (replay_ == Replay::kCudaGraph) r = std::make_unique<CudaGraph>(pool_->memory->id());
#endif
    if (!r) r = std::make_unique<Rerun>();
    r->capture(std::move(work));
  };
  auto capture_all = [&] {
    for (int i = 0; i < kWarmups; ++i) {
      const Outputs out = evaluate();
      std::vector<at::Tensor> ones;
      for (const at::Tensor& f : out.features) ones.push_back(at::ones_like(f));
      gradients(out.features, ones);
    }
    record(entry->forward, [this, entry, evaluate] {
      Outputs out = evaluate();
      entry->levels = static_cast<int64_t>(out.features.size());
      std::vector<at::Tensor> all = out.features;
      all.insert(all.end(), out.head.first.begin(), out.head.first.end());
      all.insert(all.end(), out.head.second.begin(), out.head.second.end());
      adopt_or_copy(entry->outputs, all);
      entry->live = std::move(out.features);
    });
    for (int64_t l = 0; l < entry->levels; ++l)
      entry->grad_features.push_back(at::zeros_like(entry->outputs[static_cast<size_t>(l)]));
    record(entry->backward, [entry, gradients] {
      const std::vector<at::Tensor> live = std::move(entry->live);
      entry->live.clear();
      adopt_or_copy(entry->grads, gradients(live, entry->grad_features));
    });
  };

  try {
    if (replay_ == Replay::kCudaGraph)
      capture_on_side_stream(images.device(), *e, capture_all);
    else
      capture_all();
  } catch (const std::exception& err) {
    throw std::runtime_error("CUDA graphs: capturing the backbone, FPN and RPN head for a " + shape_string(images) +
                             " batch failed (run.cuda_graph_shapes 0 runs them without graphs): " + err.what());
  }
  return e;
}

}  // namespace mrcnn::model
