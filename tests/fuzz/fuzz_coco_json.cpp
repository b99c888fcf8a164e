// The COCO JSON readers (ground truth and results) and, when an input holds both, the evaluator.
// An input is a ground-truth file, optionally followed by a line "#RESULTS" and a results file.
// Invariants: a file that parses yields masks for its segmentations (or a clear error), and a
// pair that parses evaluates to statistics in [0, 1] or -1.
#include <cmath>
#include <memory>
#include <string_view>
#include <vector>

#include "eval/coco.h"
#include "eval/coco_eval.h"
#include "eval/results_reader.h"
#include "tests/fuzz/fuzz_common.h"

using namespace mrcnn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find("\n#RESULTS\n");
  const std::string_view gt_text = input.substr(0, split);
  auto gt = std::make_shared<eval::Dataset>();
  const bool gt_ok = fuzz::accepts([&] { *gt = eval::parse_dataset(gt_text, "fuzz-gt.json"); });
  if (gt_ok) {
    for (const auto& a : gt->annotations) {
      const int64_t i = gt->image_index(a.image_id);
      fuzz::check(i >= 0, "a parsed annotation's image exists");
      const auto& im = gt->images[static_cast<size_t>(i)];
      if (uint64_t(im.width) * uint64_t(im.height) > (1u << 22) || a.segmentation.empty()) continue;
      fuzz::accepts([&] {
        const eval::Rle r = eval::to_rle(a.segmentation, uint32_t(im.height), uint32_t(im.width), "fuzz");
        fuzz::check(eval::area(r) <= uint64_t(im.width) * uint64_t(im.height), "mask area within the image");
      });
    }
  }
  if (split == std::string_view::npos) return 0;
  std::vector<eval::Detection> dt;
  const bool dt_ok = fuzz::accepts([&] { dt = eval::parse_results(input.substr(split + 10), "fuzz-results.json"); });
  if (!gt_ok || !dt_ok) return 0;
  for (const auto& im : gt->images)
    if (uint64_t(im.width) * uint64_t(im.height) > (1u << 22)) return 0;  // masks too big to be quick
  if (gt->images.size() > 64 || gt->annotations.size() > 512 || dt.size() > 512) return 0;
  eval::CocoEvaluator evaluator(gt, {.threads = 1});
  const std::vector<eval::IouType> types{eval::IouType::kBbox, eval::IouType::kSegm};
  fuzz::accepts([&] {
    for (const auto& r : evaluator.evaluate(dt, types))
      for (double s : r.stats) fuzz::check(s == -1.0 || (s >= 0.0 && s <= 1.0 + 1e-12), "a COCO statistic in [0, 1] or -1");
  });
  return 0;
}
