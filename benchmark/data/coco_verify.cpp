#include "benchmark/data/coco_verify.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "benchmark/data/coco_index.h"
#include "benchmark/data/coco_layout.h"
#include "benchmark/data/image_codec.h"
#include "eval/coco.h"
#include "logging/progress.h"
#include "logging/sha256.h"

namespace mrcnn::data {
namespace {

namespace fs = std::filesystem;

// The COCO 2017 release, as published (the files' sizes and SHA-256 as downloaded).
struct ReleaseFile {
  const char* split;
  uint64_t bytes;
  const char* sha256;
  int64_t images;
  int64_t annotations;
  int64_t images_for_training;  // -1: not a training split
};
constexpr std::array<ReleaseFile, 2> kRelease{{
    {"train2017", 469785474, "610fce4944abdeb15354cc765333805529359d12d88f2f711393ca586901d01d", 118287, 860001, 117266},
    {"val2017", 19987840, "e8c7f7908f1d7278341fae127d0da654f102f11bd7b21d8aeefa635b8c810b6f", 5000, 36781, -1},
}};
// COCO's 80 category ids: 1..90 without 12, 26, 29, 30, 45, 66, 68, 69, 71, 83.
std::set<uint64_t> coco_category_ids() {
  std::set<uint64_t> ids;
  for (uint64_t i = 1; i <= 90; ++i) ids.insert(i);
  for (uint64_t gap : {12, 26, 29, 30, 45, 66, 68, 69, 71, 83}) ids.erase(gap);
  return ids;
}

const ReleaseFile* release_of(const std::string& split) {
  for (const ReleaseFile& r : kRelease)
    if (split == r.split) return &r;
  return nullptr;
}

// Problems of one class: a count and the first few names.
class Problems {
 public:
  void add(std::string what) {
    std::lock_guard lock(mu_);
    ++count_;
    if (first_.size() < 5) first_.push_back(std::move(what));
  }
  // "<count> <title>: a; b; ... (and N more)", or "" when there are none.
  std::string line(const std::string& title) const {
    if (count_ == 0) return "";
    std::ostringstream s;
    s << count_ << " " << title << ": ";
    for (size_t k = 0; k < first_.size(); ++k) s << (k ? "; " : "") << first_[k];
    if (count_ > static_cast<int64_t>(first_.size())) s << " (and " << count_ - static_cast<int64_t>(first_.size()) << " more)";
    return s.str();
  }

 private:
  std::mutex mu_;
  int64_t count_ = 0;
  std::vector<std::string> first_;
};

struct ImageProblems {
  Problems missing, undecodable, wrong_size;
};

// Reads every image's header and decodes it to the end (at 1/8 scale where the codec can: the
// whole entropy-coded stream is still read, so truncation and corruption show).
void check_images(const eval::Dataset& coco, const fs::path& image_dir, const VerifyOptions& o, ImageProblems& p,
                  int64_t& checked) {
  const size_t n = coco.images.size();
  std::atomic<size_t> next{0}, done{0};
  auto work = [&]() {
    for (size_t i = next++; i < n; i = next++) {
      const eval::Image& im = coco.images[i];
      const std::string path = (image_dir / im.file_name).string();
      try {
        std::error_code ec;
        if (!fs::is_regular_file(path, ec)) {
          p.missing.add(path);
        } else {
          const std::vector<uint8_t> bytes = read_file(path);
          const ImageHeader h = read_image_header(bytes, path);
          if (h.width != im.width || h.height != im.height) {
            p.wrong_size.add(path + " is " + std::to_string(h.width) + "x" + std::to_string(h.height) + ", its record " +
                             std::to_string(im.width) + "x" + std::to_string(im.height));
          } else {
            decode_image(bytes, path,
                         {.target_height = std::max<int64_t>(1, h.height / 8),
                          .target_width = std::max<int64_t>(1, h.width / 8),
                          .dct_downscale = true});
          }
        }
      } catch (const std::exception& e) {
        p.undecodable.add(e.what());
      }
      ++done;
    }
  };
  const int threads = std::max(1, std::min<int>(o.threads, static_cast<int>(std::max<size_t>(n, 1))));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  logging::Progress bar("verify " + image_dir.filename().string(), static_cast<int64_t>(n), "img",
                        o.progress ? stderr : nullptr, 1.0);
  while (done.load() < n) {
    bar.update(static_cast<int64_t>(done.load()));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (std::thread& t : pool) t.join();
  bar.update(static_cast<int64_t>(n));
  bar.finish();
  checked = static_cast<int64_t>(n);
}

void verify_split(const VerifyOptions& o, const std::string& split, VerifyReport& report) {
  const auto t0 = std::chrono::steady_clock::now();
  const CocoLayout layout{o.root};
  SplitReport s;
  s.split = split;
  s.annotation_file = layout.annotation_file(split).string();
  std::error_code ec;
  if (!fs::is_regular_file(s.annotation_file, ec)) {
    report.errors.push_back(s.annotation_file + ": missing (a COCO folder has annotations/instances_<split>.json)");
    return;
  }
  s.bytes = fs::file_size(s.annotation_file, ec);
  s.sha256 = logging::sha256_file(s.annotation_file);
  const ReleaseFile* release = release_of(split);
  s.release_file = release && s.bytes == release->bytes && s.sha256 == release->sha256;

  eval::Dataset coco;
  try {
    coco = eval::load_dataset(s.annotation_file);
    check_instances_file(coco, s.annotation_file);
  } catch (const std::exception& e) {
    report.errors.push_back(e.what());
    report.splits.push_back(s);
    return;
  }
  s.images = static_cast<int64_t>(coco.images.size());
  s.annotations = static_cast<int64_t>(coco.annotations.size());
  s.categories = static_cast<int64_t>(coco.categories.size());
  for (const eval::Annotation& a : coco.annotations) s.crowd += a.iscrowd;
  try {  // the training selection, with the reference's settings
    s.images_for_training = build_coco_arrays(coco, {.remove_images_without_annotations = true, .legacy_plus_one = true},
                                              s.annotation_file, false)
                                .stats.images_kept;
  } catch (const std::exception& e) {
    report.errors.push_back(e.what());
  }

  if (release && !s.release_file) {
    std::vector<std::string> differs;
    if (s.bytes != release->bytes || s.sha256 != release->sha256)
      differs.push_back(std::to_string(s.bytes) + " bytes, SHA-256 " + s.sha256.substr(0, 12) + "... (the release: " +
                        std::to_string(release->bytes) + " bytes, " + std::string(release->sha256).substr(0, 12) + "...)");
    if (s.images != release->images) differs.push_back(std::to_string(s.images) + " images (" + std::to_string(release->images) + ")");
    if (s.annotations != release->annotations)
      differs.push_back(std::to_string(s.annotations) + " annotations (" + std::to_string(release->annotations) + ")");
    if (release->images_for_training >= 0 && s.images_for_training != release->images_for_training)
      differs.push_back(std::to_string(s.images_for_training) + " images to train on (" +
                        std::to_string(release->images_for_training) + ")");
    std::set<uint64_t> ids;
    for (const eval::Category& c : coco.categories) ids.insert(c.id);
    if (ids != coco_category_ids()) differs.push_back(std::to_string(ids.size()) + " categories, not COCO's 80 ids");
    std::string line = s.annotation_file + " is not the COCO 2017 release's: ";
    for (size_t k = 0; k < differs.size(); ++k) line += (k ? "; " : "") + differs[k];
    (o.release ? report.errors : report.notes).push_back(line);
  }

  ImageProblems p;
  check_images(coco, layout.image_dir(split), o, p, s.images_checked);
  const std::string dir = layout.image_dir(split).string();
  for (const std::string& line : {p.missing.line("images missing from " + dir),
                                  p.undecodable.line("images that do not decode in " + dir),
                                  p.wrong_size.line("images whose size differs from their annotation record in " + dir)})
    if (!line.empty()) report.errors.push_back(line);
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report.splits.push_back(s);
}

}  // namespace

std::string VerifyReport::text() const {
  std::ostringstream s;
  for (const SplitReport& r : splits) {
    s << r.split << ": " << r.annotation_file << " (" << r.bytes << " bytes, SHA-256 " << r.sha256 << ")\n"
      << "  " << r.images << " images, " << r.annotations << " annotations (" << r.crowd << " crowd), " << r.categories
      << " categories; " << r.images_for_training << " images to train on; " << r.images_checked
      << " image files checked in " << static_cast<int64_t>(r.seconds + 0.5) << " s\n"
      << "  " << (r.release_file ? "the COCO 2017 release's file" : "not the COCO 2017 release's file") << "\n";
  }
  for (const std::string& n : notes) s << "note: " << n << "\n";
  for (const std::string& e : errors) s << "error: " << e << "\n";
  s << (ok() ? "usable" : "NOT usable: " + std::to_string(errors.size()) + " problem(s)") << "\n";
  return s.str();
}

VerifyReport verify_coco(const VerifyOptions& options) {
  if (options.root.empty()) throw std::invalid_argument("verify_coco: no folder");
  if (options.splits.empty()) throw std::invalid_argument("verify_coco: no split");
  VerifyReport report;
  std::error_code ec;
  if (!fs::is_directory(options.root, ec)) {
    report.errors.push_back(options.root + ": not a folder");
    return report;
  }
  for (const std::string& split : options.splits) verify_split(options, split, report);
  return report;
}

}  // namespace mrcnn::data
