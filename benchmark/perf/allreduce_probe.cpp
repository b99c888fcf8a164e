// allreduce_probe: the gradient all-reduce measured on the ranks of a real job, as nccl-tests'
// all_reduce_perf measures NCCL's. Every rank runs it (under mpirun, torchrun, srun or hand-set
// RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT); rank 0 prints one JSON line per measurement:
//
//   {"communicator": "tcp", "device": "cpu", "ranks": 2, "bytes": 176500000, "bucket_bytes": 25000000,
//    "seconds": [..], "median_s": 1.58, "algbw_GBps": 0.112, "busbw_GBps": 0.112}
//
// algbw = bytes / time; busbw = algbw x 2(p-1)/p, the bytes every link of a ring carries per
// second (nccl-tests' convention), so it can be set beside the link's rate.
//
//   allreduce_probe [--communicator auto|mpi|tcp|nccl] [--device cpu|cuda] [--megabytes 176.5]
//                   [--bucket-megabytes 25] [--iterations 5] [--warmup 1] [--timeout 120]
//
// --device cuda holds the gradients on each rank's GPU (local rank r on cuda:r), as the trainer
// does with NCCL (`--communicator nccl` wants it); a GPU all-reduce is timed until its sum is on
// the device (a read of one value waits for it).
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "benchmark/comm/communicator.h"
#include "logging/arguments.h"

namespace {

constexpr const char* kUsage =
    "usage: allreduce_probe [--communicator auto|mpi|tcp|nccl] [--device cpu|cuda] [--megabytes 176.5]\n"
    "                       [--bucket-megabytes 25] [--iterations 5] [--warmup 1] [--timeout 120]\n"
    "Times allreduce_sum of float32 gradients of that size in buckets of that size, on every rank of\n"
    "the job; rank 0 prints one JSON line. 176.5 MB: the R50-FPN Mask R-CNN gradients.\n";

int run(int argc, char** argv) {
  const mrcnn::cli::Arguments args(
      argc, argv, {.with_value = {"--communicator", "--device", "--megabytes", "--bucket-megabytes", "--iterations",
                                  "--warmup", "--timeout"}});
  if (args.help()) return std::fputs(kUsage, stdout), 0;
  const double megabytes = args.number("--megabytes", 176.5, {0.000004, 1e5});
  const double bucket_megabytes = args.number("--bucket-megabytes", 25, {0.000004, 1e5});
  const int iterations = static_cast<int>(args.integer("--iterations", 5, {1, 10000}));
  const int warmup = static_cast<int>(args.integer("--warmup", 1, {0, 10000}));
  auto comm = mrcnn::comm::make_communicator(args.value("--communicator", "auto"),
                                             {.collective_timeout_s = args.number("--timeout", 120, {0, 1e6})});
  const auto floats = static_cast<int64_t>(megabytes * 1e6 / 4);
  const auto bucket_bytes = static_cast<int64_t>(bucket_megabytes * 1e6);
  const std::string device_name = args.value("--device", "cpu");
  if (device_name != "cpu" && device_name != "cuda")
    throw mrcnn::cli::UsageError("--device " + device_name + ": expected cpu or cuda");
  if (comm->backend() == "nccl" && device_name != "cuda")
    throw mrcnn::cli::UsageError("--communicator nccl reduces GPU tensors: give --device cuda");
  const at::Device device = device_name == "cuda" ? at::Device(at::kCUDA, static_cast<int8_t>(comm->local_rank()))
                                                  : at::Device(at::kCPU);
  const auto on = at::TensorOptions().device(device);
  // The gradients as the trainer holds them: one tensor per parameter-sized piece (4 MB here).
  std::vector<at::Tensor> grads;
  for (int64_t at = 0; at < floats; at += 1 << 20)
    grads.push_back(at::full({std::min<int64_t>(1 << 20, floats - at)}, comm->rank() + 1.0f, on));
  std::vector<double> seconds;
  for (int i = 0; i < warmup + iterations; ++i) {
    comm->barrier();
    const auto t0 = std::chrono::steady_clock::now();
    comm->allreduce_sum(grads, bucket_bytes);
    if (device.is_cuda()) (void)grads.back()[0].item<float>();  // the sum is on the device
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i >= warmup) seconds.push_back(s);
  }
  // Each element is the sum of 1 .. p: a wrong reduction is not a fast one.
  const int p = comm->world_size();
  const float want = static_cast<float>(p * (p + 1) / 2);
  std::vector<at::Tensor> check{at::full({1}, comm->rank() + 1.0f, on)};
  comm->allreduce_sum(check);
  if (check[0].item<float>() != want) throw std::runtime_error("the all-reduce gave a wrong sum");
  if (!comm->is_main()) return 0;
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const double bytes = static_cast<double>(floats) * 4;
  std::printf("{\"communicator\": \"%s\", \"device\": \"%s\", \"ranks\": %d, \"bytes\": %.0f, \"bucket_bytes\": %lld, \"seconds\": [",
              comm->backend().c_str(), device_name.c_str(), p, bytes, static_cast<long long>(bucket_bytes));
  for (size_t i = 0; i < seconds.size(); ++i) std::printf("%s%.6f", i ? ", " : "", seconds[i]);
  std::printf("], \"median_s\": %.6f, \"algbw_GBps\": %.6f, \"busbw_GBps\": %.6f}\n", median, bytes / median / 1e9,
              bytes / median / 1e9 * 2 * (p - 1) / p);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const mrcnn::cli::UsageError& e) {
    std::fprintf(stderr, "allreduce_probe: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_probe: error: %s\n", e.what());
    return 1;
  }
}
