#include "benchmark/data/coco_index.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "benchmark/data/image_codec.h"
#include "benchmark/data/transforms.h"
#include "eval/coco.h"
#include "logging/progress.h"
#include "logging/sha256.h"

namespace mrcnn::data {

static_assert(std::endian::native == std::endian::little, "the index is little-endian, as every supported host");

namespace {

// ---- building ------------------------------------------------------------------------------

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

// ---- the file ------------------------------------------------------------------------------

constexpr char kMagic[8] = {'M', 'R', 'C', 'N', 'N', 'I', 'D', 'X'};
enum Sec { kImages, kBoxes, kLabels, kInstancePolys, kPolyCoords, kCoords, kCategoryIds, kCategoryNames, kFileNames, kNumSections };
constexpr const char* kSectionNames[kNumSections] = {"images", "boxes", "labels", "instance_polys", "poly_coords",
                                                     "coords", "category_ids", "category_names", "file_names"};
constexpr uint64_t kAlign = 64;

struct Section {
  uint64_t offset;
  uint64_t bytes;
};

struct IndexHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t file_bytes;
  uint64_t json_bytes;
  int64_t json_mtime_ns;
  char json_sha256[64];
  char payload_sha256[64];  // of bytes [header_bytes, file_bytes)
  uint8_t remove_images_without_annotations;
  uint8_t legacy_plus_one;
  uint8_t coords_centi;
  uint8_t reserved[5];
  int64_t stats[9];
  Section sections[kNumSections];
};
constexpr uint64_t kPayloadStart = (sizeof(IndexHeader) + kAlign - 1) / kAlign * kAlign;

std::array<int64_t*, 9> stat_fields(CocoDatasetStats& s) {
  return {&s.images_in_file, &s.images_kept, &s.images_dropped_no_annotations, &s.images_dropped_only_tiny_boxes,
          &s.crowd_annotations_dropped, &s.boxes_dropped_empty_after_clip, &s.polygons_skipped_too_few_points,
          &s.instances_without_polygon, &s.instances_kept};
}

int64_t mtime_ns_of(const std::string& path, uint64_t* bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw std::runtime_error(path + ": " + std::strerror(errno));
  if (bytes) *bytes = static_cast<uint64_t>(st.st_size);
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

template <class T>
void append_section(std::string& payload, Section& s, std::span<const T> data) {
  payload.resize((payload.size() + kAlign - 1) / kAlign * kAlign, '\0');
  s.offset = kPayloadStart + payload.size();
  s.bytes = data.size_bytes();
  payload.append(reinterpret_cast<const char*>(data.data()), data.size_bytes());
}

struct Mapping {
  void* base = MAP_FAILED;
  size_t bytes = 0;
  ~Mapping() {
    if (base != MAP_FAILED) ::munmap(base, bytes);
  }
};

std::shared_ptr<Mapping> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  auto m = std::make_shared<Mapping>();
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    m->bytes = static_cast<size_t>(st.st_size);
    // MAP_SHARED read-only: every rank on the node shares the page cache's one copy.
    m->base = ::mmap(nullptr, m->bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
  }
  const int err = errno;
  ::close(fd);
  if (m->bytes == 0) throw std::runtime_error(path + ": empty index (run `mlperf-maskrcnn data prepare` again)");
  if (m->base == MAP_FAILED) throw std::runtime_error(path + ": cannot map: " + std::strerror(err));
  return m;
}

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": corrupt index (" + what + "); run `mlperf-maskrcnn data prepare` again");
}

template <class T>
std::span<const T> section(const std::string& path, const Mapping& m, const IndexHeader& h, Sec s) {
  const Section& sec = h.sections[s];
  if (sec.offset < h.header_bytes || sec.offset > m.bytes || sec.bytes > m.bytes - sec.offset ||
      sec.offset % alignof(T) != 0 || sec.bytes % sizeof(T) != 0)
    corrupt(path, std::string("section ") + kSectionNames[s] + " out of bounds");
  return {reinterpret_cast<const T*>(static_cast<const char*>(m.base) + sec.offset), sec.bytes / sizeof(T)};
}

// The cross-references between sections, so a reader never indexes outside the mapping.
void check_structure(const std::string& path, const CocoArrays& a) {
  const auto n_inst = static_cast<int64_t>(a.labels.size());
  if (a.boxes.size() != 4 * a.labels.size() || a.instance_polys.size() != a.labels.size() + 1 ||
      a.poly_coords.empty() || a.instance_polys.front() != 0 || a.poly_coords.front() != 0 ||
      a.instance_polys.back() != static_cast<int64_t>(a.poly_coords.size()) - 1 || a.poly_coords.back() != a.num_coords())
    corrupt(path, "section sizes disagree");
  const auto num_labels = static_cast<int64_t>(a.category_ids.size());
  if (std::any_of(a.labels.begin(), a.labels.end(), [&](int64_t l) { return l < 1 || l > num_labels; }))
    corrupt(path, "a label outside 1.." + std::to_string(num_labels));
  if (!std::is_sorted(a.instance_polys.begin(), a.instance_polys.end()) ||
      !std::is_sorted(a.poly_coords.begin(), a.poly_coords.end()))
    corrupt(path, "offsets not ascending");
  int64_t next = 0;
  for (const CocoImageRecord& r : a.images) {
    if (r.first_instance != next || r.end_instance < r.first_instance || r.end_instance > n_inst ||
        static_cast<uint64_t>(r.name_offset) + r.name_length > a.file_names.size())
      corrupt(path, "image id " + std::to_string(r.image_id) + " points outside the index");
    next = r.end_instance;
  }
  if (next != n_inst) corrupt(path, "instances not covered by the images");
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

IndexSource describe_source(const std::string& json_path) {
  IndexSource s;
  s.mtime_ns = mtime_ns_of(json_path, &s.bytes);
  s.sha256 = logging::sha256_file(json_path);
  return s;
}

void write_coco_index(const std::string& index_path, const CocoArrays& a, const IndexSource& source) {
  IndexHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kCocoIndexVersion;
  h.header_bytes = static_cast<uint32_t>(kPayloadStart);
  h.json_bytes = source.bytes;
  h.json_mtime_ns = source.mtime_ns;
  if (source.sha256.size() != 64) throw std::invalid_argument("write_coco_index: the source's SHA-256 must be 64 hex digits");
  std::memcpy(h.json_sha256, source.sha256.data(), 64);
  h.remove_images_without_annotations = a.options.remove_images_without_annotations;
  h.legacy_plus_one = a.options.legacy_plus_one;
  h.coords_centi = a.centi();
  CocoDatasetStats stats = a.stats;
  const auto fields = stat_fields(stats);
  for (size_t k = 0; k < fields.size(); ++k) h.stats[k] = *fields[k];

  std::string names;
  for (const std::string& n : a.category_names) names.append(n).push_back('\0');
  std::string payload;
  payload.reserve(a.images.size_bytes() + a.boxes.size_bytes() + 3 * a.labels.size_bytes() +
                  a.poly_coords.size_bytes() + a.coords_centi.size_bytes() + a.coords.size_bytes() + 16 * kAlign);
  append_section(payload, h.sections[kImages], a.images);
  append_section(payload, h.sections[kBoxes], a.boxes);
  append_section(payload, h.sections[kLabels], a.labels);
  append_section(payload, h.sections[kInstancePolys], a.instance_polys);
  append_section(payload, h.sections[kPolyCoords], a.poly_coords);
  if (a.centi())
    append_section(payload, h.sections[kCoords], a.coords_centi);
  else
    append_section(payload, h.sections[kCoords], a.coords);
  append_section(payload, h.sections[kCategoryIds], a.category_ids);
  append_section(payload, h.sections[kCategoryNames], std::span<const char>(names.data(), names.size()));
  append_section(payload, h.sections[kFileNames], a.file_names);
  h.file_bytes = kPayloadStart + payload.size();
  const std::string digest = logging::sha256_hex(payload);
  std::memcpy(h.payload_sha256, digest.data(), 64);

  const std::string tmp = index_path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(&h), sizeof h);
    const std::string pad(kPayloadStart - sizeof h, '\0');
    f.write(pad.data(), static_cast<std::streamsize>(pad.size()));
    f.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    f.flush();
    if (!f) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw std::runtime_error(index_path + ": cannot write the index (disk full or not writable?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, index_path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error(index_path + ": cannot move the index into place: " + ec.message());
  }
}

namespace {

// The header of the mapped index at `path` (corrupt if it is none); false, with the status and
// reason in `out`, when another format version wrote it.
bool read_header(const std::string& path, const Mapping& m, IndexHeader& h, IndexOpen& out) {
  if (m.bytes < 16 || std::memcmp(m.base, kMagic, sizeof kMagic) != 0) corrupt(path, "not an index file");
  std::memcpy(&h, m.base, std::min<size_t>(sizeof h, m.bytes));
  if (h.version != kCocoIndexVersion) {
    out.status = IndexOpen::Status::kOtherVersion;
    out.reason = path + " has format version " + std::to_string(h.version) + ", this build reads " +
                 std::to_string(kCocoIndexVersion) + " (run `mlperf-maskrcnn data prepare` again)";
    return false;
  }
  if (m.bytes < kPayloadStart || h.header_bytes != kPayloadStart) corrupt(path, "header cut short");
  if (h.file_bytes != m.bytes)
    corrupt(path, std::to_string(m.bytes) + " bytes, its header says " + std::to_string(h.file_bytes));
  return true;
}

// Whether the JSON at `json_path` is the one the index was made from: the same size, and the same
// modification time or else (touched or copied) the same SHA-256; false, stale in `out`, if not.
bool json_unchanged(const std::string& json_path, const IndexHeader& h, IndexOpen& out) {
  uint64_t json_bytes = 0;
  const int64_t json_mtime = mtime_ns_of(json_path, &json_bytes);
  if (json_bytes != h.json_bytes) {
    out.status = IndexOpen::Status::kStale;
    out.reason = json_path + " changed since the index was prepared (" + std::to_string(json_bytes) +
                 " bytes, the index was made from " + std::to_string(h.json_bytes) + ")";
    return false;
  }
  if (json_mtime != h.json_mtime_ns) {
    out.json_hashed = true;
    if (logging::sha256_file(json_path) != std::string(h.json_sha256, 64)) {
      out.status = IndexOpen::Status::kStale;
      out.reason = json_path + " changed since the index was prepared (its SHA-256 differs)";
      return false;
    }
  }
  return true;
}

// Whether the index was prepared with the options this run needs; false, with the status and
// reason in `out`, if not.
bool options_match(const std::string& path, const CocoIndexOptions& built, const CocoIndexOptions& options,
                   IndexOpen& out) {
  if (built == options) return true;
  auto describe = [](const CocoIndexOptions& o) {
    return std::string("remove_images_without_annotations=") + (o.remove_images_without_annotations ? "true" : "false") +
           ", legacy_plus_one=" + (o.legacy_plus_one ? "true" : "false");
  };
  out.status = IndexOpen::Status::kOtherOptions;
  out.reason = path + " was prepared with " + describe(built) + "; this run needs " + describe(options);
  return false;
}

// The NUL-terminated category names of the index at `path`.
std::vector<std::string> category_names(const std::string& path, std::span<const char> names) {
  std::vector<std::string> out;
  for (auto it = names.begin(); it != names.end();) {
    const auto end = std::find(it, names.end(), '\0');
    if (end == names.end()) corrupt(path, "category names not terminated");
    out.emplace_back(it, end);
    it = end + 1;
  }
  return out;
}

// The arrays over the sections of a checked index; they keep `m` mapped. Corrupt when they
// disagree.
CocoArrays read_arrays(const std::string& path, std::shared_ptr<Mapping> m, const IndexHeader& h,
                       const CocoIndexOptions& built) {
  CocoArrays a;
  a.images = section<CocoImageRecord>(path, *m, h, kImages);
  a.boxes = section<float>(path, *m, h, kBoxes);
  a.labels = section<int64_t>(path, *m, h, kLabels);
  a.instance_polys = section<int64_t>(path, *m, h, kInstancePolys);
  a.poly_coords = section<int64_t>(path, *m, h, kPolyCoords);
  if (h.coords_centi)
    a.coords_centi = section<int32_t>(path, *m, h, kCoords);
  else
    a.coords = section<double>(path, *m, h, kCoords);
  a.category_ids = section<uint64_t>(path, *m, h, kCategoryIds);
  a.file_names = section<char>(path, *m, h, kFileNames);
  a.category_names = category_names(path, section<char>(path, *m, h, kCategoryNames));
  if (a.category_names.size() != a.category_ids.size() || a.category_ids.empty())
    corrupt(path, "category names and ids disagree");
  const auto fields = stat_fields(a.stats);
  for (size_t k = 0; k < fields.size(); ++k) *fields[k] = h.stats[k];
  a.options = built;
  a.owner = std::move(m);
  check_structure(path, a);
  return a;
}

}  // namespace

IndexOpen open_coco_index(const std::string& index_path, const std::string& json_path, const CocoIndexOptions& options) {
  IndexOpen out;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(index_path, ec)) {
    out.reason = "no index at " + index_path + " (`mlperf-maskrcnn data prepare` writes one)";
    return out;
  }
  std::shared_ptr<Mapping> m = map_file(index_path);
  IndexHeader h{};
  if (!read_header(index_path, *m, h, out) || !json_unchanged(json_path, h, out)) return out;
  const CocoIndexOptions built{.remove_images_without_annotations = h.remove_images_without_annotations != 0,
                               .legacy_plus_one = h.legacy_plus_one != 0};
  if (!options_match(index_path, built, options, out)) return out;
  const std::string_view payload(static_cast<const char*>(m->base) + kPayloadStart, m->bytes - kPayloadStart);
  if (logging::sha256_hex(payload) != std::string(h.payload_sha256, 64)) corrupt(index_path, "checksum mismatch");
  out.arrays = read_arrays(index_path, std::move(m), h, built);
  out.status = IndexOpen::Status::kCurrent;
  return out;
}

}  // namespace mrcnn::data
