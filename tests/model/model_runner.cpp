// mrcnn_model_runner: runs the network on a batch stored in a safetensors file, for the Python
// checks (torchvision parity). Not a user command.
//
//   mrcnn_model_runner --options OPTIONS.json [--weights W.safetensors [--allow-missing]]
//                      [--batch B.safetensors --out OUT.safetensors [--train --seed S] [--infer]]
//                      [--save-weights W2.safetensors] [--threads N] [--dtype float32|float64]
//
// Batch file: images F32 [N,3,H,W], image_sizes I64 [N,2], original_sizes I64 [N,2], image_ids
// I64 [N]; for training also gt_boxes F32 [N,G,4], gt_labels I64 [N,G], gt_counts I64 [N] and
// per image i gt_polygons.<i>.coords F64, .poly_offsets I64, .instance_offsets I64.
// Output: with --train "loss.<name>" and "count.<name>" scalars (a CPU generator seeded with S
// drives the samplers); with --infer per image i "det.<i>.boxes|scores|labels|masks".
// --save-weights writes the model's weights after loading (its seeded initialization without
// --weights); --allow-missing loads a file that holds only some of them (a pretrained backbone).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>

#include "model/mask_rcnn.h"
#include "model/options_json.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace {

using namespace mrcnn::model;

const at::Tensor& need(const TensorFile& f, const std::string& name, const std::string& path) {
  const auto it = f.tensors.find(name);
  if (it == f.tensors.end()) throw std::runtime_error(path + ": no tensor '" + name + "'");
  return it->second;
}

Batch read_batch(const std::string& path, bool with_targets) {
  const TensorFile f = read_safetensors(path);
  Batch b;
  b.images = need(f, "images", path);
  b.image_sizes = need(f, "image_sizes", path);
  if (f.tensors.count("original_sizes")) b.original_sizes = f.tensors.at("original_sizes");
  if (f.tensors.count("image_ids")) {
    const at::Tensor ids = f.tensors.at("image_ids");
    for (int64_t i = 0; i < ids.numel(); ++i) b.image_ids.push_back(ids[i].item<int64_t>());
  }
  if (!with_targets) return b;
  b.gt_boxes = need(f, "gt_boxes", path);
  b.gt_labels = need(f, "gt_labels", path);
  b.gt_counts = need(f, "gt_counts", path);
  for (int64_t i = 0; i < b.size(); ++i) {
    const std::string p = "gt_polygons." + std::to_string(i) + ".";
    b.gt_polygons.push_back({need(f, p + "coords", path), need(f, p + "poly_offsets", path),
                             need(f, p + "instance_offsets", path)});
  }
  return b;
}

int run(int argc, char** argv) {
  std::map<std::string, std::string> args;
  bool train = false, infer = false, allow_missing = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--train") {
      train = true;
    } else if (a == "--infer") {
      infer = true;
    } else if (a == "--allow-missing") {
      allow_missing = true;
    } else if (a.rfind("--", 0) == 0 && i + 1 < argc) {
      args[a.substr(2)] = argv[++i];
    } else {
      throw std::runtime_error("unexpected argument '" + a + "'");
    }
  }
  if (!args.count("options")) throw std::runtime_error("missing --options");
  if ((train || infer) && (!args.count("batch") || !args.count("out")))
    throw std::runtime_error("--train and --infer need --batch and --out");
  at::set_num_threads(args.count("threads") ? std::stoi(args["threads"]) : 1);

  std::ifstream opt_in(args["options"]);
  if (!opt_in) throw std::runtime_error("cannot read " + args["options"]);
  const ModelOptions options = model_options_from_json(nlohmann::json::parse(opt_in));
  MaskRCNN model(options, at::make_generator<at::CPUGeneratorImpl>(0));
  // The dtype first: loading converts the file's tensors into the model's.
  if (args.count("dtype") && args["dtype"] == "float64") {
    model->to(at::kDouble);
  } else if (args.count("dtype") && args["dtype"] != "float32") {
    throw std::runtime_error("--dtype: expected float32 or float64, got " + args["dtype"]);
  }
  if (args.count("weights")) {
    LoadOptions lo;
    lo.allow_missing = allow_missing;
    load_weights(*model, args["weights"], lo);
  }
  if (args.count("save-weights")) save_weights(*model, args["save-weights"]);

  std::map<std::string, at::Tensor> out;
  if (train) {
    const Batch b = read_batch(args["batch"], /*with_targets=*/true);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(
        std::stoull(args.count("seed") ? args["seed"] : "0"));
    const TrainOutput t = model->forward_train(b, gen);
    for (const auto& [name, l] : t.losses) out["loss." + name] = l.detach();
    for (const auto& [name, c] : t.counts()) out["count." + name] = c;
  }
  if (infer) {
    const Batch b = read_batch(args["batch"], /*with_targets=*/false);
    const auto dets = model->inference(b);
    for (size_t i = 0; i < dets.size(); ++i) {
      const std::string p = "det." + std::to_string(i) + ".";
      out[p + "boxes"] = dets[i].boxes;
      out[p + "scores"] = dets[i].scores;
      out[p + "labels"] = dets[i].labels;
      out[p + "masks"] = dets[i].masks;
    }
  }
  if (train || infer) write_safetensors(args["out"], out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mrcnn_model_runner: error: %s\n", e.what());
    return 1;
  }
}
