#include "eval/coco.h"

#include <cstring>
#include <stdexcept>
#include <utility>

namespace mrcnn::eval {

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
