#include "benchmark/run/coco_parts.h"

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "model/coco_results.h"
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

std::vector<uint64_t> label_to_category(const data::CocoDataset& dataset) {
  std::vector<uint64_t> map{0};  // label 0 is the background
  map.insert(map.end(), dataset.category_ids().begin(), dataset.category_ids().end());
  return map;
}

void to_coco_results(const model::Detections& d, const std::vector<uint64_t>& label_map, bool legacy_plus_one,
                     std::vector<eval::Detection>& out) {
  std::vector<eval::Detection> dets = model::to_coco_detections(d, label_map);
  if (legacy_plus_one)  // the reference's inclusive pixel boxes: width = x2 - x1 + 1
    for (auto& det : dets) {
      det.bbox[2] += 1;
      det.bbox[3] += 1;
    }
  out.insert(out.end(), std::make_move_iterator(dets.begin()), std::make_move_iterator(dets.end()));
}

namespace {

template <typename T>
void put(std::string& out, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  template <typename T>
  T get() {
    T v;
    need(sizeof v);
    std::memcpy(&v, b_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::string bytes(size_t n) {
    need(n);
    std::string s(b_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  // A count of elements of `size` bytes each that must still fit in the buffer.
  uint64_t count(size_t size) {
    const auto n = get<uint64_t>();
    if (size > 0 && n > (b_.size() - pos_) / size) fail();
    return n;
  }
  bool done() const { return pos_ == b_.size(); }

 private:
  void need(size_t n) {
    if (n > b_.size() - pos_) fail();
  }
  [[noreturn]] void fail() const {
    throw std::runtime_error("gathered detections: truncated record at byte " + std::to_string(pos_) + " of " +
                             std::to_string(b_.size()));
  }
  std::string_view b_;
  size_t pos_ = 0;
};

}  // namespace

std::string encode_detections(const std::vector<eval::Detection>& dets) {
  using Kind = eval::Segmentation::Kind;
  std::string out;
  put<uint64_t>(out, dets.size());
  for (const auto& d : dets) {
    put(out, d.image_id);
    put(out, d.category_id);
    put(out, d.score);
    put<uint8_t>(out, d.has_bbox ? 1 : 0);
    for (double v : d.bbox) put(out, v);
    const auto& s = d.segmentation;
    put<uint8_t>(out, static_cast<uint8_t>(s.kind));
    switch (s.kind) {
      case Kind::kNone: break;
      case Kind::kPolygons:
        put<uint64_t>(out, s.polygons.size());
        for (const auto& poly : s.polygons) {
          put<uint64_t>(out, poly.size());
          out.append(reinterpret_cast<const char*>(poly.data()), poly.size() * sizeof(double));
        }
        break;
      case Kind::kRle:
        put(out, s.height);
        put(out, s.width);
        put<uint64_t>(out, s.counts.size());
        out.append(reinterpret_cast<const char*>(s.counts.data()), s.counts.size() * sizeof(uint32_t));
        break;
      case Kind::kCompressedRle:
        put(out, s.height);
        put(out, s.width);
        put<uint64_t>(out, s.compressed.size());
        out.append(s.compressed);
        break;
    }
  }
  return out;
}

void decode_detections(std::string_view bytes, std::vector<eval::Detection>& out) {
  using Kind = eval::Segmentation::Kind;
  Reader r(bytes);
  const uint64_t n = r.count(8 + 8 + 8 + 1 + 32 + 1);
  out.reserve(out.size() + n);
  for (uint64_t i = 0; i < n; ++i) {
    eval::Detection d;
    d.image_id = r.get<uint64_t>();
    d.category_id = r.get<uint64_t>();
    d.score = r.get<double>();
    d.has_bbox = r.get<uint8_t>() != 0;
    for (double& v : d.bbox) v = r.get<double>();
    auto& s = d.segmentation;
    const auto kind = r.get<uint8_t>();
    if (kind > static_cast<uint8_t>(Kind::kCompressedRle))
      throw std::runtime_error("gathered detections: unknown segmentation kind " + std::to_string(kind));
    s.kind = static_cast<Kind>(kind);
    switch (s.kind) {
      case Kind::kNone: break;
      case Kind::kPolygons: {
        s.polygons.resize(r.count(8));
        for (auto& poly : s.polygons) {
          poly.resize(r.count(sizeof(double)));
          for (double& v : poly) v = r.get<double>();
        }
        break;
      }
      case Kind::kRle: {
        s.height = r.get<uint32_t>();
        s.width = r.get<uint32_t>();
        s.counts.resize(r.count(sizeof(uint32_t)));
        for (uint32_t& c : s.counts) c = r.get<uint32_t>();
        break;
      }
      case Kind::kCompressedRle: {
        s.height = r.get<uint32_t>();
        s.width = r.get<uint32_t>();
        s.compressed = r.bytes(r.count(1));
        break;
      }
    }
    out.push_back(std::move(d));
  }
  if (!r.done()) throw std::runtime_error("gathered detections: trailing bytes after the last record");
}

CocoScorer::CocoScorer(std::shared_ptr<const eval::Dataset> ground_truth,
                       std::shared_ptr<const data::CocoDataset> labels, int eval_threads, bool legacy_plus_one,
                       dist::Communicator& comm)
    : label_map_(label_to_category(*labels)),
      legacy_plus_one_(legacy_plus_one),
      comm_(comm),
      evaluator_(std::move(ground_truth),
                 eval::AsyncEvaluatorOptions{.iou_types = {eval::IouType::kBbox, eval::IouType::kSegm},
                                             .eval = {.threads = eval_threads}}) {
}

CocoScorer::~CocoScorer() { wait_all(); }

void CocoScorer::add(int64_t, const std::vector<model::Detections>& detections) {
  for (const auto& d : detections) to_coco_results(d, label_map_, legacy_plus_one_, pending_);
}

void CocoScorer::finish_epoch(int64_t epoch, std::function<void(int64_t, std::exception_ptr, const Accuracy&)> done) {
  auto started = std::chrono::steady_clock::now();
  if (comm_.world_size() > 1) {
    // Rank order; within an image the model's order is kept, which is all COCOeval depends on.
    const std::vector<std::string> all = comm_.gather_bytes(encode_detections(pending_), 0);
    pending_.clear();
    if (!comm_.is_main()) return;
    for (const auto& bytes : all) decode_detections(bytes, pending_);
  }
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
