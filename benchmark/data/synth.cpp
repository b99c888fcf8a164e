#include "benchmark/data/synth.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <thread>

#include "benchmark/data/coco_layout.h"
#include "benchmark/data/rng.h"
#include "logging/progress.h"

namespace mrcnn::data {

namespace {

constexpr int kDiscVertices = 48;
constexpr int kSubRows = 4;        // vertical supersampling of the rasterizer (x is exact)
constexpr double kCrossArm = 0.34;  // half-width of the cross's arms, relative to their length
constexpr int kPlacementTries = 40;

struct Rgb {
  double c[3];
};
// Class hues: red disc, green square, blue triangle, yellow cross.
constexpr Rgb kClassColour[4] = {{{205, 45, 45}}, {{45, 175, 60}}, {{50, 85, 215}}, {{230, 195, 35}}};

double round2(double v) { return std::round(v * 100.0) / 100.0; }

// The outline of a class's shape with circumradius 1 around the origin, rotated by `theta`.
std::vector<std::array<double, 2>> unit_outline(int cls, double theta) {
  std::vector<std::array<double, 2>> local;
  const double pi = std::numbers::pi;
  switch (cls) {
    case 0:
      for (int k = 0; k < kDiscVertices; ++k) {
        const double a = 2.0 * pi * k / kDiscVertices;
        local.push_back({std::cos(a), std::sin(a)});
      }
      break;
    case 1:
      for (int k = 0; k < 4; ++k) {
        const double a = pi / 4 + k * pi / 2;
        local.push_back({std::cos(a), std::sin(a)});
      }
      break;
    case 2:
      for (int k = 0; k < 3; ++k) {
        const double a = -pi / 2 + 2.0 * pi * k / 3;
        local.push_back({std::cos(a), std::sin(a)});
      }
      break;
    default: {
      const double a = kCrossArm, s = 1.0 / std::sqrt(1.0 + kCrossArm * kCrossArm);
      const double pts[12][2] = {{a, 1}, {a, a}, {1, a}, {1, -a}, {a, -a}, {a, -1},
                                 {-a, -1}, {-a, -a}, {-1, -a}, {-1, a}, {-a, a}, {-a, 1}};
      for (const auto& p : pts) local.push_back({p[0] * s, p[1] * s});
    }
  }
  const double c = std::cos(theta), sn = std::sin(theta);
  for (auto& p : local) p = {c * p[0] - sn * p[1], sn * p[0] + c * p[1]};
  return local;
}

// Fractional coverage of a polygon over the pixels of its bounding box: pixel (x, y) spans
// [x, x+1) x [y, y+1); coverage is exact along x and sampled on kSubRows rows along y.
struct Coverage {
  int64_t x0 = 0, y0 = 0, w = 0, h = 0;
  std::vector<float> a;
  float at(int64_t x, int64_t y) const {
    if (x < x0 || y < y0 || x >= x0 + w || y >= y0 + h) return 0.0f;
    return a[static_cast<size_t>((y - y0) * w + (x - x0))];
  }
};

Coverage rasterize(const std::vector<double>& poly, int64_t width, int64_t height) {
  const size_t n = poly.size() / 2;
  double minx = poly[0], maxx = poly[0], miny = poly[1], maxy = poly[1];
  for (size_t i = 1; i < n; ++i) {
    minx = std::min(minx, poly[2 * i]);
    maxx = std::max(maxx, poly[2 * i]);
    miny = std::min(miny, poly[2 * i + 1]);
    maxy = std::max(maxy, poly[2 * i + 1]);
  }
  Coverage cov;
  cov.x0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(minx)));
  cov.y0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(miny)));
  const int64_t x1 = std::min<int64_t>(width, static_cast<int64_t>(std::ceil(maxx)));
  const int64_t y1 = std::min<int64_t>(height, static_cast<int64_t>(std::ceil(maxy)));
  cov.w = std::max<int64_t>(0, x1 - cov.x0);
  cov.h = std::max<int64_t>(0, y1 - cov.y0);
  cov.a.assign(static_cast<size_t>(cov.w * cov.h), 0.0f);
  std::vector<double> xs;
  for (int64_t py = cov.y0; py < y1; ++py) {
    for (int s = 0; s < kSubRows; ++s) {
      const double y = static_cast<double>(py) + (s + 0.5) / kSubRows;
      xs.clear();
      for (size_t i = 0; i < n; ++i) {
        const double xa = poly[2 * i], ya = poly[2 * i + 1];
        const double xb = poly[2 * ((i + 1) % n)], yb = poly[2 * ((i + 1) % n) + 1];
        if ((ya <= y) != (yb <= y)) xs.push_back(xa + (y - ya) * (xb - xa) / (yb - ya));
      }
      std::sort(xs.begin(), xs.end());
      for (size_t k = 0; k + 1 < xs.size(); k += 2) {
        const double l = std::max(xs[k], static_cast<double>(cov.x0));
        const double r = std::min(xs[k + 1], static_cast<double>(x1));
        for (auto px = static_cast<int64_t>(std::floor(l)); static_cast<double>(px) < r; ++px) {
          const double ov = std::min(r, static_cast<double>(px + 1)) - std::max(l, static_cast<double>(px));
          if (ov > 0)
            cov.a[static_cast<size_t>((py - cov.y0) * cov.w + (px - cov.x0))] +=
                static_cast<float>(ov / kSubRows);
        }
      }
    }
  }
  return cov;
}

double shoelace(const std::vector<double>& p) {
  const size_t n = p.size() / 2;
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const size_t j = (i + 1) % n;
    s += p[2 * i] * p[2 * j + 1] - p[2 * j] * p[2 * i + 1];
  }
  return std::abs(s) / 2.0;
}

// Value noise: random values on a coarse grid, smoothly interpolated; in [-1, 1].
std::vector<float> value_noise(Rng& rng, int64_t width, int64_t height, int64_t cell) {
  const int64_t gw = width / cell + 2, gh = height / cell + 2;
  std::vector<double> grid(static_cast<size_t>(gw * gh));
  for (double& g : grid) g = rng.uniform(-1.0, 1.0);
  std::vector<float> out(static_cast<size_t>(width * height));
  auto smooth = [](double t) { return t * t * (3.0 - 2.0 * t); };
  for (int64_t y = 0; y < height; ++y) {
    const double fy = static_cast<double>(y) / static_cast<double>(cell);
    const auto iy = static_cast<int64_t>(fy);
    const double ty = smooth(fy - static_cast<double>(iy));
    for (int64_t x = 0; x < width; ++x) {
      const double fx = static_cast<double>(x) / static_cast<double>(cell);
      const auto ix = static_cast<int64_t>(fx);
      const double tx = smooth(fx - static_cast<double>(ix));
      auto g = [&](int64_t gx, int64_t gy) { return grid[static_cast<size_t>(gy * gw + gx)]; };
      const double top = g(ix, iy) * (1 - tx) + g(ix + 1, iy) * tx;
      const double bot = g(ix, iy + 1) * (1 - tx) + g(ix + 1, iy + 1) * tx;
      out[static_cast<size_t>(y * width + x)] = static_cast<float>(top * (1 - ty) + bot * ty);
    }
  }
  return out;
}

std::string image_file_name(int64_t image_id) {
  char b[32];
  std::snprintf(b, sizeof b, "%012lld.jpg", static_cast<long long>(image_id));
  return b;
}

// Image ids: training images 1..N, validation images N+1..N+M (disjoint, like COCO's).
int64_t image_id_of(const SynthOptions& o, SynthSplit split, int64_t index) {
  return split == SynthSplit::kTrain ? index + 1 : o.train_images + index + 1;
}

}  // namespace

// Each rule once, its message naming the command line's option and the value it refuses.
void SynthOptions::validate() const {
  const auto require = [](bool ok, const std::string& option_and_value, const char* expected) {
    if (!ok) throw std::invalid_argument(option_and_value + ": expected " + expected);
  };
  const auto n = [](int64_t v) { return std::to_string(v); };
  const auto g = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  require(train_images >= 0, "--train " + n(train_images), "a count >= 0");
  require(val_images >= 0, "--val " + n(val_images), "a count >= 0");
  require(train_images + val_images > 0, "--train 0 --val 0", "something to generate");
  require(width >= 32 && height >= 32 && width <= 8192 && height <= 8192, "--size " + n(width) + "x" + n(height),
          "N or WxH with sides from 32 to 8192 pixels");
  for (const auto& [w, h] : sizes)
    require(w >= 32 && h >= 32 && w <= 8192 && h <= 8192, "--sizes-from (an image of " + n(w) + "x" + n(h) + ")",
            "sides from 32 to 8192 pixels");
  require(1 <= min_objects && min_objects <= max_objects && max_objects <= 8,
          "--objects " + n(min_objects) + "-" + n(max_objects), "MIN-MAX with 1 <= MIN <= MAX <= 8");
  require(min_object_scale > 0.0 && min_object_scale <= max_object_scale && max_object_scale <= 0.9,
          "--scale " + g(min_object_scale) + "-" + g(max_object_scale), "MIN-MAX with 0 < MIN <= MAX <= 0.9");
  require(jpeg_quality >= 1 && jpeg_quality <= 100, "--quality " + n(jpeg_quality), "a JPEG quality from 1 to 100");
  require(threads >= 0 && threads <= 4096, "--threads " + n(threads), "a thread count from 0 (all cores) to 4096");
}

namespace {

// An object placed in an image: its annotation, its coverage and its colour.
struct PlacedObject {
  SynthObject object;
  Coverage coverage;
  Rgb colour;
};

// Whether any pixel that `cov` covers is already taken.
bool overlaps(const Coverage& cov, const std::vector<uint8_t>& occupied, int64_t W) {
  for (int64_t y = 0; y < cov.h; ++y)
    for (int64_t x = 0; x < cov.w; ++x)
      if (cov.a[static_cast<size_t>(y * cov.w + x)] > 0.0f && occupied[static_cast<size_t>((cov.y0 + y) * W + cov.x0 + x)])
        return true;
  return false;
}

// Marks the pixels `cov` covers and a one-pixel ring around them as taken.
void mark_taken(const Coverage& cov, std::vector<uint8_t>& occupied, int64_t W, int64_t H) {
  for (int64_t y = 0; y < cov.h; ++y)
    for (int64_t x = 0; x < cov.w; ++x) {
      if (cov.a[static_cast<size_t>(y * cov.w + x)] <= 0.0f) continue;
      for (int64_t dy = -1; dy <= 1; ++dy)
        for (int64_t dx = -1; dx <= 1; ++dx) {
          const int64_t yy = cov.y0 + y + dy, xx = cov.x0 + x + dx;
          if (yy >= 0 && yy < H && xx >= 0 && xx < W) occupied[static_cast<size_t>(yy * W + xx)] = 1;
        }
    }
}

// The annotation of a class-`cls` object with outline `poly`: its box (x, y, w, h) and area.
SynthObject object_of(int cls, std::vector<double> poly) {
  SynthObject obj;
  obj.category_id = cls + 1;
  double minx = poly[0], maxx = poly[0], miny = poly[1], maxy = poly[1];
  for (size_t i = 0; i < poly.size(); i += 2) {
    minx = std::min(minx, poly[i]);
    maxx = std::max(maxx, poly[i]);
    miny = std::min(miny, poly[i + 1]);
    maxy = std::max(maxy, poly[i + 1]);
  }
  obj.bbox = {minx, miny, round2(maxx - minx), round2(maxy - miny)};
  obj.area = round2(shoelace(poly));
  obj.polygon = std::move(poly);
  return obj;
}

// One object of a random class and colour, placed where it touches no other within
// kPlacementTries draws; none when every try clashed or did not fit.
std::optional<PlacedObject> place_object(const SynthOptions& o, int64_t W, int64_t H, Rng& rng,
                                        std::vector<uint8_t>& occupied) {
  const double short_side = static_cast<double>(std::min(W, H));
  const int cls = static_cast<int>(rng.below(4));
  Rgb colour = kClassColour[cls];
  const double gain = rng.uniform(0.85, 1.12);
  for (double& c : colour.c) c = std::clamp(c * gain + rng.uniform(-12.0, 12.0), 0.0, 255.0);
  for (int t = 0; t < kPlacementTries; ++t) {
    const double radius = rng.uniform(o.min_object_scale, o.max_object_scale) * short_side / 2.0;
    const double theta = rng.uniform(0.0, 2.0 * std::numbers::pi);
    const auto outline = unit_outline(cls, theta);
    double ux0 = 1e9, ux1 = -1e9, uy0 = 1e9, uy1 = -1e9;
    for (const auto& p : outline) {
      ux0 = std::min(ux0, p[0]);
      ux1 = std::max(ux1, p[0]);
      uy0 = std::min(uy0, p[1]);
      uy1 = std::max(uy1, p[1]);
    }
    const double cx_lo = 1.0 - radius * ux0, cx_hi = static_cast<double>(W) - 1.0 - radius * ux1;
    const double cy_lo = 1.0 - radius * uy0, cy_hi = static_cast<double>(H) - 1.0 - radius * uy1;
    if (cx_hi <= cx_lo || cy_hi <= cy_lo) continue;
    const double cx = rng.uniform(cx_lo, cx_hi), cy = rng.uniform(cy_lo, cy_hi);
    std::vector<double> poly;
    for (const auto& p : outline) {
      poly.push_back(round2(cx + radius * p[0]));
      poly.push_back(round2(cy + radius * p[1]));
    }
    Coverage cov = rasterize(poly, W, H);
    if (overlaps(cov, occupied, W)) continue;
    mark_taken(cov, occupied, W, H);
    return PlacedObject{object_of(cls, std::move(poly)), std::move(cov), colour};
  }
  return std::nullopt;
}

}  // namespace

std::array<int64_t, 2> synth_image_size(const SynthOptions& o, int64_t index) {
  if (o.sizes.empty()) return {o.width, o.height};
  return o.sizes[static_cast<size_t>(index % static_cast<int64_t>(o.sizes.size()))];
}

SynthImage render_synthetic_image(const SynthOptions& o, SynthSplit split, int64_t index) {
  const auto [W, H] = synth_image_size(o, index);
  Rng rng(seeding::synth_image_seed(o.seed, static_cast<int>(split), index));

  // Background: a low-saturation base colour with smooth texture.
  const double level = rng.uniform(85.0, 165.0);
  double base[3];
  for (double& b : base) b = level + rng.uniform(-14.0, 14.0);
  const double amplitude = rng.uniform(8.0, 18.0);
  const int64_t cell = std::max<int64_t>(8, std::min(W, H) / 6);
  const std::vector<float> noise = value_noise(rng, W, H, cell);

  // Objects: placed one by one so that no two touch (a one-pixel gap at least).
  SynthImage out;
  std::vector<uint8_t> occupied(static_cast<size_t>(W * H), 0);
  std::vector<Coverage> coverages;
  std::vector<Rgb> colours;
  const int64_t count = o.min_objects + static_cast<int64_t>(rng.below(
                                            static_cast<uint64_t>(o.max_objects - o.min_objects + 1)));
  for (int64_t k = 0; k < count; ++k) {
    std::optional<PlacedObject> placed = place_object(o, W, H, rng, occupied);
    if (!placed) continue;
    out.objects.push_back(std::move(placed->object));
    coverages.push_back(std::move(placed->coverage));
    colours.push_back(placed->colour);
  }

  // Compose: background, then each object blended by its coverage; fine grain everywhere.
  out.image = Image(H, W);
  for (int64_t y = 0; y < H; ++y) {
    uint8_t* row = out.image.row(y);
    for (int64_t x = 0; x < W; ++x) {
      const double tex = amplitude * noise[static_cast<size_t>(y * W + x)];
      double px[3];
      for (int c = 0; c < 3; ++c) px[c] = base[c] + tex;
      for (size_t k = 0; k < coverages.size(); ++k) {
        const double a = std::min(1.0f, coverages[k].at(x, y));
        if (a <= 0.0) continue;
        for (int c = 0; c < 3; ++c) px[c] = px[c] * (1.0 - a) + colours[k].c[c] * a;
      }
      const double grain = rng.uniform(-3.0, 3.0);
      for (int c = 0; c < 3; ++c)
        row[3 * x + c] = static_cast<uint8_t>(std::clamp(std::lround(px[c] + grain), 0L, 255L));
    }
  }
  return out;
}

namespace {

const char* split_name(SynthSplit s) { return s == SynthSplit::kTrain ? "train2017" : "val2017"; }

// One image to render: its split and its index there.
struct SynthJob {
  SynthSplit split;
  int64_t index;
};

// Renders and writes every job's JPEG on `o.threads` threads (a progress line on stderr); the
// objects of job j in objects[j]. The first error is rethrown once every thread has stopped.
std::vector<std::vector<SynthObject>> render_images(const SynthOptions& o, const CocoLayout& layout,
                                                    const std::vector<SynthJob>& jobs) {
  std::vector<std::vector<SynthObject>> objects(jobs.size());
  std::atomic<size_t> next{0}, done{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    for (;;) {
      const size_t j = next.fetch_add(1);
      if (j >= jobs.size() || failed.load()) return;
      try {
        const SynthJob& job = jobs[j];
        SynthImage img = render_synthetic_image(o, job.split, job.index);
        const std::filesystem::path file =
            layout.image_dir(split_name(job.split)) / image_file_name(image_id_of(o, job.split, job.index));
        write_file(file.string(), encode_jpeg(img.image, o.jpeg_quality));
        objects[j] = std::move(img.objects);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        failed = true;
        return;
      }
      done.fetch_add(1);
    }
  };
  const int nthreads = std::max(1, o.threads > 0 ? o.threads
                                                 : static_cast<int>(std::thread::hardware_concurrency()));
  logging::Progress progress("synth " + o.out_dir, static_cast<int64_t>(jobs.size()), "img",
                             o.progress ? stderr : nullptr);
  std::vector<std::thread> pool;
  for (int t = 0; t < nthreads; ++t) pool.emplace_back(work);
  while (done.load() < jobs.size() && !failed.load()) {
    progress.update(static_cast<int64_t>(done.load()));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  progress.finish();
  return objects;
}

// Writes the annotation file of `split` (its jobs' images and objects); the number of objects.
int64_t write_annotations(const SynthOptions& o, const CocoLayout& layout, SynthSplit split,
                          const std::vector<SynthJob>& jobs, const std::vector<std::vector<SynthObject>>& objects) {
  using nlohmann::json;
  json images = json::array(), annotations = json::array(), categories = json::array();
  for (size_t c = 0; c < kSynthCategories.size(); ++c)
    categories.push_back({{"id", static_cast<int64_t>(c + 1)}, {"name", kSynthCategories[c]},
                          {"supercategory", "shape"}});
  int64_t ann_id = 1;
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (jobs[j].split != split) continue;
    const int64_t image_id = image_id_of(o, split, jobs[j].index);
    const auto [w, h] = synth_image_size(o, jobs[j].index);
    images.push_back({{"id", image_id}, {"file_name", image_file_name(image_id)}, {"width", w}, {"height", h}});
    for (const SynthObject& obj : objects[j]) {
      annotations.push_back({{"id", ann_id++},
                             {"image_id", image_id},
                             {"category_id", obj.category_id},
                             {"segmentation", json::array({obj.polygon})},
                             {"area", obj.area},
                             {"bbox", obj.bbox},
                             {"iscrowd", 0}});
    }
  }
  char desc[256];
  const std::string size = o.sizes.empty() ? "--size " + std::to_string(o.width) + "x" + std::to_string(o.height)
                                           : "--sizes-from (" + std::to_string(o.sizes.size()) + " sizes)";
  std::snprintf(desc, sizeof desc, "mlperf-maskrcnn synthetic shapes: --train %lld --val %lld %s --seed %llu",
                static_cast<long long>(o.train_images), static_cast<long long>(o.val_images), size.c_str(),
                static_cast<unsigned long long>(o.seed));
  json doc = {{"info", {{"description", desc}, {"version", "1.0"}}},
              {"licenses", json::array()},
              {"images", std::move(images)},
              {"annotations", std::move(annotations)},
              {"categories", std::move(categories)}};
  const std::string text = doc.dump();
  write_file(layout.annotation_file(split_name(split)).string(), std::vector<uint8_t>(text.begin(), text.end()));
  return ann_id - 1;
}

}  // namespace

SynthSummary write_synthetic_dataset(const SynthOptions& o) {
  o.validate();
  if (o.out_dir.empty()) throw std::invalid_argument("synth: the output folder (--out) is required");
  namespace fs = std::filesystem;
  const auto start = std::chrono::steady_clock::now();
  const CocoLayout layout{fs::path(o.out_dir)};
  std::error_code ec;
  for (const fs::path& dir : {layout.annotation_file("train2017").parent_path(), layout.image_dir("train2017"),
                              layout.image_dir("val2017")}) {
    fs::create_directories(dir, ec);
    if (ec) throw std::runtime_error(dir.string() + ": cannot create folder (" + ec.message() + ")");
  }
  std::vector<SynthJob> jobs;
  for (int64_t i = 0; i < o.train_images; ++i) jobs.push_back({SynthSplit::kTrain, i});
  for (int64_t i = 0; i < o.val_images; ++i) jobs.push_back({SynthSplit::kVal, i});
  const std::vector<std::vector<SynthObject>> objects = render_images(o, layout, jobs);

  SynthSummary summary;
  summary.train_objects = write_annotations(o, layout, SynthSplit::kTrain, jobs, objects);
  summary.val_objects = write_annotations(o, layout, SynthSplit::kVal, jobs, objects);
  summary.train_images = o.train_images;
  summary.val_images = o.val_images;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace mrcnn::data
