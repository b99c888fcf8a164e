// Data-parallel communication behind one small interface, so that the trainer and the evaluator
// do not care how many processes there are or how they talk:
//   "local" -- one process, every collective is the identity (the CPU development system);
//   "mpi"   -- OpenMPI ranks started by mpirun. Tensors on another device are staged through
//              host memory (one copy per bucket each way). Built when CMake finds MPI.
//   "tcp"   -- ranks started by torchrun, srun --mpi=none or by hand (RANK, WORLD_SIZE,
//              MASTER_ADDR, MASTER_PORT: rank_environment.h), no MPI: they meet through
//              LibTorch's TCPStore, then talk over a ring of TCP connections. Tensors on another
//              device are staged through host memory. Always built.
//   "nccl"  -- one GPU per rank (the GPU of the rank's index on its node): GPU tensors reduced
//              by NCCL on the current stream, everything else through MPI where mpirun started
//              the ranks, else through "tcp". Built when the build has CUDA and NCCL.
//
// Collectives are blocking and must be called by every rank in the same order. Gradients are
// reduced in fused buckets (one flat buffer per bucket of `bucket_bytes`), in parameter order,
// so the reduction order, and therefore the result, is the same on every run.
// Not thread-safe: call from the training thread only.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/comm/rank_environment.h"

namespace mrcnn::comm {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string backend() const = 0;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Ranks on this node and this rank's index among them (for core binding and device choice).
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;

  // In-place sum over ranks of every tensor (float32/float64/int32/int64, any shapes, any
  // device), fused into buckets of at most `bucket_bytes`.
  virtual void allreduce_sum(std::vector<at::Tensor>& tensors, int64_t bucket_bytes = 25 << 20) = 0;
  // A sum over ranks started now and finished by wait() (which must be called, by the training
  // thread, before the buffer is read or the next collective). `buffer` is one contiguous
  // tensor, reduced in place. Started reductions must be started in the same order on every
  // rank. The base class reduces at once (wait() has nothing left to do); mpi overlaps CPU
  // buffers with MPI_Iallreduce, nccl device buffers on a communication stream.
  class PendingSum {
   public:
    virtual ~PendingSum() = default;
    virtual void wait() {}
  };
  virtual std::unique_ptr<PendingSum> start_allreduce_sum(at::Tensor buffer);
  // Whether start_allreduce_sum may be called from the thread that runs the backward pass for
  // tensors on `device` (autograd hooks) and returns before the sum is done. When false, start
  // reductions from the training thread after the backward pass.
  virtual bool overlaps(const at::Device& device) const { return false; }
  // Moves started reductions along where the transport needs calls to progress (MPI over TCP).
  virtual void progress() {}

  // In-place copy of root's tensors to every rank.
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root = 0) = 0;
  // Concatenates every rank's byte buffer, in rank order, on every rank.
  virtual std::vector<std::string> allgather_bytes(const std::string& mine) = 0;
  // Every rank's byte buffer, in rank order, on `root`; an empty vector on the other ranks.
  virtual std::vector<std::string> gather_bytes(const std::string& mine, int root = 0) = 0;
  virtual void barrier() = 0;
  // Ends every rank's process with `code` (a rank that failed alone would otherwise leave the
  // others waiting in a collective forever). Does not return.
  [[noreturn]] virtual void abort(int code) = 0;

  // allreduce_sum, then division by world_size (averaged gradients).
  void allreduce_mean(std::vector<at::Tensor>& tensors, int64_t bucket_bytes = 25 << 20);
  bool is_main() const { return rank() == 0; }
};

// The bucketing every backend's allreduce_sum shares: runs of consecutive tensors of one dtype
// and device, at most `bucket_bytes` each (a larger tensor is a bucket alone), are flattened
// into one contiguous buffer in parameter order; `reduce` sums that buffer over the ranks and
// returns the result (the buffer itself, or a copy on another device), which is copied back
// into the tensors.
void reduce_in_buckets(std::vector<at::Tensor>& tensors, int64_t bucket_bytes,
                       const std::function<at::Tensor(at::Tensor buffer)>& reduce);

// The single-process communicator.
std::unique_ptr<Communicator> make_local_communicator();

struct CommunicatorOptions {
  // A collective that waits longer for the other ranks ends this rank with a message (and the
  // launcher then ends the job): see collective_watchdog.h. 0: wait forever (the system files'
  // launch.collective_timeout_s is at least 1 s).
  double collective_timeout_s = 0;
  // nccl: the GPU of local rank r is r * device_stride (ranks that share out a node's GPUs).
  int device_stride = 1;
};

// "local", "mpi", "tcp", "nccl" (or "auto": mpi when MPI started the process and is built in,
// tcp when torchrun's or srun's rank variables are set, else local). `env` reads the process's
// environment (a map in tests). Throws CommunicatorConfigError naming the backend when it is
// unknown or not built in, or the ranks' environment when it is missing or malformed;
// std::runtime_error when the ranks cannot meet (an unreachable store, a peer that never joins).
std::unique_ptr<Communicator> make_communicator(const std::string& backend, const CommunicatorOptions& options = {},
                                                const EnvLookup& env = process_env);

// Whether this build carries the MPI / NCCL backend; the built-in backends as "local, mpi, ...".
bool mpi_available();
bool nccl_available();
std::string available_backends();

}  // namespace mrcnn::comm
