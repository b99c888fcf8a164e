// The prepared training index (coco_index.h) against the JSON it comes from, and `data verify`
// (coco_verify.h): on a genuine COCO 2017 cut (tests/benchmark/data/coco_real: real polygons,
// crowd RLEs, a grayscale JPEG, an image without annotations) and on hand-made defects.
#include <gtest/gtest.h>

#include <unistd.h>

#include <bit>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "benchmark/data/coco_dataset.h"
#include "benchmark/data/coco_index.h"
#include "benchmark/data/coco_layout.h"
#include "benchmark/data/coco_verify.h"
#include "benchmark/data/image_codec.h"
#include "benchmark/data/loader.h"
#include "benchmark/data/sampler.h"
#include "eval/coco.h"

namespace mrcnn::data {
namespace {

namespace fs = std::filesystem;

// A copy of the genuine cut in a temporary folder (tests change it).
class RealCoco {
 public:
  explicit RealCoco(const std::string& name)
      : root_(fs::temp_directory_path() / ("mrcnn_index_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
    fs::copy(fs::path(MRCNN_SOURCE_DIR) / "tests/benchmark/data/coco_real", root_, fs::copy_options::recursive);
    for (const auto& e : fs::recursive_directory_iterator(root_))  // the checkout's files may be read-only
      fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  }
  ~RealCoco() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string root() const { return root_.string(); }
  std::string json() const { return CocoLayout{root_}.annotation_file("train2017").string(); }
  std::string index() const { return CocoLayout{root_}.index_file("train2017").string(); }
  std::string image(int64_t id) const {
    char name[32];
    std::snprintf(name, sizeof name, "%012lld.jpg", static_cast<long long>(id));
    return (root_ / "train2017" / name).string();
  }

  CocoDatasetOptions options(const std::string& source) const {
    auto o = CocoDatasetOptions::coco(root(), "train2017", true);
    o.source = source;
    o.progress = false;
    return o;
  }
  // What `data prepare` does.
  void prepare(bool legacy_plus_one = true) const {
    const eval::Dataset coco = eval::load_dataset(json());
    write_coco_index(index(), build_coco_arrays(coco, {true, legacy_plus_one}, json(), false), describe_source(json()));
  }

 private:
  fs::path root_;
};

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (std::bit_cast<uint64_t>(a[k]) != std::bit_cast<uint64_t>(b[k])) return false;
  return true;
}

TEST(CocoIndex, RealCocoFromTheIndexEqualsTheJsonBitForBit) {
  const RealCoco coco("equal");
  coco.prepare();
  auto from_json = std::make_shared<const CocoDataset>(coco.options("json"));
  auto from_index = std::make_shared<const CocoDataset>(coco.options("index"));
  EXPECT_FALSE(from_json->source().index);
  EXPECT_TRUE(from_index->source().index);
  EXPECT_TRUE(from_index->arrays().centi()) << "COCO's two-decimal coordinates are kept as hundredths";

  ASSERT_EQ(from_json->size(), 8);  // image 250 has no annotation
  ASSERT_EQ(from_index->size(), from_json->size());
  EXPECT_EQ(from_index->category_ids(), from_json->category_ids());
  EXPECT_EQ(from_index->category_names(), from_json->category_names());
  EXPECT_EQ(from_index->category_names().size(), 80u);
  EXPECT_EQ(from_index->stats().summary(), from_json->stats().summary());
  EXPECT_EQ(from_index->stats().crowd_annotations_dropped, 2);
  for (int64_t i = 0; i < from_json->size(); ++i) {
    EXPECT_EQ(from_index->image_id(i), from_json->image_id(i));
    EXPECT_EQ(from_index->image_path(i), from_json->image_path(i));
    EXPECT_EQ(from_index->original_size(i), from_json->original_size(i));
    EXPECT_EQ(from_index->resized_size(i), from_json->resized_size(i));
    const InstanceTargets a = from_json->source_targets(i), b = from_index->source_targets(i);
    EXPECT_EQ(a.boxes, b.boxes);
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_TRUE(same_bits(a.coords, b.coords)) << "image " << from_json->image_id(i);
    EXPECT_EQ(a.poly_offsets, b.poly_offsets);
    EXPECT_EQ(a.instance_offsets, b.instance_offsets);
  }
  // The longest real polygon is kept whole.
  int64_t longest = 0;
  for (int64_t i = 0; i < from_index->size(); ++i) {
    const InstanceTargets t = from_index->source_targets(i);
    for (size_t p = 0; p + 1 < t.poly_offsets.size(); ++p) longest = std::max(longest, t.poly_offsets[p + 1] - t.poly_offsets[p]);
  }
  EXPECT_GE(longest, 100);

  // Whole batches, decoded and transformed by the threaded loader, bit for bit.
  const BatchSampler sampler(from_json->aspect_groups(), {.batch_size = 2});
  Loader a(from_json, sampler.epoch(7, 1), {7, 1}, {.num_threads = 2});
  Loader b(from_index, sampler.epoch(7, 1), {7, 1}, {.num_threads = 2});
  int64_t batches = 0;
  while (auto x = a.next()) {
    auto y = b.next();
    ASSERT_TRUE(y.has_value());
    ++batches;
    EXPECT_EQ(x->image_ids, y->image_ids);
    EXPECT_TRUE(x->images.equal(y->images));
    EXPECT_TRUE(x->gt_boxes.equal(y->gt_boxes));
    EXPECT_TRUE(x->gt_labels.equal(y->gt_labels));
    ASSERT_EQ(x->gt_polygons.size(), y->gt_polygons.size());
    for (size_t k = 0; k < x->gt_polygons.size(); ++k) {
      EXPECT_TRUE(x->gt_polygons[k].coords.equal(y->gt_polygons[k].coords));
      EXPECT_TRUE(x->gt_polygons[k].poly_offsets.equal(y->gt_polygons[k].poly_offsets));
      EXPECT_TRUE(x->gt_polygons[k].instance_offsets.equal(y->gt_polygons[k].instance_offsets));
    }
  }
  EXPECT_FALSE(b.next().has_value());
  EXPECT_GE(batches, 3);  // 8 images in batches of 2, grouped by aspect ratio
}

TEST(CocoIndex, CoordinatesThatAreNotHundredthsStayDoubles) {
  const RealCoco coco("doubles");
  // One coordinate with a third decimal: the whole file keeps doubles, still bit for bit.
  std::ifstream in(coco.json());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("\"segmentation\":[[");
  ASSERT_NE(at, std::string::npos);
  const size_t number = at + std::string("\"segmentation\":[[").size();
  const size_t comma = text.find(',', number);
  text.replace(number, comma - number, "12.125");
  std::ofstream(coco.json(), std::ios::trunc) << text;
  coco.prepare();
  const CocoDataset json(coco.options("json")), index(coco.options("index"));
  EXPECT_FALSE(index.arrays().centi());
  bool found = false;
  for (int64_t i = 0; i < json.size(); ++i) {
    const InstanceTargets a = json.source_targets(i), b = index.source_targets(i);
    EXPECT_TRUE(same_bits(a.coords, b.coords));
    found |= std::find(b.coords.begin(), b.coords.end(), 12.125) != b.coords.end();
  }
  EXPECT_TRUE(found);
}

TEST(CocoIndex, AbsentStaleOtherSettingsAndCorruptIndexes) {
  const RealCoco coco("stale");
  // Absent: auto reads the JSON and says why; "index" refuses, naming the index.
  {
    const CocoDataset auto_ds(coco.options("auto"));
    EXPECT_FALSE(auto_ds.source().index);
    EXPECT_NE(auto_ds.source().note.find("no index at " + coco.index()), std::string::npos) << auto_ds.source().note;
    const std::string e = error_of([&] { CocoDataset d(coco.options("index")); });
    EXPECT_NE(e.find(coco.index()), std::string::npos) << e;
    EXPECT_NE(e.find("data prepare"), std::string::npos) << e;
  }
  coco.prepare();
  EXPECT_TRUE(CocoDataset(coco.options("auto")).source().index);

  // The JSON touched (same bytes, another time): its checksum decides, and it is current.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fs::last_write_time(coco.json(), fs::file_time_type::clock::now());
  {
    const IndexOpen o = open_coco_index(coco.index(), coco.json(), {true, true});
    EXPECT_EQ(o.status, IndexOpen::Status::kCurrent) << o.reason;
    EXPECT_TRUE(o.json_hashed);
  }
  // Other settings than the run's: not used.
  {
    const IndexOpen o = open_coco_index(coco.index(), coco.json(), {true, false});
    EXPECT_EQ(o.status, IndexOpen::Status::kOtherOptions);
    EXPECT_NE(o.reason.find("legacy_plus_one=true"), std::string::npos) << o.reason;
  }
  // The JSON changed after prepare: stale, by size, and by checksum at the same size.
  {
    std::ofstream(coco.json(), std::ios::app) << " ";
    const CocoDataset d(coco.options("auto"));
    EXPECT_FALSE(d.source().index);
    EXPECT_NE(d.source().note.find("changed since the index was prepared"), std::string::npos) << d.source().note;
    EXPECT_NE(error_of([&] { CocoDataset x(coco.options("index")); }).find("changed since"), std::string::npos);
    coco.prepare();
    std::fstream f(coco.json(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\n');  // same size, other bytes
    f.close();
    const IndexOpen o = open_coco_index(coco.index(), coco.json(), {true, true});
    EXPECT_EQ(o.status, IndexOpen::Status::kStale);
    EXPECT_NE(o.reason.find("SHA-256"), std::string::npos) << o.reason;
  }
  coco.prepare();
  const uintmax_t bytes = fs::file_size(coco.index());
  auto poke = [&](std::streamoff at, char c) {
    std::fstream f(coco.index(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(at);
    f.put(c);
  };
  // A flipped byte in the payload: corrupt, with what to do.
  poke(static_cast<std::streamoff>(bytes) - 3, 'x');
  std::string e = error_of([&] { CocoDataset d(coco.options("auto")); });
  EXPECT_NE(e.find(coco.index() + ": corrupt index (checksum mismatch)"), std::string::npos) << e;
  EXPECT_NE(e.find("data prepare"), std::string::npos) << e;
  // Truncated.
  coco.prepare();
  fs::resize_file(coco.index(), bytes / 2);
  e = error_of([&] { CocoDataset d(coco.options("index")); });
  EXPECT_NE(e.find("corrupt index"), std::string::npos) << e;
  // Not an index at all.
  std::ofstream(coco.index(), std::ios::trunc) << "{\"not\": \"an index\"}";
  e = error_of([&] { CocoDataset d(coco.options("auto")); });
  EXPECT_NE(e.find("not an index file"), std::string::npos) << e;
  // Another format version: not used (like a stale one), not an error under auto.
  coco.prepare();
  poke(8, static_cast<char>(kCocoIndexVersion + 1));
  const CocoDataset d(coco.options("auto"));
  EXPECT_FALSE(d.source().index);
  EXPECT_NE(d.source().note.find("format version"), std::string::npos) << d.source().note;
}

TEST(CocoIndex, KeypointsCaptionsAndOtherYearsAreRefusedByName) {
  const RealCoco coco("task");
  std::ifstream in(coco.json());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto rewrite = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    std::ofstream(coco.json(), std::ios::trunc) << t;
  };
  rewrite("\"iscrowd\":0", "\"iscrowd\":0,\"num_keypoints\":1,\"keypoints\":[1,2,2]");
  std::string e = error_of([&] { CocoDataset d(coco.options("json")); });
  EXPECT_NE(e.find(coco.json() + ": a person-keypoints annotation file"), std::string::npos) << e;
  rewrite("\"year\":2017", "\"year\":2014");
  e = error_of([&] { CocoDataset d(coco.options("json")); });
  EXPECT_NE(e.find("info.year is 2014, its name says 2017"), std::string::npos) << e;
  std::ofstream(coco.json(), std::ios::trunc)
      << R"({"images": [{"id": 1, "file_name": "1.jpg", "width": 64, "height": 48}],
            "annotations": [{"id": 5, "image_id": 1, "caption": "a cat"}]})";
  e = error_of([&] { CocoDataset d(coco.options("json")); });
  EXPECT_NE(e.find("captions annotation"), std::string::npos) << e;
  EXPECT_NE(e.find(coco.json()), std::string::npos) << e;
}

VerifyOptions verify_options(const RealCoco& coco) {
  return {.root = coco.root(), .splits = {"train2017"}, .threads = 2, .release = false, .progress = false};
}

TEST(DataVerify, AGenuineCutIsUsableButNotTheRelease) {
  const RealCoco coco("verify_ok");
  const VerifyReport r = verify_coco(verify_options(coco));
  EXPECT_TRUE(r.ok()) << r.text();
  ASSERT_EQ(r.splits.size(), 1u);
  EXPECT_EQ(r.splits[0].images, 9);
  EXPECT_EQ(r.splits[0].annotations, 69);
  EXPECT_EQ(r.splits[0].crowd, 2);
  EXPECT_EQ(r.splits[0].categories, 80);
  EXPECT_EQ(r.splits[0].images_for_training, 8);
  EXPECT_EQ(r.splits[0].images_checked, 9);
  EXPECT_FALSE(r.splits[0].release_file);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("9 images (118287)"), std::string::npos) << r.notes[0];
  EXPECT_EQ(r.notes[0].find("categories"), std::string::npos) << "the 80 category ids are COCO's: " << r.notes[0];

  VerifyOptions release = verify_options(coco);
  release.release = true;
  const VerifyReport strict = verify_coco(release);
  EXPECT_FALSE(strict.ok());
  EXPECT_NE(strict.text().find("error: " + coco.json() + " is not the COCO 2017 release's"), std::string::npos)
      << strict.text();
}

TEST(DataVerify, EveryDefectClassIsOneErrorNamingItsFiles) {
  const RealCoco coco("verify_bad");
  fs::remove(coco.image(536));                                     // missing
  const std::vector<uint8_t> jpeg = read_file(coco.image(643));     // truncated in the middle
  write_file(coco.image(643), std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + static_cast<long>(jpeg.size() / 2)));
  Image small(20, 30);                                             // another size than its record
  write_file(coco.image(562), encode_jpeg(small, 90));
  VerifyOptions o = verify_options(coco);
  o.splits = {"train2017", "val2017"};                             // val2017 is absent
  const VerifyReport r = verify_coco(o);
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.errors.size(), 4u) << r.text();
  const std::string t = r.text();
  EXPECT_NE(t.find("instances_val2017.json: missing"), std::string::npos) << t;
  EXPECT_NE(t.find("1 images missing from " + coco.root() + "/train2017: " + coco.image(536)), std::string::npos) << t;
  EXPECT_NE(t.find("1 images that do not decode"), std::string::npos) << t;
  EXPECT_NE(t.find(coco.image(643)), std::string::npos) << t;
  EXPECT_NE(t.find(coco.image(562) + " is 30x20, its record 423x640"), std::string::npos) << t;
  EXPECT_NE(t.find("NOT usable: 4 problem(s)"), std::string::npos) << t;
}

}  // namespace
}  // namespace mrcnn::data
