// The validation annotations are parsed once per run and once per `eval`: the kernel counts the
// opens of the annotation file (inotify), compared with the opens of one eval::load_dataset.
// Both the timed run's validation data and its scorer, in either order, and the `eval` command
// must open it no more often than one parse does.
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "benchmark/comm/communicator.h"
#include "benchmark/config/system_config.h"
#include "benchmark/data/synth.h"
#include "benchmark/run/assemble.h"
#include "benchmark/run/commands.h"
#include "benchmark/run/validation_split.h"
#include "eval/coco.h"
#include "model/weights.h"

namespace mrcnn::run {
namespace {

namespace fs = std::filesystem;

const std::string kCpuDev = std::string(MRCNN_SOURCE_DIR) + "/systems/cpu-dev.json";

// Opens of one file since construction, as the kernel reports them. Closes are watched too, so
// that two opens in a row never coalesce into one event.
class FileOpens {
 public:
  explicit FileOpens(const fs::path& file) : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (fd_ < 0) throw std::runtime_error(std::string("inotify_init1: ") + std::strerror(errno));
    if (::inotify_add_watch(fd_, file.c_str(), IN_OPEN | IN_CLOSE_NOWRITE) < 0)
      throw std::runtime_error(file.string() + ": inotify_add_watch: " + std::strerror(errno));
  }
  ~FileOpens() { ::close(fd_); }
  FileOpens(const FileOpens&) = delete;
  FileOpens& operator=(const FileOpens&) = delete;

  int count() {
    alignas(inotify_event) char buf[4096];
    for (ssize_t n; (n = ::read(fd_, buf, sizeof buf)) > 0;) {
      for (ssize_t i = 0; i < n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf + i);
        if (e->mask & IN_OPEN) ++opens_;
        i += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      }
    }
    return opens_;
  }

 private:
  int fd_;
  int opens_ = 0;
};

class ParsedOnce : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("mrcnn-val-split-" + std::to_string(::getpid())));
    data::write_synthetic_dataset(
        {.out_dir = dir_->string(), .train_images = 2, .val_images = 3, .width = 64, .height = 64, .progress = false});
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

  static fs::path val_json() { return data::CocoLayout{*dir_}.annotation_file("val2017"); }
  static SystemConfig config() {
    return config::load_system_config(kCpuDev, {"run.data_dir=\"" + dir_->string() + "\""});
  }
  // The opens one parse of the annotations takes.
  static int opens_of_one_parse() {
    FileOpens opens(val_json());
    const eval::Dataset parsed = eval::load_dataset(val_json().string());
    EXPECT_EQ(parsed.images.size(), 3u);
    return opens.count();
  }

  static fs::path* dir_;
};
fs::path* ParsedOnce::dir_ = nullptr;

TEST_F(ParsedOnce, ByTheTimedRunsValidationDataAndScorerInEitherOrder) {
  const int one_parse = opens_of_one_parse();
  ASSERT_GE(one_parse, 1);
  const SystemConfig c = config();
  const auto comm = comm::make_communicator("local");
  for (const bool scorer_first : {false, true}) {
    SCOPED_TRACE(scorer_first ? "scorer first" : "validation data first");
    RunParts parts = coco_run_parts(c, *comm, c10::Device(c10::kCPU), /*progress=*/false);
    FileOpens opens(val_json());
    std::unique_ptr<Scorer> scorer;
    if (scorer_first) scorer = parts.scorer();
    const std::unique_ptr<DataSource> val = parts.val_data();
    if (!scorer_first) scorer = parts.scorer();
    EXPECT_EQ(val->num_images(), 3);
    EXPECT_EQ(opens.count(), one_parse);
  }
}

TEST_F(ParsedOnce, ByEval) {
  const int one_parse = opens_of_one_parse();
  ASSERT_GE(one_parse, 1);
  const SystemConfig c = config();
  const fs::path weights = *dir_ / "weights.safetensors";
  model::save_weights(*make_network(c, c10::Device(c10::kCPU)), weights.string());
  std::vector<std::string> args = {"eval", "--weights", weights.string(), "--data", dir_->string(), "--system", kCpuDev};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  FileOpens opens(val_json());
  ASSERT_EQ(eval_main(static_cast<int>(argv.size()), argv.data()), 0);
  EXPECT_EQ(opens.count(), one_parse);
}

TEST_F(ParsedOnce, TheSplitsPartsComeFromOneParse) {
  const SystemConfig c = config();
  const data::CocoLayout layout = coco_layout(c);
  const ValidationSplit v =
      ValidationSplit::read(layout, "val2017", dataset_options(c, layout, "val2017", /*train=*/false, false));
  EXPECT_EQ(v.split, "val2017");
  ASSERT_EQ(v.dataset->size(), 3);
  EXPECT_FALSE(v.dataset->source().index);
  EXPECT_EQ(v.ground_truth->images.size(), 3u);
  EXPECT_EQ(v.label_to_category, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
  // The dataset serves the ground truth's images in ascending id order, each with its objects.
  for (int64_t i = 0; i < v.dataset->size(); ++i) {
    const auto id = static_cast<uint64_t>(v.dataset->image_id(i));
    ASSERT_NE(v.ground_truth->find_image(id), nullptr);
    EXPECT_EQ(v.dataset->source_targets(i).labels.size(), v.ground_truth->annotations_of_image(id).size());
  }
}

}  // namespace
}  // namespace mrcnn::run
