// AsyncEvaluator: results equal the synchronous evaluator's, errors land in the future, shutdown
// loses no result and leaves no thread behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "eval/async_evaluator.h"
#include "tests/eval/eval_fixtures.h"

namespace mrcnn::eval {
namespace {

TEST(AsyncEvaluator, MatchesSynchronousResultsInOrder) {
  std::vector<Detection> dets;
  auto ds = testing::random_dataset(5, 30, &dets);
  AsyncEvaluator::Options opt;
  opt.eval.threads = 2;
  AsyncEvaluator ev(ds, opt);
  std::vector<Detection> half(dets.begin(), dets.begin() + static_cast<long>(dets.size() / 2));
  auto f0 = ev.submit(0, dets);
  auto f1 = ev.submit(1, half);
  const EpochEval r0 = f0.get();
  const EpochEval r1 = f1.get();
  EXPECT_EQ(r0.epoch, 0);
  EXPECT_EQ(r1.epoch, 1);
  CocoEvaluator sync(ds, EvalOptions{1});
  EXPECT_EQ(r0.bbox_stats(), sync.evaluate(dets, IouType::kBbox).stats);
  EXPECT_EQ(r0.segm_stats(), sync.evaluate(dets, IouType::kSegm).stats);
  EXPECT_EQ(r1.bbox_stats(), sync.evaluate(half, IouType::kBbox).stats);
  EXPECT_NE(r0.bbox_stats(), r1.bbox_stats());
  EXPECT_GE(r0.scoring_seconds, 0.0);
  EXPECT_EQ(ev.pending(), 0u);
}

TEST(AsyncEvaluator, ErrorsPropagateAndLaterJobsStillRun) {
  std::vector<Detection> dets;
  auto ds = testing::random_dataset(6, 10, &dets);
  AsyncEvaluator ev(ds);
  std::vector<Detection> bad = dets;
  bad[0].image_id = 999999;
  auto fb = ev.submit(3, bad);
  auto fg = ev.submit(4, dets);
  EXPECT_THAT([&] { fb.get(); },
              ::testing::ThrowsMessage<CocoError>(::testing::HasSubstr("image_id 999999")));
  EXPECT_EQ(fg.get().epoch, 4);
}

TEST(AsyncEvaluator, DestructorFinishesSubmittedJobs) {
  std::vector<Detection> dets;
  auto ds = testing::random_dataset(7, 20, &dets);
  std::vector<std::future<EpochEval>> futures;
  {
    AsyncEvaluator ev(ds);
    for (int e = 0; e < 3; ++e) futures.push_back(ev.submit(e, dets));
  }  // destroyed with jobs queued
  for (int e = 0; e < 3; ++e) {
    ASSERT_EQ(futures[e].wait_for(std::chrono::seconds(0)), std::future_status::ready);
    EXPECT_EQ(futures[e].get().epoch, e);
  }
}

TEST(AsyncEvaluator, ShutdownWithoutDrainFailsQueuedJobs) {
  std::vector<Detection> dets;
  auto ds = testing::random_dataset(8, 40, &dets);
  AsyncEvaluator ev(ds);
  std::vector<std::future<EpochEval>> futures;
  for (int e = 0; e < 4; ++e) futures.push_back(ev.submit(e, dets));
  ev.shutdown(/*drain=*/false);
  int done = 0, cancelled = 0;
  for (auto& f : futures) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready);
    try {
      f.get();
      ++done;
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("shut down before epoch"));
      ++cancelled;
    }
  }
  EXPECT_EQ(done + cancelled, 4);
  EXPECT_GE(cancelled, 3);  // at most the job already running completes
  EXPECT_THROW(ev.submit(9, dets), std::logic_error);
  ev.shutdown();  // idempotent
}

}  // namespace
}  // namespace mrcnn::eval
