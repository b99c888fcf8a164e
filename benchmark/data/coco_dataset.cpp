#include "benchmark/data/coco_dataset.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "benchmark/data/coco_layout.h"
#include "benchmark/data/image_codec.h"
#include "benchmark/data/sampler.h"
#include "eval/coco.h"

namespace mrcnn::data {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The index options.source allows, when it is current; otherwise nothing, with why the JSON
// serves in source.note (and an error when options.source is "index").
std::optional<CocoArrays> allowed_index(const CocoDatasetOptions& o, CocoDatasetSource& source) {
  if (o.source != "json" && o.source != "auto" && o.source != "index")
    throw std::invalid_argument("CocoDatasetOptions::source must be auto, json or index, got '" + o.source + "'");
  if (o.source == "json") return std::nullopt;
  if (o.index_file.empty()) throw std::invalid_argument("CocoDatasetOptions: source " + o.source + " without an index_file");
  IndexOpen opened = open_coco_index(o.index_file, o.annotation_file, CocoDataset::index_options(o));
  if (opened.arrays) return std::move(opened.arrays);
  if (o.source == "index") throw std::runtime_error("data.annotation_source is \"index\" but " + opened.reason);
  source.note = opened.reason;
  return std::nullopt;
}

// The arrays options.source asks for, and where they came from; `parse` gives the annotations
// when the JSON serves.
template <typename Parse>
std::pair<CocoArrays, CocoDatasetSource> read_arrays(const CocoDatasetOptions& o, Parse parse) {
  const auto t0 = std::chrono::steady_clock::now();
  CocoDatasetSource source;
  if (std::optional<CocoArrays> mapped = allowed_index(o, source)) {
    source.index = true;
    source.seconds = seconds_since(t0);
    return {std::move(*mapped), source};
  }
  CocoArrays arrays = build_coco_arrays(parse(), CocoDataset::index_options(o), o.annotation_file, o.progress);
  source.seconds = seconds_since(t0);
  return {std::move(arrays), source};
}

}  // namespace

CocoDatasetOptions CocoDatasetOptions::coco(const std::string& root, const std::string& split, bool train) {
  CocoDatasetOptions o;
  const CocoLayout layout{root};
  o.annotation_file = layout.annotation_file(split).string();
  o.image_dir = layout.image_dir(split).string();
  o.index_file = layout.index_file(split).string();
  o.remove_images_without_annotations = train;
  o.transform = train ? TransformOptions::mlperf_train() : TransformOptions::mlperf_eval();
  return o;
}

CocoIndexOptions CocoDataset::index_options(const CocoDatasetOptions& options) {
  return {.remove_images_without_annotations = options.remove_images_without_annotations,
          .legacy_plus_one = options.transform.legacy_plus_one};
}

CocoDataset::CocoDataset(const CocoDatasetOptions& options)
    : CocoDataset(options, read_arrays(options, [&options]() { return eval::load_dataset(options.annotation_file); })) {}

CocoDataset::CocoDataset(const CocoDatasetOptions& options, const eval::Dataset& parsed)
    : CocoDataset(options, read_arrays(options, [&parsed]() -> const eval::Dataset& { return parsed; })) {}

CocoDataset::CocoDataset(const CocoDatasetOptions& options, std::pair<CocoArrays, CocoDatasetSource> read)
    : CocoDataset(options, std::move(read.first), std::move(read.second)) {}

CocoDataset::CocoDataset(const CocoDatasetOptions& options, CocoArrays arrays, CocoDatasetSource source)
    : options_(options),
      table_(options.transform.to_bgr255, options.transform.pixel_mean, options.transform.pixel_std),
      arrays_(std::move(arrays)),
      source_(std::move(source)),
      category_ids_(arrays_.category_ids.begin(), arrays_.category_ids.end()) {
  options_.transform.validate();
  if (!(arrays_.options == index_options(options_)))
    throw std::invalid_argument("CocoDataset: arrays built with other settings than the dataset options'");
  resized_.reserve(arrays_.images.size());
  for (const CocoImageRecord& r : arrays_.images)
    resized_.push_back(reference_resize_size({r.height, r.width}, options_.transform.min_size, options_.transform.max_size));
}

void CocoDataset::check_index(int64_t index) const {
  if (index < 0 || index >= size())
    throw std::out_of_range("CocoDataset: index " + std::to_string(index) + " outside [0, " +
                            std::to_string(size()) + ")");
}

ImageSize CocoDataset::original_size(int64_t index) const {
  check_index(index);
  return {record(index).height, record(index).width};
}

ImageSize CocoDataset::resized_size(int64_t index) const {
  check_index(index);
  return resized_[static_cast<size_t>(index)];
}

int64_t CocoDataset::image_id(int64_t index) const {
  check_index(index);
  return record(index).image_id;
}

std::string CocoDataset::image_path(int64_t index) const {
  check_index(index);
  return (std::filesystem::path(options_.image_dir) / arrays_.file_name(record(index))).string();
}

std::vector<int> CocoDataset::aspect_groups() const {
  std::vector<int> g;
  g.reserve(arrays_.images.size());
  for (const CocoImageRecord& r : arrays_.images) g.push_back(aspect_group({r.height, r.width}));
  return g;
}

InstanceTargets CocoDataset::source_targets(int64_t index) const {
  check_index(index);
  const CocoImageRecord& r = record(index);
  const CocoArrays& a = arrays_;
  InstanceTargets t;
  for (int64_t i = r.first_instance; i < r.end_instance; ++i) {
    const auto u = static_cast<size_t>(i);
    t.boxes.insert(t.boxes.end(), a.boxes.begin() + 4 * i, a.boxes.begin() + 4 * i + 4);
    t.labels.push_back(a.labels[u]);
    for (int64_t j = a.instance_polys[u]; j < a.instance_polys[u + 1]; ++j) {
      const auto v = static_cast<size_t>(j);
      for (int64_t k = a.poly_coords[v]; k < a.poly_coords[v + 1]; ++k) t.coords.push_back(a.coord(k));
      t.poly_offsets.push_back(static_cast<int64_t>(t.coords.size()));
    }
    t.instance_offsets.push_back(static_cast<int64_t>(t.poly_offsets.size()) - 1);
  }
  return t;
}

SampleTargets CocoDataset::load(int64_t index, const EpochKey& key, float* slot, int64_t slot_h,
                                int64_t slot_w) const {
  check_index(index);
  const CocoImageRecord& r = record(index);
  const ImageSize original{r.height, r.width};
  const ImageSize resized = resized_[static_cast<size_t>(index)];
  const std::string path = image_path(index);
  const std::vector<uint8_t> bytes = read_file(path);
  const ImageHeader header = read_image_header(bytes, path);
  if (header.height != original.height || header.width != original.width)
    throw std::runtime_error(path + ": image is " + std::to_string(header.width) + "x" +
                             std::to_string(header.height) + " (width x height) but " +
                             options_.annotation_file + " says " + std::to_string(original.width) +
                             "x" + std::to_string(original.height) + " for image id " +
                             std::to_string(r.image_id));
  const Image img = decode_image(bytes, path, {resized.height, resized.width, options_.transform.dct_downscale});
  const bool flip = flip_decision(key.seed, key.epoch, index, options_.transform.flip_probability);
  resize_normalize_into(img, resized.height, resized.width, flip, table_, slot, slot_h, slot_w);

  SampleTargets s;
  s.image_id = r.image_id;
  s.original = original;
  s.resized = resized;
  s.flipped = flip;
  s.targets = source_targets(index);
  resize_targets(s.targets, original, resized);
  if (flip) flip_targets(s.targets, resized.width, options_.transform.legacy_plus_one);
  return s;
}

uint64_t CocoDataset::category_id_of_label(int64_t label) const {
  if (label < 1 || label >= num_classes())
    throw std::out_of_range("CocoDataset: label " + std::to_string(label) + " outside [1, " +
                            std::to_string(num_classes()) + ")");
  return category_ids_[static_cast<size_t>(label - 1)];
}

int64_t CocoDataset::label_of_category_id(uint64_t id) const {
  const auto it = std::lower_bound(category_ids_.begin(), category_ids_.end(), id);
  if (it == category_ids_.end() || *it != id)
    throw std::out_of_range("CocoDataset: category id " + std::to_string(id) + " is not in the dataset");
  return static_cast<int64_t>(it - category_ids_.begin()) + 1;
}

}  // namespace mrcnn::data
