// The MPI communicator: OpenMPI ranks; tensors on another device go through host memory.
// Compiled only when CMake finds MPI.
#if MRCNN_HAVE_MPI
// The C API only: OpenMPI would otherwise pull in its deprecated C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "benchmark/comm/collective_watchdog.h"
#include "benchmark/comm/communicator.h"

namespace mrcnn::comm {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(std::string("MPI ") + what + " failed: " + std::string(msg, len));
}

MPI_Datatype mpi_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kLong: return MPI_INT64_T;
    case at::kInt: return MPI_INT32_T;
    default: throw std::runtime_error("MPI communicator: unsupported dtype " + std::string(c10::toString(t.scalar_type())));
  }
}

int byte_count(const std::string& s) {
  if (s.size() > static_cast<size_t>(INT_MAX)) throw std::runtime_error("MPI: a buffer of more than 2 GiB");
  return static_cast<int>(s.size());
}

// Offsets of consecutive buffers of these sizes; returns the total, which must fit an int.
int layout(const std::vector<int>& sizes, std::vector<int>& offsets) {
  int64_t total = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    offsets[r] = static_cast<int>(total);
    total += sizes[r];
    if (total > INT_MAX) throw std::runtime_error("MPI gather: more than 2 GiB in one gather");
  }
  return static_cast<int>(total);
}

class MpiCommunicator;

// One MPI_Iallreduce in flight.
struct MpiPendingSum final : Communicator::PendingSum {
  MpiPendingSum(MpiCommunicator* comm, at::Tensor buffer) : comm(comm), buffer(std::move(buffer)) {}
  ~MpiPendingSum() override;
  void wait() override;
  MpiCommunicator* comm;
  at::Tensor buffer;  // kept alive while MPI writes into it
  MPI_Request request = MPI_REQUEST_NULL;
};

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(const CommunicatorOptions& options) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "init");
      owns_init_ = true;
    }
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "comm_size");
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_), "split");
    check(MPI_Comm_rank(node_, &local_rank_), "local rank");
    check(MPI_Comm_size(node_, &local_size_), "local size");
    dog_ = std::make_unique<CollectiveWatchdog>(rank_, options.collective_timeout_s);
  }
  ~MpiCommunicator() override {
    MPI_Comm_free(&node_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_init_ && !finalized) MPI_Finalize();
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  std::string backend() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  void allreduce_sum(std::vector<at::Tensor>& tensors, int64_t bucket_bytes) override {
    reduce_in_buckets(tensors, bucket_bytes, [this](at::Tensor buffer) {
      // On the CPU the bucket is reduced where it is; elsewhere through one host copy.
      at::Tensor host = buffer.to(at::kCPU).contiguous();
      const auto watched = dog_->watch("all-reduce");
      check(MPI_Allreduce(MPI_IN_PLACE, host.data_ptr(), static_cast<int>(host.numel()), mpi_type(host), MPI_SUM,
                          MPI_COMM_WORLD),
            "allreduce");
      return host;
    });
  }

  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    for (auto& t : tensors) {
      at::Tensor c = t.to(at::kCPU).contiguous();
      const auto watched = dog_->watch("broadcast");
      check(MPI_Bcast(c.data_ptr(), static_cast<int>(c.numel()), mpi_type(c), root, MPI_COMM_WORLD), "broadcast");
      if (!c.is_same(t)) t.copy_(c);
    }
  }

  // CPU buffers: MPI_Iallreduce, moved along by progress() and finished by wait(); others at once.
  std::unique_ptr<PendingSum> start_allreduce_sum(at::Tensor buffer) override {
    if (!buffer.is_cpu() || !buffer.is_contiguous()) return Communicator::start_allreduce_sum(std::move(buffer));
    auto pending = std::make_unique<MpiPendingSum>(this, buffer);
    check(MPI_Iallreduce(MPI_IN_PLACE, buffer.data_ptr(), static_cast<int>(buffer.numel()), mpi_type(buffer), MPI_SUM,
                         MPI_COMM_WORLD, &pending->request),
          "iallreduce");
    open_.push_back(&pending->request);
    return pending;
  }
  bool overlaps(const at::Device& device) const override { return device.is_cpu(); }
  void progress() override {
    for (MPI_Request* r : open_) {
      int done = 0;
      if (*r != MPI_REQUEST_NULL) MPI_Test(r, &done, MPI_STATUS_IGNORE);
    }
  }

  std::vector<std::string> allgather_bytes(const std::string& mine) override {
    const int n = byte_count(mine);
    const auto watched = dog_->watch("all-gather");
    std::vector<int> sizes(size_), offsets(size_);
    check(MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD), "allgather sizes");
    const int total = layout(sizes, offsets);
    std::string all(static_cast<size_t>(total), '\0');
    check(MPI_Allgatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE, MPI_COMM_WORLD),
          "allgatherv");
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(offsets[r], sizes[r]));
    return out;
  }

  std::vector<std::string> gather_bytes(const std::string& mine, int root) override {
    const int n = byte_count(mine);
    const auto watched = dog_->watch("gather");
    std::vector<int> sizes(rank_ == root ? size_ : 0), offsets(sizes.size());
    check(MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, MPI_COMM_WORLD), "gather sizes");
    // Every rank learns whether the total fits before anyone sends, so that all fail together.
    int fits = 1;
    if (rank_ == root) {
      int64_t total = 0;
      for (int s : sizes) total += s;
      fits = total <= INT_MAX ? 1 : 0;
    }
    check(MPI_Bcast(&fits, 1, MPI_INT, root, MPI_COMM_WORLD), "gather check");
    if (!fits) throw std::runtime_error("MPI gather: more than 2 GiB in one gather");
    std::string all;
    if (rank_ == root) all.resize(static_cast<size_t>(layout(sizes, offsets)));
    check(MPI_Gatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE, root,
                      MPI_COMM_WORLD),
          "gatherv");
    std::vector<std::string> out;
    for (size_t r = 0; r < sizes.size(); ++r) out.push_back(all.substr(offsets[r], sizes[r]));
    return out;
  }

  void barrier() override {
    const auto watched = dog_->watch("barrier");
    check(MPI_Barrier(MPI_COMM_WORLD), "barrier");
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this is for the compiler
  }

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  MPI_Comm node_ = MPI_COMM_NULL;
  bool owns_init_ = false;
  std::unique_ptr<CollectiveWatchdog> dog_;
  std::vector<MPI_Request*> open_;  // requests of the started sums not yet waited for
  friend struct MpiPendingSum;
};

void MpiPendingSum::wait() {
  if (request == MPI_REQUEST_NULL) return;
  const auto watched = comm->dog_->watch("all-reduce");
  check(MPI_Wait(&request, MPI_STATUS_IGNORE), "iallreduce wait");
}

MpiPendingSum::~MpiPendingSum() {
  std::erase(comm->open_, &request);
  if (request == MPI_REQUEST_NULL) return;
  const auto watched = comm->dog_->watch("all-reduce");  // never free a buffer MPI writes into
  MPI_Wait(&request, MPI_STATUS_IGNORE);
}

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(const CommunicatorOptions& options) {
  return std::make_unique<MpiCommunicator>(options);
}

}  // namespace mrcnn::comm
#endif  // MRCNN_HAVE_MPI
