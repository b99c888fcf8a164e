#include "eval/coco.h"

#include <cstring>
#include <stdexcept>
#include <utility>

#include "eval/coco_json.h"
#include "eval/json_cursor.h"

namespace mrcnn::eval {

namespace {

using detail::read_bbox;
using detail::read_dim;
using detail::read_segmentation;
using detail::with_coco_errors;

// ---- the ground truth's elements ----------------------------------------------------------------

bool read_flag(JsonCursor& c) {
  if (c.peek() == JsonCursor::Kind::kTrue || c.peek() == JsonCursor::Kind::kFalse) {
    return c.boolean();
  }
  const int64_t v = c.int64();
  if (v != 0 && v != 1) c.fail_value("expected 0 or 1, found " + std::to_string(v));
  return v == 1;
}

void read_images(JsonCursor& c, std::vector<Image>& images, std::string& scratch) {
  c.begin_array();
  while (c.next_element()) {
    Image& im = images.emplace_back();
    c.begin_object();
    std::string_view key;
    bool id = false, w = false, h = false;
    while (c.next_key(key)) {
      if (key == "id") {
        im.id = c.uint64();
        id = true;
      } else if (key == "width") {
        im.width = static_cast<int>(read_dim(c));
        if (im.width == 0) c.fail_value("expected a positive image width");
        w = true;
      } else if (key == "height") {
        im.height = static_cast<int>(read_dim(c));
        if (im.height == 0) c.fail_value("expected a positive image height");
        h = true;
      } else if (key == "file_name") {
        im.file_name = c.string(scratch);
      } else {
        c.skip();
      }
    }
    if (!id || !w || !h) {
      c.fail_value(std::string("image is missing its ") + (!id ? "\"id\"" : !w ? "\"width\"" : "\"height\""));
    }
  }
}

void read_categories(JsonCursor& c, std::vector<Category>& cats, std::string& scratch) {
  c.begin_array();
  while (c.next_element()) {
    Category& cat = cats.emplace_back();
    c.begin_object();
    std::string_view key;
    bool id = false;
    while (c.next_key(key)) {
      if (key == "id") {
        cat.id = c.uint64();
        id = true;
      } else if (key == "name") {
        cat.name = c.string(scratch);
      } else if (key == "supercategory") {
        cat.supercategory = c.string(scratch);
      } else {
        c.skip();
      }
    }
    if (!id) c.fail_value("category is missing its \"id\"");
  }
}

void read_annotations(JsonCursor& c, std::vector<Annotation>& anns, bool& has_keypoints, std::string& scratch) {
  c.begin_array();
  while (c.next_element()) {
    Annotation& a = anns.emplace_back();
    c.begin_object();
    std::string_view key;
    bool id = false, img = false, cat = false, bbox = false, area = false, caption = false;
    while (c.next_key(key)) {
      if (key == "id") {
        a.id = c.uint64();
        id = true;
      } else if (key == "image_id") {
        a.image_id = c.uint64();
        img = true;
      } else if (key == "category_id") {
        a.category_id = c.uint64();
        cat = true;
      } else if (key == "bbox") {
        read_bbox(c, a.bbox, bbox);
        if (!bbox) c.fail_value("expected a bbox of 4 numbers [x, y, width, height]");
      } else if (key == "area") {
        a.area = c.number();
        area = true;
      } else if (key == "iscrowd") {
        a.iscrowd = read_flag(c);
      } else if (key == "segmentation") {
        read_segmentation(c, a.segmentation, scratch);
      } else {
        has_keypoints |= key == "keypoints";
        caption |= key == "caption";
        c.skip();
      }
    }
    if (caption && !cat) c.fail_value("a captions annotation (it has a \"caption\" and no \"category_id\"); expected an instances file");
    if (!id || !img || !cat || !bbox || !area) {
      const char* missing = !id ? "\"id\"" : !img ? "\"image_id\"" : !cat ? "\"category_id\"" : !bbox ? "\"bbox\"" : "\"area\"";
      c.fail_value(std::string("annotation is missing its ") + missing);
    }
  }
}

}  // namespace

// ---- Segmentation -------------------------------------------------------------------------------

Segmentation Segmentation::from_rle(Rle rle) {
  Segmentation s;
  s.kind = Kind::kRle;
  s.height = rle.h;
  s.width = rle.w;
  s.counts = std::move(rle.counts);
  return s;
}

Rle to_rle(const Segmentation& s, uint32_t h, uint32_t w, std::string_view what) {
  auto size_check = [&]() {
    if (s.height != h || s.width != w) {
      throw CocoError(std::string(what) + ": RLE size [" + std::to_string(s.height) + ", " +
                      std::to_string(s.width) + "] differs from its image's [" +
                      std::to_string(h) + ", " + std::to_string(w) + "]");
    }
  };
  try {
    switch (s.kind) {
      case Segmentation::Kind::kNone:
        throw CocoError(std::string(what) + ": has no segmentation");
      case Segmentation::Kind::kPolygons:
        return from_polygons(s.polygons, h, w);
      case Segmentation::Kind::kRle:
        size_check();
        return from_counts(s.counts, h, w);
      case Segmentation::Kind::kCompressedRle:
        size_check();
        return from_compressed(s.compressed, h, w);
    }
  } catch (const std::invalid_argument& e) {
    throw CocoError(std::string(what) + ": " + e.what());
  }
  throw CocoError(std::string(what) + ": unknown segmentation kind");
}

// ---- CompressedCounts ---------------------------------------------------------------------------

CompressedCounts::CompressedCounts(std::string_view counts) : size_(counts.size()) {
  if (counts.empty()) return;
  std::shared_ptr<char[]> chars(new char[counts.size()]);
  std::memcpy(chars.get(), counts.data(), counts.size());
  data_ = chars.get();
  owner_ = std::move(chars);
}

CompressedCounts CompressedCounts::in_json(std::shared_ptr<const void> owner,
                                           std::string_view contents, bool escaped) {
  CompressedCounts c;
  if (contents.empty()) return c;
  c.owner_ = std::move(owner);
  c.data_ = contents.data();
  c.size_ = contents.size();
  c.escaped_ = escaped;
  return c;
}

std::string_view CompressedCounts::text(std::string& scratch) const {
  const std::string_view held = raw();
  if (!escaped_) return held;
  // Only \\ \" and \/ were allowed in: each is its second character.
  scratch.clear();
  size_t pos = 0;
  for (size_t bs = held.find('\\'); bs != std::string_view::npos; bs = held.find('\\', pos)) {
    scratch.append(held, pos, bs - pos);
    if (bs + 1 < held.size()) scratch.push_back(held[bs + 1]);
    pos = bs + 2;
  }
  if (pos < held.size()) scratch.append(held, pos);
  return scratch;
}

std::string CompressedCounts::str() const {
  std::string scratch;
  const std::string_view t = text(scratch);
  if (t.data() == scratch.data()) return scratch;
  return std::string(t);
}

bool operator==(const CompressedCounts& a, const CompressedCounts& b) {
  std::string sa, sb;
  return a.text(sa) == b.text(sb);
}

namespace {
std::string& counts_scratch() {
  thread_local std::string scratch;
  return scratch;
}
}  // namespace

Rle from_compressed(const CompressedCounts& counts, uint32_t height, uint32_t width) {
  return from_string(counts.text(counts_scratch()), height, width);
}

void check_compressed(const CompressedCounts& counts, uint32_t height, uint32_t width) {
  check_string(counts.text(counts_scratch()), height, width);
}

// ---- Dataset ------------------------------------------------------------------------------------

void Dataset::build_index() {
  image_pos_.clear();
  category_pos_.clear();
  image_pos_.reserve(images.size());
  category_pos_.reserve(categories.size());
  for (size_t i = 0; i < images.size(); ++i) {
    if (!image_pos_.emplace(images[i].id, static_cast<uint32_t>(i)).second) {
      throw CocoError("images[" + std::to_string(i) + "]: duplicate image id " +
                      std::to_string(images[i].id));
    }
  }
  for (size_t i = 0; i < categories.size(); ++i) {
    if (!category_pos_.emplace(categories[i].id, static_cast<uint32_t>(i)).second) {
      throw CocoError("categories[" + std::to_string(i) + "]: duplicate category id " +
                      std::to_string(categories[i].id));
    }
  }
  std::unordered_map<uint64_t, uint32_t> ann_ids;
  ann_ids.reserve(annotations.size());
  std::vector<uint32_t> img_of(annotations.size()), cat_of(annotations.size());
  by_image_start_.assign(images.size() + 1, 0);
  by_category_start_.assign(categories.size() + 1, 0);
  for (size_t i = 0; i < annotations.size(); ++i) {
    const Annotation& a = annotations[i];
    const std::string where = "annotations[" + std::to_string(i) + "] (id " + std::to_string(a.id) + ")";
    if (!ann_ids.emplace(a.id, static_cast<uint32_t>(i)).second) {
      throw CocoError(where + ": duplicate annotation id");
    }
    auto ip = image_pos_.find(a.image_id);
    if (ip == image_pos_.end()) {
      throw CocoError(where + ": image_id " + std::to_string(a.image_id) + " is not in \"images\"");
    }
    auto cp = category_pos_.find(a.category_id);
    if (cp == category_pos_.end()) {
      throw CocoError(where + ": category_id " + std::to_string(a.category_id) +
                      " is not in \"categories\"");
    }
    img_of[i] = ip->second;
    cat_of[i] = cp->second;
    ++by_image_start_[ip->second + 1];
    ++by_category_start_[cp->second + 1];
  }
  for (size_t i = 1; i < by_image_start_.size(); ++i) by_image_start_[i] += by_image_start_[i - 1];
  for (size_t i = 1; i < by_category_start_.size(); ++i) {
    by_category_start_[i] += by_category_start_[i - 1];
  }
  by_image_.assign(annotations.size(), 0);
  by_category_.assign(annotations.size(), 0);
  std::vector<uint32_t> fill_i(by_image_start_.begin(), by_image_start_.end() - 1);
  std::vector<uint32_t> fill_c(by_category_start_.begin(), by_category_start_.end() - 1);
  for (size_t i = 0; i < annotations.size(); ++i) {
    by_image_[fill_i[img_of[i]]++] = static_cast<uint32_t>(i);
    by_category_[fill_c[cat_of[i]]++] = static_cast<uint32_t>(i);
  }
}

bool Dataset::indexed() const {
  return image_pos_.size() == images.size() && category_pos_.size() == categories.size() &&
         by_image_.size() == annotations.size() && by_image_start_.size() == images.size() + 1 &&
         by_category_start_.size() == categories.size() + 1;
}

const Image* Dataset::find_image(uint64_t id) const {
  auto it = image_pos_.find(id);
  return it == image_pos_.end() ? nullptr : &images[it->second];
}

const Category* Dataset::find_category(uint64_t id) const {
  auto it = category_pos_.find(id);
  return it == category_pos_.end() ? nullptr : &categories[it->second];
}

int64_t Dataset::image_index(uint64_t id) const {
  auto it = image_pos_.find(id);
  return it == image_pos_.end() ? -1 : it->second;
}

int64_t Dataset::category_index(uint64_t id) const {
  auto it = category_pos_.find(id);
  return it == category_pos_.end() ? -1 : it->second;
}

std::span<const uint32_t> Dataset::annotations_of_image(uint64_t image_id) const {
  auto it = image_pos_.find(image_id);
  if (it == image_pos_.end() || by_image_start_.empty()) return {};
  return std::span<const uint32_t>(by_image_).subspan(
      by_image_start_[it->second], by_image_start_[it->second + 1] - by_image_start_[it->second]);
}

std::span<const uint32_t> Dataset::annotations_of_category(uint64_t category_id) const {
  auto it = category_pos_.find(category_id);
  if (it == category_pos_.end() || by_category_start_.empty()) return {};
  return std::span<const uint32_t>(by_category_).subspan(
      by_category_start_[it->second],
      by_category_start_[it->second + 1] - by_category_start_[it->second]);
}

// ---- readers ------------------------------------------------------------------------------------

Dataset parse_dataset(std::string_view json, const std::string& source) {
  return with_coco_errors([&]() {
    Dataset ds;
    ds.source = source;
    JsonCursor c(json, source);
    std::string scratch;
    if (!c.next_is(JsonCursor::Kind::kObject)) c.fail("a COCO dataset object {\"images\": ...}");
    c.begin_object();
    std::string_view key;
    bool have_images = false;
    while (c.next_key(key)) {
      if (key == "images") {
        read_images(c, ds.images, scratch);
        have_images = true;
      } else if (key == "categories") {
        read_categories(c, ds.categories, scratch);
      } else if (key == "annotations") {
        read_annotations(c, ds.annotations, ds.has_keypoints, scratch);
      } else if (key == "info" && c.next_is(JsonCursor::Kind::kObject)) {
        c.begin_object();
        std::string_view info_key;
        while (c.next_key(info_key)) {
          if (info_key == "year" && c.next_is(JsonCursor::Kind::kNumber))
            ds.info_year = static_cast<int64_t>(c.number());
          else
            c.skip();
        }
      } else {
        c.skip();
      }
    }
    c.expect_end();
    if (!have_images) throw CocoError(source + ": the dataset has no \"images\" array");
    try {
      ds.build_index();
    } catch (const CocoError& e) {
      throw CocoError(source + ": " + e.what());
    }
    return ds;
  });
}

Dataset load_dataset(const std::string& path) {
  const auto file = detail::map_json_file(path);
  return parse_dataset(file->bytes(), path);
}

Detection make_detection(uint64_t image_id, uint64_t category_id, double score,
                         const std::array<double, 4>& bbox, Rle mask) {
  Detection d;
  d.image_id = image_id;
  d.category_id = category_id;
  d.score = score;
  d.has_bbox = true;
  d.bbox = bbox;
  d.segmentation = Segmentation::from_rle(std::move(mask));
  return d;
}

}  // namespace mrcnn::eval
