#include "benchmark/comm/communicator.h"

#include <cstdlib>
#include <stdexcept>

namespace mrcnn::comm {

void Communicator::allreduce_mean(std::vector<at::Tensor>& tensors, int64_t bucket_bytes) {
  if (world_size() == 1) return;
  allreduce_sum(tensors, bucket_bytes);
  at::NoGradGuard no_grad;
  for (auto& t : tensors) t.div_(world_size());
}

std::unique_ptr<Communicator::PendingSum> Communicator::start_allreduce_sum(at::Tensor buffer) {
  std::vector<at::Tensor> one{std::move(buffer)};
  allreduce_sum(one, one[0].nbytes() + 1);  // one bucket: the buffer itself
  return std::make_unique<PendingSum>();
}

void reduce_in_buckets(std::vector<at::Tensor>& tensors, int64_t bucket_bytes,
                       const std::function<at::Tensor(at::Tensor buffer)>& reduce) {
  size_t i = 0;
  while (i < tensors.size()) {
    size_t j = i;
    int64_t bytes = 0;
    const auto dtype = tensors[i].scalar_type();
    const auto device = tensors[i].device();
    while (j < tensors.size() && tensors[j].scalar_type() == dtype && tensors[j].device() == device &&
           (j == i || bytes + static_cast<int64_t>(tensors[j].nbytes()) <= bucket_bytes)) {
      bytes += static_cast<int64_t>(tensors[j].nbytes());
      ++j;
    }
    std::vector<at::Tensor> flat;
    for (size_t k = i; k < j; ++k) flat.push_back(tensors[k].reshape({-1}));
    const at::Tensor reduced = reduce(at::cat(flat));
    int64_t offset = 0;
    for (size_t k = i; k < j; ++k) {
      const int64_t n = tensors[k].numel();
      tensors[k].copy_(reduced.narrow(0, offset, n).view(tensors[k].sizes()));
      offset += n;
    }
    i = j;
  }
}

namespace {

class LocalCommunicator final : public Communicator {
 public:
  std::string backend() const override { return "local"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  void allreduce_sum(std::vector<at::Tensor>&, int64_t) override {}
  void broadcast(std::vector<at::Tensor>&, int root) override {
    if (root != 0) throw std::invalid_argument("broadcast: root " + std::to_string(root) + " with one rank");
  }
  std::vector<std::string> allgather_bytes(const std::string& mine) override { return {mine}; }
  std::vector<std::string> gather_bytes(const std::string& mine, int root) override {
    if (root != 0) throw std::invalid_argument("gather: root " + std::to_string(root) + " with one rank");
    return {mine};
  }
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::_Exit(code); }
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator() { return std::make_unique<LocalCommunicator>(); }

#if MRCNN_HAVE_MPI
std::unique_ptr<Communicator> make_mpi_communicator(const CommunicatorOptions& options);  // mpi_communicator.cpp
bool mpi_available() { return true; }
#else
bool mpi_available() { return false; }
#endif
#if MRCNN_HAVE_NCCL
std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> host,
                                                     const CommunicatorOptions& options);  // nccl_communicator.cpp
bool nccl_available() { return true; }
#else
bool nccl_available() { return false; }
#endif
std::unique_ptr<Communicator> make_tcp_communicator(const RankEnvironment& env,
                                                    const CommunicatorOptions& options);  // tcp_communicator.cpp

std::string available_backends() {
  std::string out = "local";
  if (mpi_available()) out += ", mpi";
  out += ", tcp";
  if (nccl_available()) out += ", nccl";
  return out;
}

namespace {

std::unique_ptr<Communicator> make_mpi(const CommunicatorOptions& options) {
#if MRCNN_HAVE_MPI
  return make_mpi_communicator(options);
#else
  (void)options;
  throw CommunicatorConfigError("communicator backend 'mpi' is not built in (CMake did not find MPI)");
#endif
}

// The ranks' own environment (torchrun, srun --mpi=none, by hand), or an error saying none is set.
RankEnvironment required_rank_environment(const std::string& backend, const EnvLookup& env) {
  if (auto r = read_rank_environment(env)) return *r;
  throw CommunicatorConfigError("communicator '" + backend +
                           "': no ranks to join: start the ranks with mpirun, torchrun or srun, or set RANK, "
                           "WORLD_SIZE, MASTER_ADDR and MASTER_PORT");
}

// How the ranks talk on the host: MPI where it started them and is built in, else the TCP ring
// over the ranks' environment (srun sets SLURM_* whatever its --mpi).
std::unique_ptr<Communicator> make_host(const std::string& backend, const CommunicatorOptions& options,
                                        const EnvLookup& env) {
  if (started_by_mpi(env) && mpi_available()) return make_mpi(options);
  return make_tcp_communicator(required_rank_environment(backend, env), options);
}

}  // namespace

std::unique_ptr<Communicator> make_communicator(const std::string& backend, const CommunicatorOptions& options,
                                                const EnvLookup& env) {
  if (backend == "local") return make_local_communicator();
  if (backend == "mpi") return make_mpi(options);
  if (backend == "tcp") return make_tcp_communicator(required_rank_environment(backend, env), options);
  if (backend == "nccl") {
#if MRCNN_HAVE_NCCL
    return make_nccl_communicator(make_host(backend, options, env), options);
#else
    throw CommunicatorConfigError("communicator backend 'nccl' is not built in (it needs CUDA and NCCL at build time)");
#endif
  }
  if (backend == "auto") {
    if (started_by_mpi(env) && mpi_available()) return make_mpi(options);
    if (auto r = read_rank_environment(env)) return make_tcp_communicator(*r, options);
    return make_local_communicator();
  }
  throw CommunicatorConfigError("unknown communicator backend '" + backend + "' (expected local, mpi, tcp, nccl or auto)");
}

}  // namespace mrcnn::comm
