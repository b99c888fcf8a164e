// The COCO annotation model and its ground-truth reader: images, categories, annotations and
// their segmentations, a Dataset with its lookups, load_dataset / parse_dataset for
// instances_*.json, and Detection, the in-memory form of one result (make_detection builds one
// without a JSON round trip). Results files are read by results_reader.h.
//
// Reading is one pass over the file with JsonCursor (no document tree). Every error is a
// CocoError whose one-line message names the file, the byte offset (line, column), the element
// ("annotations[17].bbox") and what was expected.
//
// Ownership: a Dataset owns all its data (plain vectors and strings); it is a value, copyable and
// movable. Lookups (find_image, annotations_of_image, ...) use an index that load_dataset()
// builds; after changing the vectors by hand call build_index() again. A const Dataset is safe to
// read from many threads at once. A Detection owns its data, except the compressed counts of one
// read by load_results, which share the mapped file (see CompressedCounts and results_reader.h).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "eval/rle.h"

namespace mrcnn::eval {

// Bad COCO input (file or in-memory); what() is one self-contained line.
class CocoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Image {
  uint64_t id = 0;
  int width = 0;
  int height = 0;
  std::string file_name;
};

struct Category {
  uint64_t id = 0;
  std::string name;
  std::string supercategory;
};

// COCO's compressed RLE counts string. It either owns its characters or refers to the JSON text
// it was read from, where they may still carry the escapes \\ \" and \/ (a results file read by
// load_results: the file stays mapped while any detection read from it lives, and no counts
// string is copied). text() gives the counts themselves either way. Copies share the characters,
// which never change after construction.
class CompressedCounts {
 public:
  CompressedCounts() = default;
  CompressedCounts(const CompressedCounts&) = default;
  CompressedCounts& operator=(const CompressedCounts&) = default;
  // A moved-from value is empty.
  CompressedCounts(CompressedCounts&& o) noexcept { *this = std::move(o); }
  CompressedCounts& operator=(CompressedCounts&& o) noexcept {
    if (this == &o) return *this;
    owner_ = std::move(o.owner_);
    data_ = std::exchange(o.data_, "");
    size_ = o.size_;
    escaped_ = o.escaped_;
    o.size_ = 0;
    o.escaped_ = 0;
    return *this;
  }
  // Owns a copy of `counts` (the counts themselves, no escapes).
  CompressedCounts(std::string_view counts);  // NOLINT(google-explicit-constructor): a string
  CompressedCounts(const std::string& counts) : CompressedCounts(std::string_view(counts)) {}  // NOLINT
  CompressedCounts(const char* counts) : CompressedCounts(std::string_view(counts)) {}        // NOLINT
  // Refers to a JSON string's contents (between its quotes) that `owner` keeps alive; `escaped`
  // says whether they hold any of the escapes \\ \" \/ (no others are allowed).
  static CompressedCounts in_json(std::shared_ptr<const void> owner, std::string_view contents,
                                  bool escaped);

  // The counts: the characters themselves when they carry no escape, else decoded into
  // `scratch`, which the result then refers to.
  std::string_view text(std::string& scratch) const;
  std::string str() const;
  bool empty() const { return size_ == 0; }
  // The characters as held: with their JSON escapes when they refer to a JSON text.
  std::string_view raw() const { return {data_, size_}; }

  friend bool operator==(const CompressedCounts& a, const CompressedCounts& b);

 private:
  std::shared_ptr<const void> owner_;
  const char* data_ = "";
  uint64_t size_ : 63 = 0;
  uint64_t escaped_ : 1 = 0;
};

// A segmentation as the file gives it: polygons, an uncompressed RLE ("counts" a list), a
// compressed RLE ("counts" a string), or absent.
struct Segmentation {
  enum class Kind : uint8_t { kNone, kPolygons, kRle, kCompressedRle };
  Kind kind = Kind::kNone;
  std::vector<std::vector<double>> polygons;  // kPolygons: each x0,y0,x1,y1,... (even length)
  uint32_t height = 0;                        // kRle, kCompressedRle: "size": [height, width]
  uint32_t width = 0;
  std::vector<uint32_t> counts;  // kRle: column-major run lengths (zeros first)
  CompressedCounts compressed;   // kCompressedRle: COCO's compressed counts string

  bool empty() const { return kind == Kind::kNone; }
  static Segmentation from_rle(Rle rle);  // kRle holding rle's counts
};

// The mask of a segmentation on an image of height x width pixels, as pycocotools' annToRLE:
// polygons are rasterized and merged, RLEs are taken as they are. Throws CocoError when the
// segmentation is absent, its RLE size differs from the image's, or its counts are malformed;
// `what` names the annotation in that message (e.g. "annotations[12] (id 4081)").
Rle to_rle(const Segmentation& s, uint32_t height, uint32_t width, std::string_view what);
// from_string() and check_string() (rle.h) on compressed counts, decoding any JSON escapes in a
// buffer of the calling thread's own (no allocation per call).
Rle from_compressed(const CompressedCounts& counts, uint32_t height, uint32_t width);
void check_compressed(const CompressedCounts& counts, uint32_t height, uint32_t width);

struct Annotation {
  uint64_t id = 0;
  uint64_t image_id = 0;
  uint64_t category_id = 0;
  std::array<double, 4> bbox{};  // x, y, width, height in image pixels
  double area = 0;               // as in the file (the mask's area for COCO's own files)
  bool iscrowd = false;          // absent in the file means false
  Segmentation segmentation;
};

class Dataset {
 public:
  std::vector<Image> images;
  std::vector<Category> categories;
  std::vector<Annotation> annotations;
  // Where it was read from (the file's path; "" when built in memory): errors about its
  // annotations name it.
  std::string source;
  // What tells a file's release and task apart: "info": {"year": ...} (0 when absent), and
  // whether its annotations carry "keypoints" (a person-keypoints file parses as an instances
  // file of one category; a captions file fails for its missing "category_id", saying so).
  int64_t info_year = 0;
  bool has_keypoints = false;

  // Rebuilds the lookups below from the vectors. Throws CocoError on duplicate image, category
  // or annotation ids and on annotations whose image or category is not in the dataset.
  void build_index();

  // Whether the lookups match the vectors' sizes (build_index() ran after the last change).
  bool indexed() const;

  // nullptr when there is no such id.
  const Image* find_image(uint64_t id) const;
  const Category* find_category(uint64_t id) const;
  // Positions in `annotations`, in file order; empty for unknown ids.
  std::span<const uint32_t> annotations_of_image(uint64_t image_id) const;
  std::span<const uint32_t> annotations_of_category(uint64_t category_id) const;
  // Position of an image / category in `images` / `categories`, or -1.
  int64_t image_index(uint64_t id) const;
  int64_t category_index(uint64_t id) const;

 private:
  std::unordered_map<uint64_t, uint32_t> image_pos_;
  std::unordered_map<uint64_t, uint32_t> category_pos_;
  std::vector<uint32_t> by_image_;        // annotation positions grouped by image
  std::vector<uint32_t> by_image_start_;  // per image position: start in by_image_ (+1 end)
  std::vector<uint32_t> by_category_;
  std::vector<uint32_t> by_category_start_;
};

// Reads a COCO instances file ("images", "categories", "annotations"; other keys such as "info"
// and "licenses" are skipped; unknown fields of an element are skipped too). Required fields:
// image id/width/height, category id, annotation id/image_id/category_id/bbox/area.
// Throws CocoError (file, byte offset, element, expectation) on any malformed or mistyped input.
Dataset load_dataset(const std::string& path);
// The same from JSON text already in memory; `source` names it in error messages.
Dataset parse_dataset(std::string_view json, const std::string& source);

// ---- results (detections) ---------------------------------------------------------------------

// One detection, as in a COCO results file: {"image_id", "category_id", "bbox", "score",
// "segmentation"}; bbox and/or segmentation may be absent. results_reader.h reads such files.
struct Detection {
  uint64_t image_id = 0;
  uint64_t category_id = 0;
  double score = 0;
  bool has_bbox = false;
  std::array<double, 4> bbox{};  // x, y, width, height in original image pixels, if has_bbox
  Segmentation segmentation;     // kNone if absent
};

// Building results in memory (what the trainer does): fill Detection directly, e.g.
//   Detection d;  d.image_id = id;  d.category_id = coco_cat;  d.score = s;
//   d.has_bbox = true;  d.bbox = {x, y, w, h};
//   d.segmentation = Segmentation::from_rle(encode_row_major(mask, h, w));
// This helper does the same for one detection.
Detection make_detection(uint64_t image_id, uint64_t category_id, double score,
                         const std::array<double, 4>& bbox_xywh, Rle mask);

}  // namespace mrcnn::eval
