// AsyncEvaluator: results equal the synchronous evaluator's, callbacks run one at a time in
// submission order on the background thread, errors land in the callback or the future, wait()
// returns after the callbacks, shutdown loses no result and leaves no thread behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

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

TEST(AsyncEvaluator, CallbacksRunInOrderOnTheBackgroundThreadAndWaitFollowsThem) {
  std::vector<Detection> dets;
  auto ds = testing::random_dataset(9, 20, &dets);
  AsyncEvaluator ev(ds);
  std::vector<Detection> bad = dets;
  bad[0].image_id = 999999;
  std::mutex mu;
  std::vector<int64_t> order;
  std::vector<std::string> errors;
  std::vector<double> bbox;
  int inside = 0, most_inside = 0;
  const std::thread::id caller = std::this_thread::get_id();
  auto on_done = [&](EpochEval r, std::exception_ptr error) {
    {
      std::lock_guard lock(mu);
      most_inside = std::max(most_inside, ++inside);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a slow callback must not overlap the next
    std::lock_guard lock(mu);
    --inside;
    EXPECT_NE(std::this_thread::get_id(), caller);
    order.push_back(r.epoch);
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const CocoError& e) {
        errors.push_back(e.what());
      }
    } else {
      bbox.push_back(r.bbox_stats()[0]);
    }
  };
  ev.submit(1, dets, on_done);
  ev.submit(2, bad, on_done);
  ev.submit(3, dets, on_done);
  ev.wait();
  std::lock_guard lock(mu);  // every callback has returned: nothing runs any more
  EXPECT_EQ(order, (std::vector<int64_t>{1, 2, 3}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], ::testing::HasSubstr("image_id 999999"));
  CocoEvaluator sync(ds, EvalOptions{1});
  const double expected = sync.evaluate(dets, IouType::kBbox).stats[0];
  EXPECT_EQ(bbox, (std::vector<double>{expected, expected}));
  EXPECT_EQ(most_inside, 1);
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
  ev.wait();  // nothing left to wait for
  EXPECT_THROW(ev.submit(9, dets), std::logic_error);
  ev.shutdown();  // idempotent
}

}  // namespace
}  // namespace mrcnn::eval
