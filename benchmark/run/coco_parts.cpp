#include "benchmark/run/coco_parts.h"

#include <ATen/Parallel.h>

#include <chrono>

#include "eval/rle.h"
#include "model/weights.h"

namespace mrcnn::run {

// ---- MaskRcnnModel ------------------------------------------------------------------------------

MaskRcnnModel::MaskRcnnModel(model::MaskRCNN net)
    : net_(std::move(net)), generator_(at::make_generator<at::CPUGeneratorImpl>(0)) {}

std::map<std::string, at::Tensor> MaskRcnnModel::losses(const model::Batch& batch) {
  return net_->forward_train(batch, generator_).losses;
}

std::vector<model::Detections> MaskRcnnModel::detect(const model::Batch& batch) { return net_->inference(batch); }

std::vector<train::NamedParameter> MaskRcnnModel::trainable_parameters() {
  std::vector<train::NamedParameter> out;
  for (const auto& p : net_->named_parameters(/*recurse=*/true))
    if (p.value().requires_grad()) out.push_back({p.key(), p.value()});
  return out;
}

std::map<std::string, at::Tensor> MaskRcnnModel::state_dict() { return model::named_tensors(*net_); }

void MaskRcnnModel::load_state_dict(const std::map<std::string, at::Tensor>& state) {
  model::load_named_tensors(*net_, state, {}, "checkpoint");
}

void MaskRcnnModel::set_training(bool training) { net_->train(training); }

void MaskRcnnModel::set_step_seed(uint64_t seed) { generator_ = at::make_generator<at::CPUGeneratorImpl>(seed); }

// ---- CocoData -----------------------------------------------------------------------------------

namespace {

class LoaderStream final : public BatchStream {
 public:
  explicit LoaderStream(std::unique_ptr<data::Loader> loader) : loader_(std::move(loader)) {}
  std::optional<model::Batch> next() override { return loader_->next(); }

 private:
  std::unique_ptr<data::Loader> loader_;
};

}  // namespace

CocoData::CocoData(std::shared_ptr<const data::CocoDataset> dataset, CocoDataOptions options, int rank,
                   int world_size)
    : dataset_(std::move(dataset)),
      options_(std::move(options)),
      sampler_(dataset_->aspect_groups(), options_.sampler, rank, world_size) {}

std::unique_ptr<BatchStream> CocoData::epoch(int64_t epoch) {
  const int64_t e = epoch - 1;  // MLPerf counts epochs from 1, the sampler from 0
  return std::make_unique<LoaderStream>(std::make_unique<data::Loader>(
      dataset_, sampler_.epoch(options_.seed, e), data::EpochKey{options_.seed, e}, options_.loader));
}

// ---- CocoScorer ---------------------------------------------------------------------------------

void to_coco_results(const model::Detections& d, const data::CocoDataset& labels, bool legacy_plus_one,
                     std::vector<eval::Detection>& out) {
  const int64_t n = d.size();
  if (n == 0) return;
  const at::Tensor boxes = d.boxes.to(at::kCPU, at::kDouble).contiguous();
  const at::Tensor scores = d.scores.to(at::kCPU, at::kDouble).contiguous();
  const at::Tensor lab = d.labels.to(at::kCPU, at::kLong).contiguous();
  const bool with_masks = d.masks.defined() && d.masks.numel() > 0;
  at::Tensor masks;
  if (with_masks) masks = d.masks.to(at::kCPU, at::kByte).contiguous();
  const double plus = legacy_plus_one ? 1.0 : 0.0;
  const size_t base = out.size();
  out.resize(base + static_cast<size_t>(n));
  const auto* b = boxes.data_ptr<double>();
  const auto* s = scores.data_ptr<double>();
  const auto* l = lab.data_ptr<int64_t>();
  const uint32_t h = with_masks ? static_cast<uint32_t>(masks.size(1)) : 0;
  const uint32_t w = with_masks ? static_cast<uint32_t>(masks.size(2)) : 0;
  const uint8_t* m = with_masks ? masks.data_ptr<uint8_t>() : nullptr;
  // Each detection is independent: RLE-encode in parallel, write in place (order preserved).
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const std::array<double, 4> xywh{b[4 * i], b[4 * i + 1], b[4 * i + 2] - b[4 * i] + plus,
                                       b[4 * i + 3] - b[4 * i + 1] + plus};
      eval::Rle rle;
      if (with_masks) rle = eval::encode_row_major(m + static_cast<size_t>(i) * h * w, h, w);
      out[base + static_cast<size_t>(i)] =
          with_masks ? eval::make_detection(static_cast<uint64_t>(d.image_id), labels.category_id_of_label(l[i]), s[i],
                                            xywh, std::move(rle))
                     : eval::Detection{.image_id = static_cast<uint64_t>(d.image_id),
                                       .category_id = labels.category_id_of_label(l[i]),
                                       .score = s[i],
                                       .has_bbox = true,
                                       .bbox = xywh};
    }
  });
}

CocoScorer::CocoScorer(std::shared_ptr<const eval::Dataset> ground_truth,
                       std::shared_ptr<const data::CocoDataset> labels, int eval_threads, bool legacy_plus_one,
                       dist::Communicator& comm)
    : labels_(std::move(labels)),
      legacy_plus_one_(legacy_plus_one),
      comm_(comm),
      evaluator_(std::move(ground_truth),
                 eval::AsyncEvaluatorOptions{.iou_types = {eval::IouType::kBbox, eval::IouType::kSegm},
                                             .eval = {.threads = eval_threads}}) {
  if (comm_.world_size() > 1)
    throw std::runtime_error("COCO scoring across several ranks is not supported yet: run evaluation on one rank");
}

CocoScorer::~CocoScorer() { wait_all(); }

void CocoScorer::add(int64_t, const std::vector<model::Detections>& detections) {
  for (const auto& d : detections) to_coco_results(d, *labels_, legacy_plus_one_, pending_);
}

void CocoScorer::finish_epoch(int64_t epoch, std::function<void(int64_t, std::exception_ptr, const Accuracy&)> done) {
  auto started = std::chrono::steady_clock::now();
  std::future<eval::EpochEval> future = evaluator_.submit(epoch, std::move(pending_));
  pending_.clear();
  std::lock_guard lock(mutex_);
  // Each waiter first joins the previous one, so callbacks run one at a time in epoch order.
  std::shared_ptr<std::thread> previous = waiters_.empty() ? nullptr : waiters_.back();
  auto job = [epoch, started, previous, done = std::move(done), f = std::move(future)]() mutable {
    Accuracy acc;
    std::exception_ptr error;
    try {
      const eval::EpochEval r = f.get();
      acc.bbox = r.bbox_stats()[0];
      acc.segm = r.segm_stats()[0];
      acc.scoring_seconds = r.scoring_seconds;
      acc.finished = std::chrono::steady_clock::now();
      acc.started = acc.finished - std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::duration<double>(r.scoring_seconds));
      if (acc.started < started) acc.started = started;
    } catch (...) {
      error = std::current_exception();
    }
    if (previous) previous->join();
    done(epoch, error, acc);
  };
  waiters_.push_back(std::make_shared<std::thread>(std::move(job)));
}

void CocoScorer::wait_all() {
  std::vector<std::shared_ptr<std::thread>> ts;
  {
    std::lock_guard lock(mutex_);
    ts.swap(waiters_);
  }
  if (!ts.empty()) ts.back()->join();  // each waiter joined the one before it
}

}  // namespace mrcnn::run
