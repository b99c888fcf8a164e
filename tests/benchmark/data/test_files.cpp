// Everything that touches files: the JPEG/PNG codecs and their errors on bad files, the synthetic
// dataset writer (determinism), and CocoDataset (the reference's filtering, label map, loading,
// and clear errors on bad annotations and images). Datasets are written to a temporary folder.
#include <gtest/gtest.h>

#include <unistd.h>

#include <ATen/ops/equal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "benchmark/data/coco_dataset.h"
#include "benchmark/data/image_codec.h"
#include "benchmark/data/loader.h"
#include "benchmark/data/sampler.h"
#include "benchmark/data/synth.h"
#include "tests/benchmark/data/batch_checks.h"
#include "eval/coco.h"

namespace mrcnn::data {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("mrcnn_data_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

Image pattern(int64_t h, int64_t w) {
  Image im(h, w);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      im.row(y)[3 * x] = static_cast<uint8_t>(4 * x);
      im.row(y)[3 * x + 1] = static_cast<uint8_t>(3 * y);
      im.row(y)[3 * x + 2] = static_cast<uint8_t>(128 + ((x / 8 + y / 8) % 2) * 60);
    }
  return im;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Runs f, expecting std::runtime_error whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected an error mentioning " << *parts.begin();
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// ---- codecs ----------------------------------------------------------------------------------

TEST(Codec, JpegAndPngRoundTrips) {
  const Image im = pattern(48, 64);
  const auto jpeg = encode_jpeg(im, 100);
  const ImageHeader h = read_image_header(jpeg, "x.jpg");
  EXPECT_EQ(h.format, ImageFormat::kJpeg);
  EXPECT_EQ(h.height, 48);
  EXPECT_EQ(h.width, 64);
  const Image back = decode_image(jpeg, "x.jpg");
  ASSERT_EQ(back.rgb.size(), im.rgb.size());
  int max_diff = 0;
  for (size_t i = 0; i < im.rgb.size(); ++i) max_diff = std::max(max_diff, std::abs(back.rgb[i] - im.rgb[i]));
  EXPECT_LE(max_diff, 8);
  EXPECT_EQ(encode_jpeg(im, 90), encode_jpeg(im, 90));  // deterministic

  const auto png = encode_png(im);
  EXPECT_EQ(read_image_header(png, "x.png").format, ImageFormat::kPng);
  EXPECT_EQ(read_image_header(png, "x.png").width, 64);
  EXPECT_EQ(decode_image(png, "x.png").rgb, im.rgb);
}

TEST(Codec, DctDownscaleOnlyWhenTheTargetIsAtMostHalf) {
  const auto jpeg = encode_jpeg(pattern(48, 64), 95);
  EXPECT_EQ(decode_image(jpeg, "x", {12, 16, true}).width, 16);    // 1/4
  EXPECT_EQ(decode_image(jpeg, "x", {20, 30, true}).width, 32);    // 1/2 still covers 30
  EXPECT_EQ(decode_image(jpeg, "x", {30, 40, true}).width, 64);    // more than half: full size
  EXPECT_EQ(decode_image(jpeg, "x", {12, 16, false}).width, 64);   // switched off
  EXPECT_EQ(decode_image(jpeg, "x", {12, 16, true}).height, 12);
}

TEST(Codec, BadFilesGiveOneClearErrorNamingTheFile) {
  TempDir dir("codec");
  expect_error([&] { read_file(dir.file("missing.jpg")); }, {"missing.jpg", "cannot open"});
  write_text(dir.file("empty.jpg"), "");
  expect_error([&] { read_file(dir.file("empty.jpg")); }, {"empty.jpg", "empty"});

  const auto jpeg = encode_jpeg(pattern(48, 64), 90);
  const std::vector<uint8_t> truncated(jpeg.begin(), jpeg.begin() + static_cast<long>(jpeg.size() * 6 / 10));
  expect_error([&] { decode_image(truncated, "cut.jpg"); }, {"cut.jpg", "truncated"});
  std::vector<uint8_t> garbage = jpeg;
  for (size_t i = 3; i < 60; ++i) garbage[i] = static_cast<uint8_t>(i * 37);
  expect_error([&] { decode_image(garbage, "bad.jpg"); }, {"bad.jpg", "corrupt"});
  expect_error([&] { read_image_header(garbage, "bad.jpg"); }, {"bad.jpg"});

  const auto png = encode_png(pattern(20, 30));
  std::vector<uint8_t> bad_crc = png;
  bad_crc[bad_crc.size() - 20] ^= 0x5A;  // inside the last IDAT chunk's data (or its CRC)
  expect_error([&] { decode_image(bad_crc, "crc.png"); }, {"crc.png", "PNG"});
  std::vector<uint8_t> bad_header = png;
  bad_header[29] ^= 0x01;  // the IHDR chunk's CRC
  expect_error([&] { decode_image(bad_header, "ihdr.png"); }, {"ihdr.png", "CRC"});
  std::vector<uint8_t> huge = png;  // IHDR width 20000: refused before any pixel memory exists
  huge[16] = 0, huge[17] = 0, huge[18] = 0x4E, huge[19] = 0x20;
  expect_error([&] { decode_image(huge, "huge.png"); }, {"huge.png", "20000x20 pixels, more than 16384 a side"});
  expect_error([&] { read_image_header(huge, "huge.png"); }, {"huge.png", "more than 16384"});
  const std::vector<uint8_t> cut_png(png.begin(), png.begin() + static_cast<long>(png.size() / 2));
  expect_error([&] { decode_image(cut_png, "cut.png"); }, {"cut.png", "truncated"});

  const std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
  expect_error([&] { decode_image(text, "notes.jpg"); }, {"notes.jpg", "not a JPEG or PNG"});
}

// ---- synthetic dataset -------------------------------------------------------------------------

std::map<std::string, std::string> read_tree(const fs::path& root) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    files[fs::relative(e.path(), root).string()] = ss.str();
  }
  return files;
}

SynthOptions small_synth(const fs::path& out, int threads) {
  SynthOptions o;
  o.out_dir = out.string();
  o.train_images = 12;
  o.val_images = 4;
  o.width = 96;
  o.height = 64;
  o.seed = 5;
  o.threads = threads;
  o.progress = false;
  return o;
}

TEST(Synth, ByteIdenticalForTheSameArgumentsWhateverTheThreads) {
  TempDir dir("synth");
  const SynthSummary s = write_synthetic_dataset(small_synth(dir.path() / "a", 1));
  write_synthetic_dataset(small_synth(dir.path() / "b", 3));
  const auto a = read_tree(dir.path() / "a"), b = read_tree(dir.path() / "b");
  EXPECT_EQ(a.size(), 12u + 4u + 2u);
  EXPECT_TRUE(a == b) << "two runs with the same arguments differ";
  EXPECT_TRUE(a.count("annotations/instances_train2017.json"));
  EXPECT_TRUE(a.count("val2017/000000000013.jpg"));  // validation ids follow the training ones
  EXPECT_GE(s.train_objects, 12);
  EXPECT_LE(s.train_objects, 36);

  SynthOptions other = small_synth(dir.path() / "c", 2);
  other.seed = 6;
  write_synthetic_dataset(other);
  EXPECT_NE(read_tree(dir.path() / "c").at("train2017/000000000001.jpg"), a.at("train2017/000000000001.jpg"));
}

TEST(Synth, AnnotationsAreExactPolygonsInsideTheImage) {
  SynthOptions o = small_synth("unused", 1);
  int64_t objects = 0;
  for (int64_t i = 0; i < 20; ++i) {
    const SynthImage img = render_synthetic_image(o, SynthSplit::kTrain, i);
    EXPECT_EQ(img.image.width, 96);
    ASSERT_GE(img.objects.size(), 1u);
    ASSERT_LE(img.objects.size(), 3u);
    for (const SynthObject& obj : img.objects) {
      ++objects;
      EXPECT_GE(obj.category_id, 1);
      EXPECT_LE(obj.category_id, 4);
      EXPECT_GE(obj.polygon.size(), 6u);
      for (size_t k = 0; k < obj.polygon.size(); k += 2) {
        EXPECT_GE(obj.polygon[k], 0.0);
        EXPECT_LE(obj.polygon[k], 96.0);
        EXPECT_GE(obj.polygon[k + 1], 0.0);
        EXPECT_LE(obj.polygon[k + 1], 64.0);
      }
      EXPECT_GE(obj.bbox[2], 0.2 * 64);  // extent at least ~25% of the short side
      EXPECT_GT(obj.area, 0.25 * obj.bbox[2] * obj.bbox[3]);
      EXPECT_LE(obj.area, obj.bbox[2] * obj.bbox[3] + 1e-6);
    }
  }
  EXPECT_GE(objects, 30);
  o.max_objects = 9;
  EXPECT_THROW(o.validate(), std::invalid_argument);
}

// With sizes (synth --sizes-from): image i of each split takes sizes[i mod n], in the JPEG, the
// annotation record and the objects' bounds, in both orientations.
TEST(Synth, ImagesTakeTheGivenSizesInTurn) {
  TempDir dir("synth-sizes");
  SynthOptions o = small_synth(dir.path() / "s", 2);
  o.sizes = {{96, 64}, {48, 80}, {64, 64}};
  write_synthetic_dataset(o);
  std::ifstream annotations(dir.path() / "s/annotations/instances_train2017.json");
  const nlohmann::json train = nlohmann::json::parse(annotations);
  ASSERT_EQ(train["images"].size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    const auto& want = o.sizes[i % 3];
    EXPECT_EQ(train["images"][i]["width"], want[0]) << i;
    EXPECT_EQ(train["images"][i]["height"], want[1]) << i;
    const SynthImage img = render_synthetic_image(o, SynthSplit::kTrain, static_cast<int64_t>(i));
    EXPECT_EQ(img.image.width, want[0]);
    EXPECT_EQ(img.image.height, want[1]);
    for (const SynthObject& obj : img.objects) {
      EXPECT_LE(obj.bbox[0] + obj.bbox[2], static_cast<double>(want[0]));
      EXPECT_LE(obj.bbox[1] + obj.bbox[3], static_cast<double>(want[1]));
    }
  }
  o.sizes.push_back({16, 64});
  EXPECT_THROW(o.validate(), std::invalid_argument);
}

// ---- CocoDataset -------------------------------------------------------------------------------

// A hand-made annotation file exercising every filtering rule. Category ids 7 and 3 (unsorted,
// not contiguous) become labels 2 and 1.
constexpr const char* kFilterJson = R"({
 "images": [
  {"id": 6, "file_name": "6.jpg", "width": 64, "height": 48},
  {"id": 1, "file_name": "1.jpg", "width": 64, "height": 48},
  {"id": 2, "file_name": "2.jpg", "width": 64, "height": 48},
  {"id": 3, "file_name": "3.jpg", "width": 64, "height": 48},
  {"id": 4, "file_name": "4.jpg", "width": 48, "height": 64},
  {"id": 5, "file_name": "5.jpg", "width": 64, "height": 48}],
 "categories": [{"id": 7, "name": "seven"}, {"id": 3, "name": "three"}],
 "annotations": [
  {"id": 10, "image_id": 1, "category_id": 7, "bbox": [10, 10, 20, 10], "area": 200, "iscrowd": 0,
   "segmentation": [[10, 10, 30, 10, 30, 20, 10, 20]]},
  {"id": 11, "image_id": 1, "category_id": 3, "bbox": [0, 0, 40, 40], "area": 1600, "iscrowd": 1,
   "segmentation": {"size": [48, 64], "counts": [0, 3072]}},
  {"id": 12, "image_id": 3, "category_id": 3, "bbox": [5, 5, 1, 1], "area": 1, "iscrowd": 0,
   "segmentation": [[5, 5, 6, 5, 6, 6]]},
  {"id": 13, "image_id": 4, "category_id": 3, "bbox": [0, 0, 40, 40], "area": 1600, "iscrowd": 1,
   "segmentation": {"size": [64, 48], "counts": [0, 3072]}},
  {"id": 14, "image_id": 5, "category_id": 3, "bbox": [1, 2, 30, 20], "area": 300, "iscrowd": 0,
   "segmentation": [[1, 2, 31, 2], [1, 2, 31, 2, 31, 22, 1, 22]]},
  {"id": 15, "image_id": 5, "category_id": 7, "bbox": [40, 10, 10, 10], "area": 100, "iscrowd": 0,
   "segmentation": []},
  {"id": 16, "image_id": 6, "category_id": 7, "bbox": [50, 40, 30, 30], "area": 400, "iscrowd": 0,
   "segmentation": [[50, 40, 63, 40, 63, 47, 50, 47]]}]
})";

void write_images(const TempDir& dir, const std::vector<std::pair<int, ImageSize>>& images) {
  fs::create_directories(dir.path() / "img");
  for (const auto& [id, size] : images)
    write_file(dir.file("img/" + std::to_string(id) + ".jpg"), encode_jpeg(pattern(size.height, size.width), 95));
}

CocoDatasetOptions options_for(const TempDir& dir, bool train) {
  CocoDatasetOptions o;
  o.annotation_file = dir.file("instances.json");
  o.image_dir = dir.file("img");
  o.remove_images_without_annotations = train;
  o.transform = train ? TransformOptions::mlperf_train() : TransformOptions::mlperf_eval();
  o.transform.min_size = 96;
  o.transform.max_size = 200;
  o.progress = false;
  return o;
}

TEST(CocoDataset, TrainingFilterFollowsTheReference) {
  TempDir dir("coco_filter");
  write_text(dir.file("instances.json"), kFilterJson);
  const CocoDataset train(options_for(dir, true));
  // Kept: 1 (a real object), 4 (only a crowd box, which still counts), 5, 6. Dropped: 2 (no
  // annotation), 3 (only a 1-pixel box).
  ASSERT_EQ(train.size(), 4);
  EXPECT_EQ(train.image_id(0), 1);
  EXPECT_EQ(train.image_id(1), 4);
  EXPECT_EQ(train.image_id(3), 6);
  const CocoDatasetStats& s = train.stats();
  EXPECT_EQ(s.images_in_file, 6);
  EXPECT_EQ(s.images_dropped_no_annotations, 1);
  EXPECT_EQ(s.images_dropped_only_tiny_boxes, 1);
  EXPECT_EQ(s.crowd_annotations_dropped, 2);
  EXPECT_EQ(s.polygons_skipped_too_few_points, 1);
  EXPECT_EQ(s.instances_without_polygon, 1);
  EXPECT_EQ(s.instances_kept, 4);
  EXPECT_NE(s.summary().find("4 of 6 images kept"), std::string::npos) << s.summary();

  EXPECT_EQ(train.num_classes(), 3);
  EXPECT_EQ(train.category_ids(), (std::vector<uint64_t>{3, 7}));
  EXPECT_EQ(train.label_of_category_id(7), 2);
  EXPECT_EQ(train.category_id_of_label(1), 3u);
  EXPECT_THROW(train.category_id_of_label(3), std::out_of_range);
  EXPECT_EQ(train.aspect_groups(), (std::vector<int>{0, 1, 0, 0}));

  const InstanceTargets one = train.source_targets(0);
  EXPECT_EQ(one.labels, (std::vector<int64_t>{2}));
  EXPECT_EQ(one.boxes, (std::vector<float>{10, 10, 29, 19}));  // x + w - 1
  EXPECT_EQ(train.source_targets(1).size(), 0);                 // crowd only
  const InstanceTargets five = train.source_targets(2);
  EXPECT_EQ(five.instance_offsets, (std::vector<int64_t>{0, 1, 1}));  // second one has no polygon
  const InstanceTargets six = train.source_targets(3);
  EXPECT_EQ(six.boxes, (std::vector<float>{50, 40, 63, 47}));  // clipped to (W-1, H-1)

  const CocoDataset val(options_for(dir, false));
  EXPECT_EQ(val.size(), 6);  // validation keeps every image
  EXPECT_EQ(val.stats().boxes_dropped_empty_after_clip, 1);  // image 3's 1-pixel box
}

TEST(CocoDataset, LoadsResizedFlippedSamplesAndBatches) {
  TempDir dir("coco_load");
  write_text(dir.file("instances.json"), kFilterJson);
  write_images(dir, {{1, {48, 64}}, {4, {64, 48}}, {5, {48, 64}}, {6, {48, 64}}});
  CocoDatasetOptions o = options_for(dir, true);
  o.transform.flip_probability = 1.0;
  auto ds = std::make_shared<const CocoDataset>(o);
  EXPECT_EQ(ds->resized_size(0), (ImageSize{96, 128}));
  EXPECT_EQ(ds->resized_size(1), (ImageSize{128, 96}));
  std::vector<float> slot(3 * 128 * 128, -1.0f);
  const SampleTargets t = ds->load(0, {1, 0}, slot.data(), 128, 128);
  EXPECT_TRUE(t.flipped);
  EXPECT_EQ(t.image_id, 1);
  EXPECT_EQ(t.original, (ImageSize{48, 64}));
  // Box (10, 10, 29, 19) scaled by 2 -> (20, 20, 58, 38), flipped in 128: (128-58-1, .., 128-20-1).
  EXPECT_EQ(t.targets.boxes, (std::vector<float>{69, 20, 107, 38}));
  EXPECT_DOUBLE_EQ(t.targets.coords[0], 128.0 - 20.0 - 1.0);
  EXPECT_EQ(slot[100 * 128 + 5], 0.0f);  // padding below the image
  EXPECT_NE(slot[5], 0.0f);

  const BatchSampler sampler(ds->aspect_groups(), {.batch_size = 2, .shuffle = false});
  Loader loader(ds, sampler.epoch(1, 0), {1, 0}, {.num_threads = 2});
  int64_t images = 0;
  while (auto b = loader.next()) {
    images += b->size();
    EXPECT_EQ(b->images.size(2) % 32, 0);
    EXPECT_EQ(b->images.size(3) % 32, 0);
  }
  EXPECT_EQ(images, 4);
}

TEST(CocoDataset, SyntheticDatasetLoadsEndToEnd) {
  TempDir dir("coco_synth");
  SynthOptions so = small_synth(dir.path(), 2);
  write_synthetic_dataset(so);
  auto o = CocoDatasetOptions::coco(dir.path().string(), "train2017", true);
  o.progress = false;
  auto ds = std::make_shared<const CocoDataset>(o);
  EXPECT_EQ(ds->size(), 12);
  EXPECT_EQ(ds->num_classes(), 5);
  EXPECT_EQ(ds->category_names()[0], "disc");
  EXPECT_EQ(ds->resized_size(0), (ImageSize{800, 1200}));
  const BatchSampler sampler(ds->aspect_groups(), {.batch_size = 2});
  Loader loader(ds, sampler.epoch(3, 1), {3, 1}, {.num_threads = 2});
  const auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->images.sizes(), (at::IntArrayRef{2, 3, 800, 1216}));
  EXPECT_GE(b->gt_counts.min().item<int64_t>(), 1);
  for (const auto& p : b->gt_polygons) EXPECT_NO_THROW(p.check());
}

TEST(CocoDataset, BadAnnotationsAndImagesNameTheFile) {
  TempDir dir("coco_bad");
  const CocoDatasetOptions o = options_for(dir, true);
  const std::string images = R"("images": [{"id": 1, "file_name": "1.jpg", "width": 64, "height": 48}],
    "categories": [{"id": 1, "name": "a"}],)";
  auto with_annotation = [&](const std::string& ann) {
    write_text(o.annotation_file, "{" + images + R"("annotations": [)" + ann + "]}");
  };
  with_annotation(R"({"id": 9, "image_id": 1, "category_id": 1, "bbox": [1, 1, 5, 5], "area": 25, "iscrowd": 0,
                      "segmentation": {"size": [48, 64], "counts": [0, 3072]}})");
  expect_error([&] { CocoDataset d(o); }, {"instances.json", "annotation id 9", "RLE"});
  with_annotation(R"({"id": 9, "image_id": 1, "category_id": 1, "bbox": [1, 1, -5, 5], "area": 25, "iscrowd": 0})");
  expect_error([&] { CocoDataset d(o); }, {"instances.json", "negative"});
  with_annotation(R"({"id": 9, "image_id": 1, "category_id": 1, "bbox": [1, NaN, 5, 5], "area": 25, "iscrowd": 0})");
  expect_error([&] { CocoDataset d(o); }, {"instances.json"});
  write_text(o.annotation_file, "{" + images + R"("annotations": [)");
  expect_error([&] { CocoDataset d(o); }, {"instances.json"});

  // Image files: missing, of another size than the JSON says, truncated.
  with_annotation(R"({"id": 9, "image_id": 1, "category_id": 1, "bbox": [1, 1, 5, 5], "area": 25, "iscrowd": 0,
                      "segmentation": [[1, 1, 6, 1, 6, 6]]})");
  const CocoDataset d(o);
  std::vector<float> slot(3 * 128 * 96);
  expect_error([&] { d.load(0, {}, slot.data(), 96, 128); }, {"1.jpg", "cannot open"});
  fs::create_directories(dir.path() / "img");
  write_file(dir.file("img/1.jpg"), encode_jpeg(pattern(50, 64), 90));
  expect_error([&] { d.load(0, {}, slot.data(), 96, 128); }, {"1.jpg", "64x50", "64x48"});
  const auto jpeg = encode_jpeg(pattern(48, 64), 90);
  write_file(dir.file("img/1.jpg"), std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + static_cast<long>(jpeg.size() / 2)));
  expect_error([&] { d.load(0, {}, slot.data(), 96, 128); }, {"1.jpg", "truncated"});

  // Image entries that could never be read: no file name, a size no image has.
  const std::string ann = R"("categories": [{"id": 1, "name": "a"}], "annotations": [{"id": 9, "image_id": 1,
      "category_id": 1, "bbox": [1, 1, 5, 5], "area": 25, "iscrowd": 0, "segmentation": [[1, 1, 6, 1, 6, 6]]}]})";
  write_text(o.annotation_file, R"({"images": [{"id": 1, "width": 64, "height": 48}],)" + ann);
  expect_error([&] { CocoDataset bad(o); }, {"instances.json", "image id 1 has no file_name"});
  write_text(o.annotation_file, R"({"images": [{"id": 1, "file_name": "1.jpg", "width": 64, "height": 100000}],)" + ann);
  expect_error([&] { CocoDataset bad(o); }, {"instances.json", "image id 1", "64x100000", "1..16384"});
}

// Genuine COCO images (tests/benchmark/data/coco_real) padded to fixed shapes: per aspect group,
// the batch padded to a shape holds the batch padded to its own size in its top-left corner, bit
// for bit, and zeros beyond; the targets are the same.
TEST(CocoDataset, RealImagesPaddedToAShapeAreTheBatchOwnPaddingAndZerosBeyond) {
  auto o = CocoDatasetOptions::coco(MRCNN_SOURCE_DIR "/tests/benchmark/data/coco_real", "train2017", true);
  o.transform.min_size = 200;  // small, so that the test decodes little
  o.transform.max_size = 333;
  o.progress = false;
  auto ds = std::make_shared<const CocoDataset>(o);
  const BatchOptions shaped_options{.shapes = {{256, 384}, {384, 256}}};  // own: 224 x 352, 320 x 224
  std::map<int, std::vector<int64_t>> by_group;
  for (int64_t i = 0; i < ds->size(); ++i) by_group[ds->aspect_groups()[static_cast<size_t>(i)]].push_back(i);
  ASSERT_EQ(by_group.size(), 2u) << "the cut has landscape and portrait images";
  for (const auto& [group, indices] : by_group) {
    const EpochKey key{5, 1};
    const model::Batch own = load_batch(*ds, indices, key);
    const model::Batch shaped = load_batch(*ds, indices, key, shaped_options);
    const ImageSize want = group == 0 ? ImageSize{256, 384} : ImageSize{384, 256};
    ASSERT_TRUE(own.images.size(2) < want.height || own.images.size(3) < want.width)
        << "the shape pads further than the batch's own size";
    SCOPED_TRACE("group " + std::to_string(group));
    testing::expect_same_batch_padded_further(own, shaped, want);
  }
}

}  // namespace
}  // namespace mrcnn::data
