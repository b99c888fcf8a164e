#include "benchmark/data/coco_index.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <stdexcept>

#include "eval/mapped_file.h"
#include "logging/sha256.h"

namespace mrcnn::data {

static_assert(std::endian::native == std::endian::little, "the index is little-endian, as every supported host");

namespace {

// ---- the file's layout ---------------------------------------------------------------------

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

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": corrupt index (" + what + "); run `mlperf-maskrcnn data prepare` again");
}

template <class T>
std::span<const T> section(const std::string& path, std::string_view m, const IndexHeader& h, Sec s) {
  const Section& sec = h.sections[s];
  if (sec.offset < h.header_bytes || sec.offset > m.size() || sec.bytes > m.size() - sec.offset ||
      sec.offset % alignof(T) != 0 || sec.bytes % sizeof(T) != 0)
    corrupt(path, std::string("section ") + kSectionNames[s] + " out of bounds");
  return {reinterpret_cast<const T*>(m.data() + sec.offset), sec.bytes / sizeof(T)};
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

// The index at `path`, mapped read-only (every rank on the node reads the page cache's one copy).
std::shared_ptr<const eval::MappedFile> map_index(const std::string& path) {
  auto file = std::make_shared<const eval::MappedFile>(path);  // a FileError names the path
  if (file->size() == 0) throw std::runtime_error(path + ": empty index (run `mlperf-maskrcnn data prepare` again)");
  return file;
}

// The header of the mapped index at `path` (corrupt if it is none); false, with the status and
// reason in `out`, when another format version wrote it.
bool read_header(const std::string& path, std::string_view m, IndexHeader& h, IndexOpen& out) {
  if (m.size() < 16 || std::memcmp(m.data(), kMagic, sizeof kMagic) != 0) corrupt(path, "not an index file");
  std::memcpy(&h, m.data(), std::min<size_t>(sizeof h, m.size()));
  if (h.version != kCocoIndexVersion) {
    out.status = IndexOpen::Status::kOtherVersion;
    out.reason = path + " has format version " + std::to_string(h.version) + ", this build reads " +
                 std::to_string(kCocoIndexVersion) + " (run `mlperf-maskrcnn data prepare` again)";
    return false;
  }
  if (m.size() < kPayloadStart || h.header_bytes != kPayloadStart) corrupt(path, "header cut short");
  if (h.file_bytes != m.size())
    corrupt(path, std::to_string(m.size()) + " bytes, its header says " + std::to_string(h.file_bytes));
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

// The arrays over the sections of a checked index; they keep `file` mapped. Corrupt when they
// disagree.
CocoArrays read_arrays(const std::string& path, std::shared_ptr<const eval::MappedFile> file, const IndexHeader& h,
                       const CocoIndexOptions& built) {
  const std::string_view m = file->bytes();
  CocoArrays a;
  a.images = section<CocoImageRecord>(path, m, h, kImages);
  a.boxes = section<float>(path, m, h, kBoxes);
  a.labels = section<int64_t>(path, m, h, kLabels);
  a.instance_polys = section<int64_t>(path, m, h, kInstancePolys);
  a.poly_coords = section<int64_t>(path, m, h, kPolyCoords);
  if (h.coords_centi)
    a.coords_centi = section<int32_t>(path, m, h, kCoords);
  else
    a.coords = section<double>(path, m, h, kCoords);
  a.category_ids = section<uint64_t>(path, m, h, kCategoryIds);
  a.file_names = section<char>(path, m, h, kFileNames);
  a.category_names = category_names(path, section<char>(path, m, h, kCategoryNames));
  if (a.category_names.size() != a.category_ids.size() || a.category_ids.empty())
    corrupt(path, "category names and ids disagree");
  const auto fields = stat_fields(a.stats);
  for (size_t k = 0; k < fields.size(); ++k) *fields[k] = h.stats[k];
  a.options = built;
  a.owner = std::move(file);
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
  std::shared_ptr<const eval::MappedFile> file = map_index(index_path);
  const std::string_view m = file->bytes();
  IndexHeader h{};
  if (!read_header(index_path, m, h, out) || !json_unchanged(json_path, h, out)) return out;
  const CocoIndexOptions built{.remove_images_without_annotations = h.remove_images_without_annotations != 0,
                               .legacy_plus_one = h.legacy_plus_one != 0};
  if (!options_match(index_path, built, options, out)) return out;
  if (logging::sha256_hex(m.substr(kPayloadStart)) != std::string(h.payload_sha256, 64)) corrupt(index_path, "checksum mismatch");
  out.arrays = read_arrays(index_path, std::move(file), h, built);
  out.status = IndexOpen::Status::kCurrent;
  return out;
}

}  // namespace mrcnn::data
