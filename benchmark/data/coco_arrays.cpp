#include "benchmark/data/coco_arrays.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "benchmark/data/image_codec.h"
#include "benchmark/data/transforms.h"
#include "eval/coco.h"
#include "logging/progress.h"

namespace mrcnn::data {

namespace {

struct OwnedArrays {
  std::vector<CocoImageRecord> images;
  std::vector<float> boxes;
  std::vector<int64_t> labels;
  std::vector<int64_t> instance_polys{0};
  std::vector<int64_t> poly_coords{0};
  std::vector<int32_t> coords_centi;
  std::vector<double> coords;
  std::vector<uint64_t> category_ids;
  std::vector<char> file_names;
};

std::string describe_annotation(const std::string& file, const eval::Annotation& a) {
  return file + ": annotation id " + std::to_string(a.id) + " (image id " + std::to_string(a.image_id) + ")";
}

// Hundredths that give back every coordinate's exact bits, or nothing.
std::optional<std::vector<int32_t>> as_hundredths(const std::vector<double>& coords) {
  std::vector<int32_t> centi(coords.size());
  for (size_t k = 0; k < coords.size(); ++k) {
    const double scaled = std::round(coords[k] * 100.0);
    if (!(std::fabs(scaled) < 2147483647.0)) return std::nullopt;
    const auto q = static_cast<int32_t>(scaled);
    if (std::bit_cast<uint64_t>(static_cast<double>(q) / 100.0) != std::bit_cast<uint64_t>(coords[k])) return std::nullopt;
    centi[k] = q;
  }
  return centi;
}

void check_image(const std::string& file, const eval::Image& im) {
  if (im.width <= 0 || im.height <= 0 || im.width > kMaxImageSide || im.height > kMaxImageSide)
    throw std::runtime_error(file + ": image id " + std::to_string(im.id) + " (" + im.file_name + ") has size " +
                             std::to_string(im.width) + "x" + std::to_string(im.height) +
                             ", expected a width and height in 1.." + std::to_string(kMaxImageSide));
  if (im.file_name.empty()) throw std::runtime_error(file + ": image id " + std::to_string(im.id) + " has no file_name");
}

void check_boxes(const std::string& file, const eval::Dataset& coco, std::span<const uint32_t> anns) {
  for (uint32_t ai : anns) {
    const eval::Annotation& a = coco.annotations[ai];
    for (double v : a.bbox)
      if (!std::isfinite(v))
        throw std::runtime_error(describe_annotation(file, a) + ": bbox has a non-finite value, expected 4 finite numbers");
    if (a.bbox[2] < 0 || a.bbox[3] < 0)
      throw std::runtime_error(describe_annotation(file, a) + ": bbox has a negative width or height");
  }
}

// maskrcnn-benchmark's has_valid_annotation, over every annotation (crowd ones included).
bool keep_for_training(const eval::Dataset& coco, std::span<const uint32_t> anns, CocoDatasetStats& stats) {
  if (anns.empty()) {
    ++stats.images_dropped_no_annotations;
    return false;
  }
  const bool only_tiny = std::all_of(anns.begin(), anns.end(), [&](uint32_t ai) {
    const auto& b = coco.annotations[ai].bbox;
    return b[2] <= 1.0 || b[3] <= 1.0;
  });
  if (only_tiny) ++stats.images_dropped_only_tiny_boxes;
  return !only_tiny;
}

// Appends one non-crowd annotation's instance (box, label, polygons), unless clipping empties it.
void add_instance(const std::string& file, const eval::Annotation& a, const CocoImageRecord& img, int64_t label,
                  bool plus_one, OwnedArrays& o, CocoDatasetStats& stats) {
  // The reference reads boxes as float32 and converts them there.
  std::array<float, 4> box = coco_box_to_xyxy({static_cast<float>(a.bbox[0]), static_cast<float>(a.bbox[1]),
                                                static_cast<float>(a.bbox[2]), static_cast<float>(a.bbox[3])},
                                               plus_one);
  if (!clip_box(box, {img.height, img.width}, plus_one)) {
    ++stats.boxes_dropped_empty_after_clip;
    return;
  }
  const eval::Segmentation& seg = a.segmentation;
  if (seg.kind == eval::Segmentation::Kind::kRle || seg.kind == eval::Segmentation::Kind::kCompressedRle)
    throw std::runtime_error(describe_annotation(file, a) + ": a non-crowd object with an RLE segmentation; expected polygons");
  int64_t kept = 0;
  for (const std::vector<double>& poly : seg.polygons) {
    if (poly.size() < 6) {
      ++stats.polygons_skipped_too_few_points;
      continue;
    }
    for (double v : poly)
      if (!std::isfinite(v)) throw std::runtime_error(describe_annotation(file, a) + ": polygon has a non-finite coordinate");
    o.coords.insert(o.coords.end(), poly.begin(), poly.end());
    o.poly_coords.push_back(static_cast<int64_t>(o.coords.size()));
    ++kept;
  }
  if (kept == 0) ++stats.instances_without_polygon;
  o.instance_polys.push_back(static_cast<int64_t>(o.poly_coords.size()) - 1);
  o.boxes.insert(o.boxes.end(), box.begin(), box.end());
  o.labels.push_back(label);
}

// The year in a COCO file or split name ("instances_train2017.json": 2017), or 0.
int64_t year_in_name(const std::string& file) {
  const std::string name = std::filesystem::path(file).filename().string();
  for (size_t k = 0; k + 4 <= name.size(); ++k)
    if (name.compare(k, 2, "20") == 0 && std::all_of(name.begin() + static_cast<std::ptrdiff_t>(k),
                                                     name.begin() + static_cast<std::ptrdiff_t>(k + 4),
                                                     [](char ch) { return ch >= '0' && ch <= '9'; }))
      return std::stoll(name.substr(k, 4));
  return 0;
}

CocoArrays view_of(std::shared_ptr<const OwnedArrays> o) {
  CocoArrays a;
  a.images = o->images;
  a.boxes = o->boxes;
  a.labels = o->labels;
  a.instance_polys = o->instance_polys;
  a.poly_coords = o->poly_coords;
  a.coords_centi = o->coords_centi;
  a.coords = o->coords;
  a.category_ids = o->category_ids;
  a.file_names = o->file_names;
  a.owner = std::move(o);
  return a;
}

}  // namespace

void check_instances_file(const eval::Dataset& coco, const std::string& file) {
  if (coco.has_keypoints)
    throw std::runtime_error(file + ": a person-keypoints annotation file (its annotations have \"keypoints\"); "
                             "expected an instances file (boxes and masks of every category)");
  const int64_t named = year_in_name(file);
  if (coco.info_year != 0 && named != 0 && coco.info_year != named)
    throw std::runtime_error(file + ": its info.year is " + std::to_string(coco.info_year) + ", its name says " +
                             std::to_string(named) + " (an annotation file of another release under this name?)");
}

std::string CocoDatasetStats::summary() const {
  std::ostringstream s;
  s << images_kept << " of " << images_in_file << " images kept";
  if (images_dropped_no_annotations + images_dropped_only_tiny_boxes > 0)
    s << " (dropped: " << images_dropped_no_annotations << " without annotations, " << images_dropped_only_tiny_boxes
      << " with only boxes <= 1 px)";
  s << "; " << instances_kept << " instances; skipped: " << crowd_annotations_dropped << " crowd, "
    << boxes_dropped_empty_after_clip << " empty after clipping, " << polygons_skipped_too_few_points
    << " polygons with < 3 points; " << instances_without_polygon << " instances without a polygon";
  return s.str();
}

CocoArrays build_coco_arrays(const eval::Dataset& coco, const CocoIndexOptions& options, const std::string& file,
                             bool progress) {
  check_instances_file(coco, file);
  auto o = std::make_shared<OwnedArrays>();
  CocoDatasetStats stats;
  std::vector<std::string> category_names;

  // Contiguous labels in ascending category id.
  std::vector<size_t> cat_order(coco.categories.size());
  std::iota(cat_order.begin(), cat_order.end(), size_t{0});
  std::sort(cat_order.begin(), cat_order.end(),
            [&](size_t a, size_t b) { return coco.categories[a].id < coco.categories[b].id; });
  std::unordered_map<uint64_t, int64_t> label_of;
  for (size_t k = 0; k < cat_order.size(); ++k) {
    const eval::Category& c = coco.categories[cat_order[k]];
    o->category_ids.push_back(c.id);
    category_names.push_back(c.name);
    label_of[c.id] = static_cast<int64_t>(k) + 1;
  }
  if (o->category_ids.empty()) throw std::runtime_error(file + ": no categories");

  std::vector<size_t> image_order(coco.images.size());
  std::iota(image_order.begin(), image_order.end(), size_t{0});
  std::sort(image_order.begin(), image_order.end(),
            [&](size_t a, size_t b) { return coco.images[a].id < coco.images[b].id; });

  stats.images_in_file = static_cast<int64_t>(coco.images.size());
  logging::Progress bar("index " + std::filesystem::path(file).filename().string(),
                        static_cast<int64_t>(image_order.size()), "img", progress ? stderr : nullptr);
  int64_t visited = 0;
  for (size_t pos : image_order) {
    if (++visited % 4096 == 0) bar.update(visited);
    const eval::Image& im = coco.images[pos];
    check_image(file, im);
    const std::span<const uint32_t> anns = coco.annotations_of_image(im.id);
    check_boxes(file, coco, anns);
    if (options.remove_images_without_annotations && !keep_for_training(coco, anns, stats)) continue;

    CocoImageRecord r{};
    r.image_id = static_cast<int64_t>(im.id);
    r.width = static_cast<int32_t>(im.width);
    r.height = static_cast<int32_t>(im.height);
    r.first_instance = static_cast<int64_t>(o->labels.size());
    r.name_offset = static_cast<uint32_t>(o->file_names.size());
    r.name_length = static_cast<uint32_t>(im.file_name.size());
    o->file_names.insert(o->file_names.end(), im.file_name.begin(), im.file_name.end());
    for (uint32_t ai : anns) {
      const eval::Annotation& a = coco.annotations[ai];
      if (a.iscrowd) {
        ++stats.crowd_annotations_dropped;
        continue;
      }
      const auto label = label_of.find(a.category_id);
      if (label == label_of.end())
        throw std::runtime_error(describe_annotation(file, a) + ": category id " + std::to_string(a.category_id) +
                                 " is not among the file's categories");
      add_instance(file, a, r, label->second, options.legacy_plus_one, *o, stats);
    }
    r.end_instance = static_cast<int64_t>(o->labels.size());
    o->images.push_back(r);
  }
  if (o->file_names.size() > UINT32_MAX) throw std::runtime_error(file + ": file names longer than 4 GB in all");
  stats.images_kept = static_cast<int64_t>(o->images.size());
  stats.instances_kept = static_cast<int64_t>(o->labels.size());
  bar.update(visited);
  bar.finish(std::to_string(stats.images_kept) + " kept");

  if (auto centi = as_hundredths(o->coords)) {
    o->coords_centi = std::move(*centi);
    o->coords = {};
  }
  CocoArrays a = view_of(std::move(o));
  a.category_names = std::move(category_names);
  a.stats = stats;
  a.options = options;
  return a;
}

}  // namespace mrcnn::data
