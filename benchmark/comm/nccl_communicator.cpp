// The NCCL communicator: one GPU per rank. GPU tensors are reduced by NCCL on the device's
// current stream (no host copy; EFA on p3dn through the aws-ofi-nccl plugin); CPU tensors, byte
// gathers, barriers and the start-up (the NCCL unique id, made on rank 0 and handed to every
// rank) go through the host communicator: MPI where mpirun started the ranks, the TCP ring where
// torchrun or srun did. Compiled when the build has CUDA kernels and NCCL's header.
#if MRCNN_HAVE_NCCL
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "benchmark/comm/collective_watchdog.h"
#include "benchmark/comm/communicator.h"

namespace mrcnn::comm {

namespace {

void check(ncclResult_t rc, const char* what) {
  if (rc == ncclSuccess) return;
  throw std::runtime_error(std::string("NCCL ") + what + " failed: " + ncclGetErrorString(rc));
}

ncclDataType_t nccl_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kLong: return ncclInt64;
    case at::kInt: return ncclInt32;
    default:
      throw std::runtime_error("NCCL communicator: unsupported dtype " + std::string(c10::toString(t.scalar_type())));
  }
}

// A sum on the communication stream: wait() orders the caller's current stream after it.
struct NcclPendingSum final : Communicator::PendingSum {
  NcclPendingSum(cudaEvent_t done, at::Device device) : done(done), device(device) {}
  ~NcclPendingSum() override {
    if (done != nullptr) cudaEventDestroy(done);
  }
  void wait() override {
    c10::cuda::CUDAGuard guard(device);
    cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream(device.index()).stream(), done, 0);
  }
  cudaEvent_t done;
  at::Device device;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::unique_ptr<Communicator> host, const CommunicatorOptions& options)
      : host_(std::move(host)), timeout_s_(options.collective_timeout_s) {
    const int devices = static_cast<int>(c10::cuda::device_count());
    if (devices == 0) throw std::runtime_error("communicator 'nccl': no CUDA device is visible to this process");
    const int index = host_->local_rank() * options.device_stride;
    if (index >= devices)
      throw std::runtime_error("communicator 'nccl': local rank " + std::to_string(host_->local_rank()) + " takes GPU " +
                               std::to_string(index) + ", but only " + std::to_string(devices) +
                               " CUDA devices are visible on this node");
    device_ = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (host_->is_main()) check(ncclGetUniqueId(&id), "get unique id");
    const std::vector<std::string> ids =
        host_->allgather_bytes(std::string(reinterpret_cast<const char*>(&id), sizeof id));
    std::memcpy(&id, ids.at(0).data(), sizeof id);
    c10::cuda::CUDAGuard guard(device_);
    // Host calls that may block on the peers (the set-up, connections made at the first
    // collective) are watched as they run; the device work NCCL calls leave, from the
    // watchdog's thread through events.
    dog_ = std::make_unique<CollectiveWatchdog>(host_->rank(), timeout_s_, [this] { return device_problem(); });
    {
      const auto watched = dog_->watch("NCCL set-up");
      check(ncclCommInitRank(&comm_, host_->world_size(), id, host_->rank()), "init");
    }
    ready_ = true;
  }
  ~NcclCommunicator() override {
    dog_.reset();
    for (auto& p : pending_) cudaEventDestroy(p.event);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // NCCL reads and writes this rank's GPU only: a tensor on another one is a setup error.
  void check_device(const at::Tensor& t) const {
    if (t.is_cuda() && t.device() != device_)
      throw std::runtime_error("NCCL communicator: a tensor on " + t.device().str() + ", this rank uses " +
                               device_.str());
  }

  std::string backend() const override { return "nccl"; }
  int rank() const override { return host_->rank(); }
  int world_size() const override { return host_->world_size(); }
  int local_rank() const override { return host_->local_rank(); }
  int local_size() const override { return host_->local_size(); }

  void allreduce_sum(std::vector<at::Tensor>& tensors, int64_t bucket_bytes) override {
    // GPU tensors through NCCL on the device; CPU values (losses, flags) through the host
    // communicator, after them.
    std::vector<at::Tensor> gpu, host;
    for (const auto& t : tensors) {
      check_device(t);
      (t.is_cuda() ? gpu : host).push_back(t);  // handles: results land in the callers' tensors
    }
    reduce_in_buckets(gpu, bucket_bytes, [this](at::Tensor buffer) {
      c10::cuda::CUDAGuard guard(device_);
      const auto watched = dog_->watch("NCCL all-reduce");
      check(ncclAllReduce(buffer.data_ptr(), buffer.data_ptr(), static_cast<size_t>(buffer.numel()), nccl_type(buffer),
                          ncclSum, comm_, c10::cuda::getCurrentCUDAStream(device_.index()).stream()),
            "all-reduce");
      return buffer;
    });
    if (!gpu.empty()) enqueued("all-reduce");
    if (!host.empty()) host_->allreduce_sum(host, bucket_bytes);
  }

  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    for (auto& t : tensors) {
      if (!t.is_cuda()) {
        std::vector<at::Tensor> one{t};
        host_->broadcast(one, root);
        continue;
      }
      check_device(t);
      at::Tensor c = t.contiguous();
      c10::cuda::CUDAGuard guard(device_);
      const auto watched = dog_->watch("NCCL broadcast");
      check(ncclBroadcast(c.data_ptr(), c.data_ptr(), static_cast<size_t>(c.numel()), nccl_type(c), root, comm_,
                          c10::cuda::getCurrentCUDAStream(device_.index()).stream()),
            "broadcast");
      if (!c.is_same(t)) t.copy_(c);
      enqueued("broadcast");
    }
  }

  // Device buffers: reduced on a communication stream once the compute stream has produced them
  // (an event between the two); wait() makes the caller's stream wait for the sum. No host sync.
  std::unique_ptr<PendingSum> start_allreduce_sum(at::Tensor buffer) override {
    if (!buffer.is_cuda() || !buffer.is_contiguous()) return Communicator::start_allreduce_sum(std::move(buffer));
    check_device(buffer);
    c10::cuda::CUDAGuard guard(device_);
    const cudaStream_t compute = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
    if (!comm_stream_) comm_stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device_.index());
    const cudaStream_t side = comm_stream_->stream();
    cudaEvent_t ready = nullptr, done = nullptr;
    cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    cudaEventRecord(ready, compute);
    cudaStreamWaitEvent(side, ready, 0);
    cudaEventDestroy(ready);
    const auto watched = dog_->watch("NCCL all-reduce");
    check(ncclAllReduce(buffer.data_ptr(), buffer.data_ptr(), static_cast<size_t>(buffer.numel()), nccl_type(buffer),
                        ncclSum, comm_, side),
          "all-reduce");
    c10::cuda::CUDACachingAllocator::recordStream(buffer.storage().data_ptr(), *comm_stream_);
    cudaEventRecord(done, side);
    {
      c10::cuda::CUDAStreamGuard on_side(*comm_stream_);
      enqueued("all-reduce");
    }
    return std::make_unique<NcclPendingSum>(done, device_);
  }
  bool overlaps(const at::Device& device) const override { return device.is_cuda(); }

  std::vector<std::string> allgather_bytes(const std::string& mine) override { return host_->allgather_bytes(mine); }
  std::vector<std::string> gather_bytes(const std::string& mine, int root) override {
    return host_->gather_bytes(mine, root);
  }
  void barrier() override { host_->barrier(); }

  [[noreturn]] void abort(int code) override {
    dog_.reset();
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
    host_->abort(code);
    std::_Exit(code);  // not reached: the host communicator's abort ends the process
  }

 private:
  // An event after the collective on the current stream: the watchdog sees when it completes.
  void enqueued(const char* what) {
    if (timeout_s_ <= 0) return;
    cudaEvent_t e = nullptr;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) return;
    cudaEventRecord(e, c10::cuda::getCurrentCUDAStream(device_.index()).stream());
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({e, what, std::chrono::steady_clock::now()});
  }

  // Called by the watchdog's thread: "" while the device's collectives progress.
  std::string device_problem() {
    if (!ready_) return "";  // ncclCommInitRank still running: watched as a host call
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
      return std::string("NCCL reported an asynchronous error: ") + ncclGetErrorString(async);
    std::lock_guard<std::mutex> lock(mu_);
    c10::cuda::CUDAGuard guard(device_);
    while (!pending_.empty() && cudaEventQuery(pending_.front().event) == cudaSuccess) {
      cudaEventDestroy(pending_.front().event);
      pending_.pop_front();
    }
    if (pending_.empty()) return "";
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - pending_.front().since).count();
    if (waited <= timeout_s_) return "";
    return std::string("an NCCL ") + pending_.front().what + " has not completed on the GPU after " +
           std::to_string(static_cast<long>(waited)) + " s: a rank is dead or hung";
  }

  struct Pending {
    cudaEvent_t event;
    const char* what;
    std::chrono::steady_clock::time_point since;
  };
  std::unique_ptr<Communicator> host_;  // the host communicator (mpi or tcp)
  double timeout_s_ = 0;
  at::Device device_{at::kCUDA, 0};
  ncclComm_t comm_ = nullptr;
  std::atomic<bool> ready_{false};  // comm_ is set up (read by the watchdog's thread)
  std::optional<c10::cuda::CUDAStream> comm_stream_;
  std::mutex mu_;
  std::deque<Pending> pending_;
  std::unique_ptr<CollectiveWatchdog> dog_;  // last: its thread stops before the rest goes
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> host,
                                                     const CommunicatorOptions& options) {
  return std::make_unique<NcclCommunicator>(std::move(host), options);
}

}  // namespace mrcnn::comm
#endif  // MRCNN_HAVE_NCCL
