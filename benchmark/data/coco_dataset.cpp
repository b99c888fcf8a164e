#include "benchmark/data/coco_dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "benchmark/data/coco_layout.h"
#include "benchmark/data/image_codec.h"
#include "benchmark/data/sampler.h"
#include "eval/coco.h"
#include "logging/progress.h"

namespace mrcnn::data {

namespace {

std::string describe_annotation(const std::string& file, const eval::Annotation& a) {
  return file + ": annotation id " + std::to_string(a.id) + " (image id " + std::to_string(a.image_id) + ")";
}

}  // namespace

CocoDatasetOptions CocoDatasetOptions::coco(const std::string& root, const std::string& split, bool train) {
  CocoDatasetOptions o;
  const CocoLayout layout{root};
  o.annotation_file = layout.annotation_file(split).string();
  o.image_dir = layout.image_dir(split).string();
  o.remove_images_without_annotations = train;
  o.transform = train ? TransformOptions::mlperf_train() : TransformOptions::mlperf_eval();
  return o;
}

std::string CocoDatasetStats::summary() const {
  std::ostringstream s;
  s << images_kept << " of " << images_in_file << " images kept";
  if (images_dropped_no_annotations + images_dropped_only_tiny_boxes > 0)
    s << " (dropped: " << images_dropped_no_annotations << " without annotations, "
      << images_dropped_only_tiny_boxes << " with only boxes <= 1 px)";
  s << "; " << instances_kept << " instances; skipped: " << crowd_annotations_dropped << " crowd, "
    << boxes_dropped_empty_after_clip << " empty after clipping, " << polygons_skipped_too_few_points
    << " polygons with < 3 points; " << instances_without_polygon << " instances without a polygon";
  return s.str();
}

CocoDataset::CocoDataset(const CocoDatasetOptions& options)
    : options_(options),
      table_(options.transform.to_bgr255, options.transform.pixel_mean, options.transform.pixel_std) {
  options_.transform.validate();
  const std::string& file = options_.annotation_file;
  eval::Dataset coco = eval::load_dataset(file);

  // Contiguous labels in ascending category id.
  std::vector<size_t> cat_order(coco.categories.size());
  std::iota(cat_order.begin(), cat_order.end(), size_t{0});
  std::sort(cat_order.begin(), cat_order.end(),
            [&](size_t a, size_t b) { return coco.categories[a].id < coco.categories[b].id; });
  std::unordered_map<uint64_t, int64_t> label_of;
  for (size_t k = 0; k < cat_order.size(); ++k) {
    const eval::Category& c = coco.categories[cat_order[k]];
    category_ids_.push_back(c.id);
    category_names_.push_back(c.name);
    label_of[c.id] = static_cast<int64_t>(k) + 1;
  }
  if (category_ids_.empty()) throw std::runtime_error(file + ": no categories");

  std::vector<size_t> image_order(coco.images.size());
  std::iota(image_order.begin(), image_order.end(), size_t{0});
  std::sort(image_order.begin(), image_order.end(),
            [&](size_t a, size_t b) { return coco.images[a].id < coco.images[b].id; });

  stats_.images_in_file = static_cast<int64_t>(coco.images.size());
  const bool plus_one = options_.transform.legacy_plus_one;
  instance_polys_.push_back(0);
  poly_coords_.push_back(0);
  logging::Progress progress("index " + std::filesystem::path(file).filename().string(),
                             static_cast<int64_t>(image_order.size()), "img",
                             options_.progress ? stderr : nullptr);
  int64_t visited = 0;
  for (size_t pos : image_order) {
    if (++visited % 4096 == 0) progress.update(visited);
    const eval::Image& im = coco.images[pos];
    if (im.width <= 0 || im.height <= 0 || im.width > kMaxImageSide || im.height > kMaxImageSide)
      throw std::runtime_error(file + ": image id " + std::to_string(im.id) + " (" + im.file_name +
                               ") has size " + std::to_string(im.width) + "x" + std::to_string(im.height) +
                               ", expected a width and height in 1.." + std::to_string(kMaxImageSide));
    if (im.file_name.empty())
      throw std::runtime_error(file + ": image id " + std::to_string(im.id) + " has no file_name");
    const std::span<const uint32_t> anns = coco.annotations_of_image(im.id);
    for (uint32_t ai : anns) {
      const eval::Annotation& a = coco.annotations[ai];
      for (double v : a.bbox)
        if (!std::isfinite(v))
          throw std::runtime_error(describe_annotation(file, a) + ": bbox has a non-finite value, expected 4 finite numbers");
      if (a.bbox[2] < 0 || a.bbox[3] < 0)
        throw std::runtime_error(describe_annotation(file, a) + ": bbox has a negative width or height");
    }
    if (options_.remove_images_without_annotations) {
      // maskrcnn-benchmark's has_valid_annotation, over every annotation (crowd ones included).
      if (anns.empty()) {
        ++stats_.images_dropped_no_annotations;
        continue;
      }
      const bool only_tiny = std::all_of(anns.begin(), anns.end(), [&](uint32_t ai) {
        const auto& b = coco.annotations[ai].bbox;
        return b[2] <= 1.0 || b[3] <= 1.0;
      });
      if (only_tiny) {
        ++stats_.images_dropped_only_tiny_boxes;
        continue;
      }
    }

    Entry e;
    e.image_id = static_cast<int64_t>(im.id);
    e.file_name = im.file_name;
    e.original = {im.height, im.width};
    e.resized = reference_resize_size(e.original, options_.transform.min_size, options_.transform.max_size);
    e.first_instance = static_cast<int64_t>(labels_.size());
    for (uint32_t ai : anns) {
      const eval::Annotation& a = coco.annotations[ai];
      if (a.iscrowd) {
        ++stats_.crowd_annotations_dropped;
        continue;
      }
      // The reference reads boxes as float32 and converts them there.
      std::array<float, 4> box = coco_box_to_xyxy(
          {static_cast<float>(a.bbox[0]), static_cast<float>(a.bbox[1]), static_cast<float>(a.bbox[2]),
           static_cast<float>(a.bbox[3])},
          plus_one);
      if (!clip_box(box, e.original, plus_one)) {
        ++stats_.boxes_dropped_empty_after_clip;
        continue;
      }
      const auto label = label_of.find(a.category_id);
      if (label == label_of.end())
        throw std::runtime_error(describe_annotation(file, a) + ": category id " +
                                 std::to_string(a.category_id) + " is not among the file's categories");
      const eval::Segmentation& seg = a.segmentation;
      if (seg.kind == eval::Segmentation::Kind::kRle || seg.kind == eval::Segmentation::Kind::kCompressedRle)
        throw std::runtime_error(describe_annotation(file, a) +
                                 ": a non-crowd object with an RLE segmentation; expected polygons");
      int64_t kept = 0;
      for (const std::vector<double>& poly : seg.polygons) {
        if (poly.size() < 6) {
          ++stats_.polygons_skipped_too_few_points;
          continue;
        }
        for (double v : poly)
          if (!std::isfinite(v))
            throw std::runtime_error(describe_annotation(file, a) + ": polygon has a non-finite coordinate");
        coords_.insert(coords_.end(), poly.begin(), poly.end());
        poly_coords_.push_back(static_cast<int64_t>(coords_.size()));
        ++kept;
      }
      if (kept == 0) ++stats_.instances_without_polygon;
      instance_polys_.push_back(static_cast<int64_t>(poly_coords_.size()) - 1);
      boxes_.insert(boxes_.end(), box.begin(), box.end());
      labels_.push_back(label->second);
    }
    e.end_instance = static_cast<int64_t>(labels_.size());
    images_.push_back(std::move(e));
  }
  stats_.images_kept = static_cast<int64_t>(images_.size());
  stats_.instances_kept = static_cast<int64_t>(labels_.size());
  progress.finish(std::to_string(stats_.images_kept) + " kept");
}

void CocoDataset::check_index(int64_t index) const {
  if (index < 0 || index >= size())
    throw std::out_of_range("CocoDataset: index " + std::to_string(index) + " outside [0, " +
                            std::to_string(size()) + ")");
}

ImageSize CocoDataset::original_size(int64_t index) const {
  check_index(index);
  return images_[static_cast<size_t>(index)].original;
}

ImageSize CocoDataset::resized_size(int64_t index) const {
  check_index(index);
  return images_[static_cast<size_t>(index)].resized;
}

int64_t CocoDataset::image_id(int64_t index) const {
  check_index(index);
  return images_[static_cast<size_t>(index)].image_id;
}

std::string CocoDataset::image_path(int64_t index) const {
  check_index(index);
  return (std::filesystem::path(options_.image_dir) / images_[static_cast<size_t>(index)].file_name).string();
}

std::vector<int> CocoDataset::aspect_groups() const {
  std::vector<int> g;
  g.reserve(images_.size());
  for (const Entry& e : images_) g.push_back(aspect_group(e.original));
  return g;
}

InstanceTargets CocoDataset::source_targets(int64_t index) const {
  check_index(index);
  const Entry& e = images_[static_cast<size_t>(index)];
  InstanceTargets t;
  for (int64_t i = e.first_instance; i < e.end_instance; ++i) {
    t.boxes.insert(t.boxes.end(), boxes_.begin() + 4 * i, boxes_.begin() + 4 * i + 4);
    t.labels.push_back(labels_[static_cast<size_t>(i)]);
    for (int64_t j = instance_polys_[static_cast<size_t>(i)]; j < instance_polys_[static_cast<size_t>(i) + 1]; ++j) {
      t.coords.insert(t.coords.end(), coords_.begin() + poly_coords_[static_cast<size_t>(j)],
                      coords_.begin() + poly_coords_[static_cast<size_t>(j) + 1]);
      t.poly_offsets.push_back(static_cast<int64_t>(t.coords.size()));
    }
    t.instance_offsets.push_back(static_cast<int64_t>(t.poly_offsets.size()) - 1);
  }
  return t;
}

SampleTargets CocoDataset::load(int64_t index, const EpochKey& key, float* slot, int64_t slot_h,
                                int64_t slot_w) const {
  check_index(index);
  const Entry& e = images_[static_cast<size_t>(index)];
  const std::string path = image_path(index);
  const std::vector<uint8_t> bytes = read_file(path);
  const ImageHeader header = read_image_header(bytes, path);
  if (header.height != e.original.height || header.width != e.original.width)
    throw std::runtime_error(path + ": image is " + std::to_string(header.width) + "x" +
                             std::to_string(header.height) + " (width x height) but " +
                             options_.annotation_file + " says " + std::to_string(e.original.width) +
                             "x" + std::to_string(e.original.height) + " for image id " +
                             std::to_string(e.image_id));
  const Image img = decode_image(bytes, path,
                                 {e.resized.height, e.resized.width, options_.transform.dct_downscale});
  const bool flip = flip_decision(key.seed, key.epoch, index, options_.transform.flip_probability);
  resize_normalize_into(img, e.resized.height, e.resized.width, flip, table_, slot, slot_h, slot_w);

  SampleTargets s;
  s.image_id = e.image_id;
  s.original = e.original;
  s.resized = e.resized;
  s.flipped = flip;
  s.targets = source_targets(index);
  resize_targets(s.targets, e.original, e.resized);
  if (flip) flip_targets(s.targets, e.resized.width, options_.transform.legacy_plus_one);
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
