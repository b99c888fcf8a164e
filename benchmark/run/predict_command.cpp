#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "benchmark/data/batch.h"
#include "benchmark/data/image_codec.h"
#include "benchmark/data/resample.h"
#include "benchmark/run/assemble.h"
#include "benchmark/run/process_settings.h"
#include "benchmark/run/coco_results.h"
#include "benchmark/run/command_line.h"
#include "benchmark/run/device_backend.h"
#include "benchmark/run/commands.h"
#include "benchmark/run/draw_detections.h"
#include "eval/coco.h"
#include "logging/console.h"

namespace mrcnn::run {
namespace {

namespace fs = std::filesystem;
using config::ConfigError;

constexpr const char* kUsage = R"(usage: mlperf-maskrcnn predict --weights W [options] IMAGE...

Detections of each image (JPEG or PNG), written as a COCO results JSON and as a PNG with the
boxes and masks drawn over the image. Boxes follow the data's box convention exactly as `eval`
scores them.

options:
  --system FILE          network options and transforms (default: systems/cpu-dev.json)
  --set K=V              override a system value (repeatable)
  --data DIR             a COCO-format folder whose categories name the classes (ids and names)
  --out DIR              where to write (default: .): predictions.json, <image>.pred.png
  --score-threshold S    detections drawn and written at or above this score (default 0.5)

exit status: 0 written, 1 an error while reading an image or predicting, 2 bad arguments,
configuration or weights (nothing written)

examples:
  mlperf-maskrcnn predict --weights out/cpu-dev/latest/model.safetensors \
      data/synthetic/val2017/000000000001.jpg --out predictions
  mlperf-maskrcnn predict --system systems/aws-p5.48xlarge.json --weights model.safetensors \
      --data /data/coco2017 --score-threshold 0.7 photo.jpg
)";

struct PredictInputs {
  SystemConfig config;
  std::string weights, out_dir;
  double threshold = 0.5;
  std::vector<std::string> images;
  std::vector<uint64_t> labels;           // the label map
  std::map<uint64_t, std::string> names;  // category names, when --data names them
};

PredictInputs read_inputs(int argc, char** argv) {
  const CommandLine cl(argc, argv, {"--weights", "--data", "--out", "--score-threshold"}, {});
  PredictInputs in{.weights = cl.required("--weights"), .out_dir = cl.value("--out", "."), .images = cl.positional()};
  require_file(in.weights, "weights file");
  if (cl.has("--score-threshold")) {
    const std::string v = cl.value("--score-threshold");
    try {
      in.threshold = std::stod(v);
    } catch (const std::exception&) {
      throw ConfigError("--score-threshold: expected a number, got '" + v + "'");
    }
    if (!(in.threshold >= 0 && in.threshold <= 1)) throw ConfigError("--score-threshold must be in [0, 1]");
  }
  if (in.images.empty()) throw ConfigError("no image given");
  for (const auto& p : in.images)
    require_file(p, "image");
  in.config = cl.system_config();
  in.labels = identity_label_map(in.config.model_section.num_classes);
  if (cl.has("--data")) {
    const auto layout = coco_layout(in.config, cl.value("--data"));
    const auto ds = eval::load_dataset(layout.annotation_file(in.config.data.val_split).string());
    std::vector<uint64_t> ids;
    for (const auto& c : ds.categories) {
      ids.push_back(c.id);
      in.names[c.id] = c.name;
    }
    in.labels = label_map(ids);
    if (static_cast<int64_t>(in.labels.size()) != in.config.model_section.num_classes)
      throw ConfigError(cl.value("--data") + " has " + std::to_string(in.labels.size() - 1) + " categories, the model " +
                        std::to_string(in.config.model_section.num_classes - 1));
  }
  return in;
}

// One image as a batch of one, with the evaluation transform (resize, normalize, pad).
model::Batch image_batch(const SystemConfig& cfg, const data::Image& img, int64_t image_id) {
  const auto& t = cfg.data.transform;
  const data::PixelTable table(t.to_bgr255, t.pixel_mean, t.pixel_std);
  const data::ImageSize size = data::reference_resize_size({img.height, img.width}, t.min_size, t.max_size);
  at::Tensor chw = at::empty({3, size.height, size.width}, at::kFloat);
  data::resize_normalize_into(img, size.height, size.width, false, table, chw.data_ptr<float>(), size.height, size.width);
  data::SampleTargets s;
  s.image_id = image_id;
  s.original = {img.height, img.width};
  s.resized = size;
  return data::collate({chw}, {s}, {.size_divisible = cfg.data.size_divisible});
}

// A COCO result with the image's file name (and the category's name when known).
logging::Json result_json(const eval::Detection& det, const std::string& path, const PredictInputs& in) {
  logging::Json j = to_json(det);
  j["file_name"] = fs::path(path).filename().string();
  if (in.names.contains(det.category_id)) j["category_name"] = in.names.at(det.category_id);
  return j;
}

}  // namespace

int predict_main(int argc, char** argv) {
  if (wants_help(argc, argv)) return std::fputs(kUsage, stdout), 0;
  PredictInputs in;
  try {
    in = read_inputs(argc, argv);
    require_device_backend(in.config);  // before anything is read or written
  } catch (const std::exception& e) {
    return report_error("predict", e, 2);
  }
  try {
    logging::setup_console();
    apply_launch_settings(in.config);
    model::MaskRCNN net = load_network(in.config, in.weights);
    fs::create_directories(in.out_dir);
    logging::Json all = logging::Json::array();
    at::NoGradGuard no_grad;
    for (size_t k = 0; k < in.images.size(); ++k) {
      const std::string& path = in.images[k];
      data::Image img = data::decode_image(data::read_file(path), path);
      const model::Detections d = net->inference(image_batch(in.config, img, static_cast<int64_t>(k + 1))).at(0);
      std::vector<eval::Detection> results;
      to_coco_results(d, in.labels, in.config.data.transform.legacy_plus_one, results);
      for (const auto& det : results)
        if (det.score >= in.threshold) all.push_back(result_json(det, path, in));
      draw(img, d, in.threshold);
      const fs::path png = fs::path(in.out_dir) / (fs::path(path).stem().string() + ".pred.png");
      data::write_file(png.string(), data::encode_png(img));
      logging::info(logging::strprintf("%s: %lld detections >= %.2f -> %s", path.c_str(),
                                       static_cast<long long>((d.scores >= in.threshold).sum().item<int64_t>()),
                                       in.threshold, png.c_str()));
    }
    const fs::path json = fs::path(in.out_dir) / "predictions.json";
    std::ofstream(json) << all.dump(1) << "\n";
    logging::info("COCO results: " + json.string());
    return 0;
  } catch (const std::exception& e) {
    return report_error("predict", e, 1);
  }
}

}  // namespace mrcnn::run
