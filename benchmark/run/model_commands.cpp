#include "benchmark/run/model_commands.h"

#include <ATen/Parallel.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "benchmark/data/batch.h"
#include "benchmark/data/image_codec.h"
#include "benchmark/data/resample.h"
#include "benchmark/run/coco_parts.h"
#include "benchmark/run/system_config.h"
#include "benchmark/train/checkpoint.h"
#include "eval/coco.h"
#include "eval/coco_eval.h"
#include "eval/rle.h"
#include "logging/console.h"
#include "logging/progress.h"
#include "model/coco_results.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace mrcnn::run {
namespace {

namespace fs = std::filesystem;

struct CommonArgs {
  std::string weights;
  std::string system = "systems/cpu-dev.json";
  std::vector<std::string> overrides;
  std::string data;
  std::vector<std::string> rest;  // command-specific arguments, in order
};

// Splits the shared options from the command's own; throws ConfigError on a missing value.
CommonArgs parse_common(int argc, char** argv, const std::vector<std::string>& own_with_value) {
  CommonArgs a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw ConfigError(s + " needs a value");
      return argv[++i];
    };
    if (s == "--weights") a.weights = value();
    else if (s == "--system") a.system = value();
    else if (s == "--set") a.overrides.push_back(value());
    else if (s == "--data") a.data = value();
    else if (std::find(own_with_value.begin(), own_with_value.end(), s) != own_with_value.end()) {
      a.rest.push_back(s);
      a.rest.push_back(value());
    } else a.rest.push_back(s);
  }
  if (a.weights.empty()) throw ConfigError("--weights is required");
  if (!fs::is_regular_file(a.weights)) throw ConfigError("weights file " + a.weights + " does not exist");
  return a;
}

// The network of the system file with the weights of `path` (a weights file or a checkpoint).
model::MaskRCNN load_network(const SystemConfig& cfg, const std::string& path) {
  model::MaskRCNN net(cfg.model);
  const model::TensorFile f = model::read_safetensors(path);
  if (f.metadata.contains("checksum_fnv1a64")) {  // a training checkpoint
    const train::Checkpoint ck = train::load_checkpoint(path);
    model::load_named_tensors(*net, ck.model, {}, path);
  } else {
    model::load_named_tensors(*net, f.tensors, {}, path);
  }
  net->to(at::Device(cfg.run.device));
  net->eval();
  return net;
}

int fail(const char* cmd, const std::exception& e, int status) {
  std::fprintf(stderr, "mlperf-maskrcnn %s: error: %s\n", cmd, logging::error_text(e).c_str());
  return status;
}

constexpr const char* kEvalUsage = R"(usage: mlperf-maskrcnn eval --weights W --data DIR [options]

COCO box and mask AP of the weights W on the validation split of the COCO-format folder DIR.

options:
  --system FILE   network options and transforms (default: systems/cpu-dev.json)
  --set K=V       override a system value (repeatable)
  --split NAME    the split to evaluate (default: the system's data.val_split)
  --json OUT      also write the 12 bbox and 12 segm stats as JSON
)";

constexpr const char* kPredictUsage = R"(usage: mlperf-maskrcnn predict --weights W [options] IMAGE...

Detections of each image (JPEG or PNG), written as a COCO results JSON and as a PNG with the
boxes and masks drawn over the image.

options:
  --system FILE          network options and transforms (default: systems/cpu-dev.json)
  --set K=V              override a system value (repeatable)
  --data DIR             a COCO-format folder whose categories name the classes (ids and names)
  --out DIR              where to write (default: .): predictions.json, <image>.pred.png
  --score-threshold S    detections drawn and written at or above this score (default 0.5)
)";

}  // namespace

int eval_main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") return std::fputs(kEvalUsage, stdout), 0;
  CommonArgs a;
  SystemConfig cfg;
  std::string split, json_out;
  try {
    a = parse_common(argc, argv, {"--split", "--json"});
    for (size_t i = 0; i < a.rest.size(); ++i) {
      if (a.rest[i] == "--split") split = a.rest[++i];
      else if (a.rest[i] == "--json") json_out = a.rest[++i];
      else throw ConfigError("unknown argument '" + a.rest[i] + "' (see --help)");
    }
    if (a.data.empty()) throw ConfigError("--data is required");
    cfg = load_system_config(a.system, a.overrides);
    if (split.empty()) split = cfg.data.val_split;
    const fs::path ann = fs::path(a.data) / "annotations" / ("instances_" + split + ".json");
    if (!fs::is_regular_file(ann)) throw ConfigError("annotation file " + ann.string() + " does not exist");
  } catch (const std::exception& e) {
    return fail("eval", e, 2);
  }
  try {
    logging::setup_console();
    at::set_num_threads(static_cast<int>(cfg.launch.threads_per_rank));
    model::MaskRCNN net = load_network(cfg, a.weights);
    auto o = data::CocoDatasetOptions::coco(a.data, split, /*train=*/false);
    o.transform = cfg.data.transform;
    o.transform.flip_probability = 0.0;
    auto dataset = std::make_shared<const data::CocoDataset>(o);
    CocoData val(dataset,
                 {.sampler = {.batch_size = cfg.run.eval_images_per_batch, .shuffle = false,
                              .last_batch = data::LastBatch::kKeep},
                  .loader = {.num_threads = static_cast<int>(cfg.data.loader_threads),
                             .device = at::Device(cfg.run.device), .size_divisible = cfg.data.size_divisible}},
                 0, 1);
    const auto labels = label_to_category(*dataset);
    std::vector<eval::Detection> results;
    {
      at::NoGradGuard no_grad;
      logging::Progress bar("eval " + split, dataset->size(), "img");
      auto stream = val.epoch(1);
      int64_t done = 0;
      while (auto batch = stream->next()) {
        for (const auto& d : net->inference(*batch)) to_coco_results(d, labels, cfg.data.transform.legacy_plus_one, results);
        done += batch->size();
        bar.update(done);
      }
      bar.finish(std::to_string(results.size()) + " detections");
    }
    const auto gt = std::make_shared<const eval::Dataset>(
        eval::load_dataset((fs::path(a.data) / "annotations" / ("instances_" + split + ".json")).string()));
    eval::CocoEvaluator evaluator(gt, {.threads = static_cast<int>(cfg.run.eval_threads)});
    const std::vector<eval::IouType> types{eval::IouType::kBbox, eval::IouType::kSegm};
    const auto res = evaluator.evaluate(results, types);
    logging::Json out = logging::Json::object();
    for (const auto& r : res) {
      std::printf("IoU metric: %s\n%s", eval::to_string(r.iou_type), r.summary().c_str());
      out[eval::to_string(r.iou_type)] = r.stats;
    }
    if (!json_out.empty()) {
      std::ofstream f(json_out);
      f << out.dump(2) << "\n";
      if (!f) throw std::runtime_error("cannot write " + json_out);
    }
    return 0;
  } catch (const std::exception& e) {
    return fail("eval", e, 1);
  }
}

namespace {

// A distinct, saturated colour per label.
std::array<uint8_t, 3> label_colour(int64_t label) {
  static constexpr std::array<std::array<uint8_t, 3>, 10> kPalette{{{230, 25, 75}, {60, 180, 75}, {255, 225, 25},
                                                                   {0, 130, 200}, {245, 130, 48}, {145, 30, 180},
                                                                   {70, 240, 240}, {240, 50, 230}, {210, 245, 60},
                                                                   {250, 190, 212}}};
  return kPalette[static_cast<size_t>(label) % kPalette.size()];
}

// Masks blended at 45% and box outlines (2 px) over `img`, in place.
void draw(data::Image& img, const model::Detections& d, double threshold) {
  const int64_t h = img.height, w = img.width;
  for (int64_t i = 0; i < d.size(); ++i) {
    if (d.scores[i].item<double>() < threshold) continue;
    const auto c = label_colour(d.labels[i].item<int64_t>());
    if (d.masks.defined()) {
      const at::Tensor m = d.masks[i].contiguous();
      const uint8_t* mp = m.data_ptr<uint8_t>();
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          if (mp[y * w + x]) {
            uint8_t* px = img.row(y) + 3 * x;
            for (int k = 0; k < 3; ++k) px[k] = static_cast<uint8_t>(0.55 * px[k] + 0.45 * c[k]);
          }
    }
    const at::Tensor b = d.boxes[i].to(at::kCPU, at::kDouble);
    const auto x1 = std::clamp<int64_t>(static_cast<int64_t>(b[0].item<double>()), 0, w - 1);
    const auto y1 = std::clamp<int64_t>(static_cast<int64_t>(b[1].item<double>()), 0, h - 1);
    const auto x2 = std::clamp<int64_t>(static_cast<int64_t>(b[2].item<double>()), 0, w - 1);
    const auto y2 = std::clamp<int64_t>(static_cast<int64_t>(b[3].item<double>()), 0, h - 1);
    auto put = [&](int64_t x, int64_t y) {
      if (x < 0 || y < 0 || x >= w || y >= h) return;
      uint8_t* px = img.row(y) + 3 * x;
      px[0] = c[0], px[1] = c[1], px[2] = c[2];
    };
    for (int t = 0; t < 2; ++t) {
      for (int64_t x = x1; x <= x2; ++x) put(x, y1 + t), put(x, y2 - t);
      for (int64_t y = y1; y <= y2; ++y) put(x1 + t, y), put(x2 - t, y);
    }
  }
}

}  // namespace

int predict_main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") return std::fputs(kPredictUsage, stdout), 0;
  CommonArgs a;
  SystemConfig cfg;
  std::string out_dir = ".";
  double threshold = 0.5;
  std::vector<std::string> images;
  std::vector<uint64_t> labels;
  std::map<uint64_t, std::string> names;
  try {
    a = parse_common(argc, argv, {"--out", "--score-threshold"});
    for (size_t i = 0; i < a.rest.size(); ++i) {
      if (a.rest[i] == "--out") out_dir = a.rest[++i];
      else if (a.rest[i] == "--score-threshold") {
        const std::string v = a.rest[++i];
        try {
          threshold = std::stod(v);
        } catch (const std::exception&) {
          throw ConfigError("--score-threshold: expected a number, got '" + v + "'");
        }
        if (!(threshold >= 0 && threshold <= 1)) throw ConfigError("--score-threshold must be in [0, 1]");
      } else if (a.rest[i].starts_with("--")) throw ConfigError("unknown argument '" + a.rest[i] + "' (see --help)");
      else images.push_back(a.rest[i]);
    }
    if (images.empty()) throw ConfigError("no image given");
    for (const auto& p : images)
      if (!fs::is_regular_file(p)) throw ConfigError("image " + p + " does not exist");
    cfg = load_system_config(a.system, a.overrides);
    labels.push_back(0);
    if (!a.data.empty()) {
      const auto ds = eval::load_dataset((fs::path(a.data) / "annotations" / ("instances_" + cfg.data.val_split + ".json")).string());
      std::vector<uint64_t> ids;
      for (const auto& c : ds.categories) {
        ids.push_back(c.id);
        names[c.id] = c.name;
      }
      std::sort(ids.begin(), ids.end());
      labels.insert(labels.end(), ids.begin(), ids.end());
      if (static_cast<int64_t>(labels.size()) != cfg.model.num_classes)
        throw ConfigError(a.data + " has " + std::to_string(labels.size() - 1) + " categories, the model " +
                          std::to_string(cfg.model.num_classes - 1));
    } else {
      for (int64_t l = 1; l < cfg.model.num_classes; ++l) labels.push_back(static_cast<uint64_t>(l));
    }
  } catch (const std::exception& e) {
    return fail("predict", e, 2);
  }
  try {
    logging::setup_console();
    at::set_num_threads(static_cast<int>(cfg.launch.threads_per_rank));
    model::MaskRCNN net = load_network(cfg, a.weights);
    const auto& t = cfg.data.transform;
    const data::PixelTable table(t.to_bgr255, t.pixel_mean, t.pixel_std);
    fs::create_directories(out_dir);
    logging::Json all = logging::Json::array();
    at::NoGradGuard no_grad;
    for (size_t k = 0; k < images.size(); ++k) {
      const std::string& path = images[k];
      data::Image img = data::decode_image(data::read_file(path), path);
      const data::ImageSize size = data::reference_resize_size({img.height, img.width}, t.min_size, t.max_size);
      at::Tensor chw = at::empty({3, size.height, size.width}, at::kFloat);
      data::resize_normalize_into(img, size.height, size.width, false, table, chw.data_ptr<float>(), size.height,
                                  size.width);
      data::SampleTargets s;
      s.image_id = static_cast<int64_t>(k + 1);
      s.original = {img.height, img.width};
      s.resized = size;
      model::Batch batch = data::collate({chw}, {s}, {.size_divisible = cfg.data.size_divisible});
      const model::Detections d = net->inference(batch).at(0);
      for (auto& det : model::to_coco_detections(d, labels)) {
        if (det.score < threshold) continue;
        logging::Json j{{"image_id", k + 1}, {"file_name", fs::path(path).filename().string()},
                        {"category_id", det.category_id}, {"score", det.score},
                        {"bbox", {det.bbox[0], det.bbox[1], det.bbox[2], det.bbox[3]}}};
        if (names.contains(det.category_id)) j["category_name"] = names[det.category_id];
        const auto& seg = det.segmentation;
        if (seg.kind == eval::Segmentation::Kind::kCompressedRle)
          j["segmentation"] = {{"size", {seg.height, seg.width}}, {"counts", seg.compressed}};
        else if (seg.kind == eval::Segmentation::Kind::kRle)
          j["segmentation"] = {{"size", {seg.height, seg.width}},
                               {"counts", eval::to_string(eval::from_counts(seg.counts, seg.height, seg.width))}};
        all.push_back(j);
      }
      draw(img, d, threshold);
      const fs::path png = fs::path(out_dir) / (fs::path(path).stem().string() + ".pred.png");
      data::write_file(png.string(), data::encode_png(img));
      logging::info(logging::strprintf("%s: %lld detections >= %.2f -> %s", path.c_str(),
                                       static_cast<long long>((d.scores >= threshold).sum().item<int64_t>()),
                                       threshold, png.c_str()));
    }
    const fs::path json = fs::path(out_dir) / "predictions.json";
    std::ofstream(json) << all.dump(1) << "\n";
    logging::info("COCO results: " + json.string());
    return 0;
  } catch (const std::exception& e) {
    return fail("predict", e, 1);
  }
}

}  // namespace mrcnn::run
