// One Mask R-CNN training step: forward (losses), backward, SGD (momentum 0.9, weight decay 1e-4).
//
// Google Benchmark cases (synthetic shapes, seeded; threads from --mrcnn_threads, default 2):
//   BM_TrainStep/small     ResNet-18-FPN with group norm, FPN 128, heads 256/128, 4 images of
//                          128x128, 32 RoIs and 300 proposals per image: the demo's model.
//   BM_TrainStep/r50_small MLPerf's ResNet-50-FPN at 2 images of 320x480 (minutes per
//                          repetition on two cores is the full size's job, below).
//
// Driver mode, for benchmark/perf/compare_model_train_step.py (which runs torchvision's step on the
// same inputs in another process, interleaved): --mrcnn_case=DIR with options.json,
// weights.safetensors and batch.safetensors; --mrcnn_warmup=N (1), --mrcnn_steps=N (3),
// --mrcnn_trace=PATH profiles one more step (--mrcnn_trace_steps=N: N more, each step one
// "mrcnn::train_step" scope) and writes its Chrome trace there (with
// --mrcnn_profile_memory=1 the allocations too, with --mrcnn_trace_shapes=1 the operators' input shapes),
// --mrcnn_report=PATH writes {"step_seconds": [...], "setup_rss_mb", "peak_rss_mb", ...},
// --mrcnn_flops=PATH counts the first step's FLOPs and one more step's per stage and phase (model/flop_count.h: the
// convolutions and matrix products, from their shapes), times the step's heaviest convolution and
// matrix-product shapes alone in this process (the roofline: forward, and the convolutions'
// backward too; not with --mrcnn_roofline=0) and writes both there, for
// benchmark/perf/flops_roofline.py. --mrcnn_host_memory=retain|system: what happens to freed host memory,
// as the harness's launch.host_memory (default retain, the harness's default).
// --mrcnn_device=cuda[:N] runs the step on a GPU (the batch's tensors copied there once; polygons
// stay on the host, as the harness keeps them); --mrcnn_precision=fp32|bf16|fp16,
// --mrcnn_channels_last=0|1 and --mrcnn_cuda_graph_shapes=N (CUDA graphs for the backbone, FPN and
// RPN head, model::FeatureGraphs; the warm-up steps capture the batch's shape) override
// options.json. Every step ends with a device synchronize before its time is taken; the report adds "syncs_per_step" (host synchronizations LibTorch made
// inside one more, untimed step, counted by train::SyncCounter; 0 on the CPU) and, on a GPU,
// "peak_gpu_mb" (the caching allocator's peak). The optimizer is the harness's train::Sgd
// (one fused update) with torch.optim.SGD's semantics: momentum 0.9, weight decay 1e-4 on every
// parameter, lr 0.002; as the harness's trainer with results_every > 1, a step reads nothing back
// (the float16 skip and the loss scale's update are decided on the device; train::LossScaler,
// torchvision's side: GradScaler, whose step reads its overflow flag).
// --mrcnn_ops=native|portable|auto (both modes; default auto, which is native on the CPU): which
// implementation of the custom ops runs (model/ops/implementation.h, the harness's run.ops), set
// process-wide before the model is built; the report names it ("ops", resolved on the device).
// --mrcnn_cudnn_benchmark=0|1: cuDNN's algorithm benchmarking off or on (default: LibTorch's, off).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>
#if MRCNN_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif
#include <torch/version.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "benchmark/run/host_memory.h"
#include "benchmark/train/loss_scaler.h"
#include "benchmark/train/sgd.h"
#include "benchmark/train/sync_counter.h"
#include "model/flop_count.h"
#include "model/mask_rcnn.h"
#include "model/ops/implementation.h"
#include "model/options_json.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace {

using namespace mrcnn::model;

int g_threads = 2;

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

double current_rss_mb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

// Rectangles and triangles on noise, with their boxes and polygons; normalized-looking values.
Batch synthetic_batch(int64_t n, int64_t h, int64_t w, int objects, int64_t num_classes, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  Batch b;
  b.images = at::randn({n, 3, h, w}, gen) * 0.3;
  b.image_sizes = at::tensor({h, w}, at::kLong).repeat({n, 1});
  b.original_sizes = b.image_sizes.clone();
  b.gt_boxes = at::zeros({n, objects, 4});
  b.gt_labels = at::zeros({n, objects}, at::kLong);
  b.gt_counts = at::full({n}, objects, at::kLong);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> coords;
    std::vector<int64_t> polys{0}, insts{0};
    for (int k = 0; k < objects; ++k) {
      const at::Tensor u = at::rand({5}, gen);
      const double bw = 16 + u[0].item<double>() * (w / 3.0), bh = 16 + u[1].item<double>() * (h / 3.0);
      const double x1 = u[2].item<double>() * (w - bw - 1), y1 = u[3].item<double>() * (h - bh - 1);
      b.images[i].slice(1, static_cast<int64_t>(y1), static_cast<int64_t>(y1 + bh))
          .slice(2, static_cast<int64_t>(x1), static_cast<int64_t>(x1 + bw))
          .fill_(u[4].item<double>() * 2 - 1);
      b.gt_boxes[i][k] = at::tensor({x1, y1, x1 + bw, y1 + bh});
      b.gt_labels[i][k] = 1 + (i + k) % (num_classes - 1);
      coords.insert(coords.end(), {x1, y1, x1 + bw, y1, x1 + bw, y1 + bh, x1, y1 + bh});
      polys.push_back(static_cast<int64_t>(coords.size()));
      insts.push_back(static_cast<int64_t>(polys.size() - 1));
    }
    b.gt_polygons.push_back({at::tensor(coords, at::kDouble), at::tensor(polys, at::kLong),
                             at::tensor(insts, at::kLong)});
    b.image_ids.push_back(i + 1);
  }
  return b;
}

ModelOptions small_options() {
  ModelOptions o;
  o.num_classes = 11;
  o.backbone.depth = 18;
  o.backbone.norm = NormKind::kGroupNorm;
  o.backbone.freeze_at = 0;
  o.fpn.out_channels = 128;
  o.rpn.pre_nms_top_n_train = 600;
  o.rpn.post_nms_top_n_train = 300;
  o.rpn.post_nms_per_batch_train = false;
  o.box_head.representation_size = 256;
  o.box_head.batch_size_per_image = 32;
  o.mask_head.conv_channels = 128;
  o.mask_head.num_convs = 2;
  o.channels_last = true;
  return o;
}

struct Trainer {
  MaskRCNN model;
  mrcnn::train::Sgd sgd;
  // float16: the harness's dynamic loss scaling (torchvision's side uses GradScaler).
  mrcnn::train::LossScaler scaler;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1234);
  std::map<std::string, int64_t> counts;  // of the last step
  std::vector<int64_t> syncs;             // host synchronizations of each counted step

  explicit Trainer(MaskRCNN m, bool float16 = false)
      : model(std::move(m)),
        sgd(trainable(model), {.momentum = 0.9, .weight_decay = 1e-4, .bias_lr_factor = 1.0, .bias_weight_decay = 1e-4}),
        scaler({.enabled = float16}) {}

  static std::vector<mrcnn::train::NamedParameter> trainable(const MaskRCNN& m) {
    std::vector<mrcnn::train::NamedParameter> p;
    for (const auto& t : m->named_parameters())
      if (t.value().requires_grad()) p.push_back({t.key(), t.value()});
    return p;
  }

  // One step as the harness's trainer runs it with results_every > 1: forward, backward of the
  // (scaled) loss, unscale and check, the scale's update and SGD (nothing where the check found a
  // non-finite gradient), all on the device; nothing read back. With count_syncs, LibTorch's sync
  // debug mode counts its host synchronizations (timed steps leave it off: it costs host time per
  // sync, more on the side that syncs more).
  double step(const Batch& batch, bool count_syncs = false) {
    const bool gpu = batch.images.is_cuda();
    if (gpu) torch::cuda::synchronize();
    std::optional<mrcnn::train::SyncCounter> counter;
    if (count_syncs) counter.emplace();
    const auto t0 = std::chrono::steady_clock::now();
    // The step's scope: a trace of several steps is cut at these (benchmark/perf/trace_summary.py).
    std::optional<at::RecordFunction> step_scope(std::in_place, at::RecordScope::USER_SCOPE);
    if (step_scope->isActive()) step_scope->before("mrcnn::train_step");
    sgd.zero_grad();
    at::Tensor loss;
    std::map<std::string, at::Tensor> count_tensors;
    {
      RECORD_FUNCTION("mrcnn::forward", std::vector<c10::IValue>());
      const TrainOutput out = model->forward_train(batch, gen);
      loss = total_loss(out.losses);
      count_tensors = out.counts();
    }
    {
      RECORD_FUNCTION("mrcnn::backward", std::vector<c10::IValue>());
      scaler.scale_loss(loss).backward();
    }
    {
      RECORD_FUNCTION("mrcnn::optimizer", std::vector<c10::IValue>());
      const at::Tensor found_inf = scaler.unscale(sgd.parameters());
      scaler.update(found_inf);
      sgd.step(0.002, found_inf);
    }
    if (counter) syncs.push_back(counter->count());  // before the synchronize that ends the step
    if (gpu) torch::cuda::synchronize();
    step_scope.reset();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& [name, c] : count_tensors) counts[name] = c.item<int64_t>();
    return seconds;
  }
};

void BM_TrainStep(benchmark::State& state, ModelOptions options, int64_t n, int64_t h, int64_t w) {
  at::set_num_threads(g_threads);
  Trainer t(MaskRCNN(options, at::make_generator<at::CPUGeneratorImpl>(7)));
  const Batch batch = synthetic_batch(n, h, w, 4, options.num_classes, 11);
  t.step(batch);  // warm-up: oneDNN primitives, allocator
  for (auto _ : state) t.step(batch);
  state.counters["images_per_s"] = benchmark::Counter(
      static_cast<double>(n) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["peak_rss_mb"] = peak_rss_mb();
  state.counters["threads"] = g_threads;
}

Batch read_batch(const std::string& path) {
  const TensorFile f = read_safetensors(path);
  auto need = [&](const std::string& name) -> const at::Tensor& {
    const auto it = f.tensors.find(name);
    if (it == f.tensors.end()) throw std::runtime_error(path + ": no tensor '" + name + "'");
    return it->second;
  };
  Batch b;
  b.images = need("images");
  b.image_sizes = need("image_sizes");
  b.original_sizes = b.image_sizes.clone();
  b.gt_boxes = need("gt_boxes");
  b.gt_labels = need("gt_labels");
  b.gt_counts = need("gt_counts");
  for (int64_t i = 0; i < b.size(); ++i) {
    const std::string p = "gt_polygons." + std::to_string(i) + ".";
    b.gt_polygons.push_back({need(p + "coords"), need(p + "poly_offsets"), need(p + "instance_offsets")});
    b.image_ids.push_back(i + 1);
  }
  return b;
}

// Median seconds of `fn` over at least `min_reps` calls and `min_seconds` (after one warm-up call).
template <class F>
double median_seconds(F&& fn, int min_reps, double min_seconds) {
  fn();
  std::vector<double> t;
  double total = 0;
  while (static_cast<int>(t.size()) < min_reps || total < min_seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    total += t.back();
  }
  std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
  return t[t.size() / 2];
}

// One shape of the step run alone on the step's device, in the dtype its convolutions and matrix
// products ran in (the run's precision): its rate forward (and, for a convolution, backward: input
// and weight gradients) on random data of the same shape and layout; on a GPU each call waits for
// its kernels.
nlohmann::json roofline_entry(const OpShape& s, const std::string& role, const at::Device& device,
                              at::ScalarType dtype) {
  nlohmann::json e = {{"role", role}, {"shape", s.describe()}, {"dtype", std::string(c10::toString(dtype))},
                      {"stage", s.stage}, {"calls", s.calls},
                      {"step_flops", s.flops}, {"flops_per_call", s.flops_per_call()}};
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const auto wait = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  if (s.kind == OpShape::Kind::kMatmul) {
    const at::Tensor a = at::randn({s.input[0], s.input[1], s.input[2]}, gen).to(device, dtype);
    const at::Tensor b = at::randn({s.weight[0], s.weight[1], s.weight[2]}, gen).to(device, dtype);
    const double sec = s.input[0] == 1 ? median_seconds([&] { at::mm(a[0], b[0]); wait(); }, 5, 0.5)
                                       : median_seconds([&] { at::bmm(a, b); wait(); }, 5, 0.5);
    e["forward_gflops"] = s.flops_per_call() / sec / 1e9;
    return e;
  }
  at::Tensor x = at::randn(s.input, gen).to(device, dtype), w = at::randn(s.weight, gen).to(device, dtype);
  if (s.channels_last) {
    x = x.contiguous(at::MemoryFormat::ChannelsLast);
    w = w.contiguous(at::MemoryFormat::ChannelsLast);
  }
  at::Tensor y;
  const double fwd = median_seconds(
      [&] {
        y = at::convolution(x, w, {}, s.stride, s.padding, s.dilation, s.transposed, {0, 0}, s.groups);
        wait();
      },
      3, 1.0);
  const at::Tensor gy = at::randn_like(y);
  const double bwd = median_seconds(
      [&] {
        at::convolution_backward(gy, x, w, std::nullopt, s.stride, s.padding, s.dilation, s.transposed, {0, 0},
                                 s.groups, {true, true, false});
        wait();
      },
      3, 1.0);
  e["forward_gflops"] = s.flops_per_call() / fwd / 1e9;
  e["backward_gflops"] = 2 * s.flops_per_call() / bwd / 1e9;
  return e;
}

nlohmann::json cells_json(const FlopCounter& counter) {
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& [key, c] : counter.cells())
    cells.push_back({{"stage", key.first}, {"phase", key.second}, {"flops", c.flops}, {"seconds", c.seconds},
                     {"ops", c.ops}});
  return cells;
}

nlohmann::json flop_report(Trainer& t, const Batch& batch, bool roofline_too, Precision precision) {
  const at::Device device = batch.images.device();
  // Under autocast the convolutions and matrix products run in the reduced type.
  const at::ScalarType dtype = precision == Precision::kFloat16    ? at::kHalf
                               : precision == Precision::kBFloat16 ? at::kBFloat16
                                                                   : at::kFloat;
  FlopCounter counter;
  counter.start();
  const double counted_seconds = t.step(batch);
  counter.stop();
  const nlohmann::json cells = cells_json(counter);
  // The roofline: the step's three heaviest 3x3 convolutions, its heaviest 1x1 convolution and
  // its heaviest matrix product, each alone.
  nlohmann::json roofline = nlohmann::json::array();
  int conv3 = 0, conv1 = 0, mm = 0;
  nlohmann::json shapes = nlohmann::json::array();
  for (const OpShape& s : counter.shapes()) {
    shapes.push_back({{"shape", s.describe()}, {"stage", s.stage}, {"calls", s.calls}, {"flops", s.flops}});
    if (!roofline_too) continue;
    const bool is_conv = s.kind == OpShape::Kind::kConvolution && s.weight.size() == 4 && !s.transposed;
    if (is_conv && s.weight[2] == 3 && s.weight[3] == 3 && conv3 < 3) {
      ++conv3;
      roofline.push_back(roofline_entry(s, "conv3x3", device, dtype));
    } else if (is_conv && s.weight[2] == 1 && s.weight[3] == 1 && conv1 < 1) {
      ++conv1;
      roofline.push_back(roofline_entry(s, "conv1x1", device, dtype));
    } else if (s.kind == OpShape::Kind::kMatmul && mm < 1) {
      ++mm;
      roofline.push_back(roofline_entry(s, "gemm", device, dtype));
    }
  }
  return {{"total_flops", counter.total_flops()}, {"counted_step_seconds", counted_seconds},
          {"cells", cells}, {"shapes", shapes}, {"roofline", roofline}, {"threads", at::get_num_threads()}};
}

using Flags = std::map<std::string, std::string>;

// The case's options.json with the command line's precision, channels-last and CUDA graph
// overrides, validated.
ModelOptions run_options_of(const std::string& dir, const Flags& flags) {
  std::ifstream opt_in(dir + "/options.json");
  if (!opt_in) throw std::runtime_error("cannot read " + dir + "/options.json");
  ModelOptions run_options = model_options_from_json(nlohmann::json::parse(opt_in));
  if (flags.count("precision")) run_options.precision = parse_precision(flags.at("precision"));
  if (flags.count("channels_last")) run_options.channels_last = flags.at("channels_last") == "1";
  if (flags.count("cuda_graph_shapes")) run_options.cuda_graph_shapes = std::stoll(flags.at("cuda_graph_shapes"));
  if (run_options.cuda_graph_shapes > 0 && !(flags.count("device") && flags.at("device").starts_with("cuda")))
    throw std::invalid_argument("--mrcnn_cuda_graph_shapes needs --mrcnn_device=cuda");
  run_options.validate();
  return run_options;
}

// --mrcnn_device (default cpu): the model and the batch's tensors moved there, the device made
// current.
at::Device place(MaskRCNN& model, Batch& batch, const Flags& flags) {
  const at::Device device(flags.count("device") ? flags.at("device") : "cpu");
  if (!device.is_cpu()) {
    model->to(device);
    // As the data loader delivers it (data::batch_to): the metadata stays on the host.
    for (at::Tensor* t : {&batch.images, &batch.gt_boxes, &batch.gt_labels}) *t = t->to(device);
  }
#if MRCNN_HAVE_CUDA
  // The current device: torch::cuda::synchronize() and the allocator's statistics follow it.
  if (device.is_cuda()) c10::cuda::set_device(device.index() < 0 ? 0 : device.index());
#endif
  return device;
}

// One step, its FLOPs counted: the step whose samples torchvision's first step can be compared
// with (same weights, same proposals).
nlohmann::json counted_first_step(Trainer& t, const Batch& batch) {
  FlopCounter counter;
  counter.start();
  t.step(batch);
  counter.stop();
  return {{"cells", cells_json(counter)}, {"total_flops", counter.total_flops()}, {"counts", t.counts}};
}

void reset_peak_gpu_memory([[maybe_unused]] const at::Device& device) {
#if MRCNN_HAVE_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
#endif
}

// The caching allocator's peak since reset_peak_gpu_memory; 0 off CUDA.
double peak_gpu_mb([[maybe_unused]] const at::Device& device) {
#if MRCNN_HAVE_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    return static_cast<double>(stats.allocated_bytes[0].peak) / (1024.0 * 1024.0);
  }
#endif
  return 0;
}

// --mrcnn_trace: --mrcnn_trace_steps more steps (default 1) profiled, one after the other, their
// Chrome trace written there; each step is one "mrcnn::train_step" scope.
void write_trace(Trainer& t, const Batch& batch, const at::Device& device, const Flags& flags) {
  using namespace torch::autograd::profiler;
  const bool memory = flags.count("profile_memory") && flags.at("profile_memory") == "1";
  const bool shapes = flags.count("trace_shapes") && flags.at("trace_shapes") == "1";
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO,
                                                     /*report_input_shapes=*/shapes,
                                                     /*profile_memory=*/memory);
  // On a GPU the kernels too: the host's activity alone would show launch times.
  std::set<torch::profiler::impl::ActivityType> activities{torch::profiler::impl::ActivityType::CPU};
  if (device.is_cuda()) activities.insert(torch::profiler::impl::ActivityType::CUDA);
  const int steps = flags.count("trace_steps") ? std::stoi(flags.at("trace_steps")) : 1;
  if (steps < 1) throw std::invalid_argument("--mrcnn_trace_steps must be >= 1, got " + flags.at("trace_steps"));
  prepareProfiler(config, activities);
  enableProfiler(config, activities);
  for (int i = 0; i < steps; ++i) t.step(batch);
  disableProfiler()->save(flags.at("trace"));
}

// --mrcnn_flops: one more step's FLOPs per stage and phase (and the roofline), with the timed
// steps and the first step's count.
void write_flop_report(Trainer& t, const Batch& batch, Precision precision, const std::vector<double>& times,
                       const nlohmann::json& first_step, const Flags& flags) {
  nlohmann::json f = flop_report(t, batch, !flags.count("roofline") || flags.at("roofline") != "0", precision);
  f["step_seconds"] = times;
  f["counts"] = t.counts;  // of the counted step
  f["first_step"] = first_step;
  std::ofstream out(flags.at("flops"));
  out << f.dump(2) << "\n";
  if (!out) throw std::runtime_error("cannot write " + flags.at("flops"));
}

int drive(const Flags& flags) {
  at::set_num_threads(g_threads);
  if (flags.count("cudnn_benchmark")) at::globalContext().setBenchmarkCuDNN(flags.at("cudnn_benchmark") == "1");
  const std::string dir = flags.at("case");
  const ModelOptions run_options = run_options_of(dir, flags);
  MaskRCNN model(run_options, at::make_generator<at::CPUGeneratorImpl>(7));
  load_weights(*model, dir + "/weights.safetensors");
  Batch batch = read_batch(dir + "/batch.safetensors");
  const at::Device device = place(model, batch, flags);
  Trainer t(model, run_options.precision == Precision::kFloat16);
  const double setup_rss = current_rss_mb();
  const int warmup = flags.count("warmup") ? std::stoi(flags.at("warmup")) : 1;
  const int steps = flags.count("steps") ? std::stoi(flags.at("steps")) : 3;
  // With --mrcnn_flops, the first step is counted too (it also warms up).
  const nlohmann::json first_step = flags.count("flops") ? counted_first_step(t, batch) : nlohmann::json();
  for (int i = 0; i < warmup; ++i) t.step(batch);
  reset_peak_gpu_memory(device);
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) times.push_back(t.step(batch));
  const double peak = peak_rss_mb();
  t.syncs.clear();
  t.step(batch, /*count_syncs=*/true);  // one more step, untimed, its syncs counted
  const double peak_gpu = peak_gpu_mb(device);
  if (flags.count("trace")) write_trace(t, batch, device, flags);
  nlohmann::json report = {{"step_seconds", times},
                           {"setup_rss_mb", setup_rss},
                           {"peak_rss_mb", peak},
                           {"threads", at::get_num_threads()},
                           {"images", batch.size()},
                           {"counts", t.counts},
                           {"device", device.str()},
                           {"precision", to_string(run_options.precision)},
                           {"channels_last", run_options.channels_last},
                           {"ops", mrcnn::ops::resolved_implementation(mrcnn::ops::implementation(), device.type())},
                           {"syncs_per_step", t.syncs}};
  if (device.is_cuda()) report["peak_gpu_mb"] = peak_gpu;
  if (flags.count("flops")) write_flop_report(t, batch, run_options.precision, times, first_step, flags);
  if (flags.count("report")) {
    std::ofstream out(flags.at("report"));
    out << report.dump(2) << "\n";
  } else {
    std::printf("%s\n", report.dump(2).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Our flags first (--mrcnn_<name>=<value>); the rest goes to Google Benchmark.
  std::map<std::string, std::string> flags;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--mrcnn_", 0) == 0 && a.find('=') != std::string::npos) {
      flags[a.substr(8, a.find('=') - 8)] = a.substr(a.find('=') + 1);
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (flags.count("threads")) g_threads = std::stoi(flags["threads"]);
  try {
    // As the harness does by default (launch.host_memory): see benchmark/run/host_memory.h.
    const std::string host_memory = flags.count("host_memory") ? flags["host_memory"] : "retain";
    if (!mrcnn::run::apply_host_memory(mrcnn::run::host_memory_from_string(host_memory)))
      std::fprintf(stderr, "bench_model_train_step: host memory \"%s\" not applied (not glibc)\n", host_memory.c_str());
    if (flags.count("ops")) mrcnn::ops::set_implementation(mrcnn::ops::parse_implementation(flags["ops"]));
    if (flags.count("case")) return drive(flags);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_model_train_step: error: %s\n", e.what());
    return 1;
  }
  benchmark::RegisterBenchmark("BM_TrainStep/small", BM_TrainStep, small_options(), 4, 128, 128)
      ->Unit(benchmark::kMillisecond)
      ->MinTime(5.0);
  ModelOptions r50;
  r50.channels_last = true;
  benchmark::RegisterBenchmark("BM_TrainStep/r50_small", BM_TrainStep, r50, 2, 320, 480)
      ->Unit(benchmark::kSecond)
      ->Iterations(2);
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 1;
#ifndef NDEBUG
  std::fprintf(stderr, "WARNING: assertions are enabled (no NDEBUG): timings may be pessimistic\n");
#endif
  if (g_threads < 2) std::fprintf(stderr, "WARNING: one intra-op thread\n");
  std::fprintf(stderr, "mrcnn: %d intra-op threads, LibTorch %s, ops %s\n", g_threads, TORCH_VERSION,
               mrcnn::ops::resolved_implementation(mrcnn::ops::implementation(), c10::DeviceType::CPU).c_str());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
