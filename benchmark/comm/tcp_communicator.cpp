// The TCP communicator: ranks started by torchrun, by srun --mpi=none or by hand (see
// rank_environment.h), no MPI. The ranks meet once through c10d's TCPStore (LibTorch's own,
// hosted by rank 0 or torchrun's agent), each publishing the address of a listening socket; then
// every collective runs over a ring of TCP connections (each rank to the next):
//   all-reduce   reduce-scatter, then all-gather, of N chunks (N - 1 steps each); chunk c is
//                summed in the fixed order c, c+1, ..., so every run and every rank get the same
//                bits (with 2 ranks the sum a + b of MPI's)
//   broadcast    passed along the ring from the root in 4 MiB pieces
//   gathers      N - 1 steps of the ring, each rank forwarding what it received
// Tensors on another device go through host memory, as with MPI. A peer that goes away closes
// its sockets: the next collective fails on the other ranks with a message naming it. A peer
// that hangs (or a cut link) moves no byte: after launch.collective_timeout_s without one the
// collective fails the same way. Either failure is an exception, so the training thread closes
// the MLPerf log (run_stop aborted) before the rank ends.
// The addresses it dials and the sockets it holds are tcp_address.h and tcp_socket.h; this file is
// the rendezvous, the moving of bytes both ways at once, and the ring.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "benchmark/comm/communicator.h"
#include "benchmark/comm/rank_environment.h"
#include "benchmark/comm/tcp_address.h"
#include "benchmark/comm/tcp_socket.h"

namespace mrcnn::comm {
namespace {

using tcp::Socket;

constexpr size_t kBroadcastPiece = size_t{4} << 20;
constexpr uint32_t kHello = 0x6d72636e;  // "mrcn": a connection from one of ours

std::string errno_text(int e) { return std::strerror(e); }

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

struct Peer {
  int rank = -1;
  std::string host;     // its host name
  std::string address;  // ip:port of its listening socket
  std::string name() const { return "rank " + std::to_string(rank) + " (" + host + ", " + address + ")"; }
};

class TcpCommunicator final : public Communicator {
 public:
  TcpCommunicator(const RankEnvironment& env, const CommunicatorOptions& options)
      : rank_(env.rank), size_(env.world_size), host_(tcp::host_name()), timeout_s_(options.collective_timeout_s) {
    if (size_ == 1) {
      local_size_ = 1;
      return;
    }
    meet(env, options);
    learn_hosts(env);
  }
  TcpCommunicator(const TcpCommunicator&) = delete;
  TcpCommunicator& operator=(const TcpCommunicator&) = delete;

  std::string backend() const override { return "tcp"; }
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  void allreduce_sum(std::vector<at::Tensor>& tensors, int64_t bucket_bytes) override {
    if (size_ == 1) return;
    reduce_in_buckets(tensors, bucket_bytes, [this](at::Tensor buffer) {
      at::Tensor host = buffer.to(at::kCPU).contiguous();
      doing_ = "all-reduce";
      ring_allreduce(host);
      return host;
    });
  }

  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    if (root < 0 || root >= size_) throw std::invalid_argument("broadcast: root " + std::to_string(root));
    if (size_ == 1) return;
    for (auto& t : tensors) {
      at::Tensor c = t.to(at::kCPU).contiguous();
      doing_ = "broadcast";
      auto* data = static_cast<char*>(c.data_ptr());
      const size_t n = c.nbytes();
      const bool forward = (rank_ + 1) % size_ != root;
      for (size_t at = 0; at < n; at += kBroadcastPiece) {
        const size_t len = std::min(kBroadcastPiece, n - at);
        if (rank_ != root) exchange(nullptr, 0, data + at, len);
        if (forward) exchange(data + at, len, nullptr, 0);
      }
      if (!c.is_same(t)) t.copy_(c);
    }
  }

  std::vector<std::string> allgather_bytes(const std::string& mine) override {
    std::vector<std::string> blocks(static_cast<size_t>(size_));
    blocks[static_cast<size_t>(rank_)] = mine;
    if (size_ == 1) return blocks;
    doing_ = "all-gather";
    for (int s = 0; s < size_ - 1; ++s) {
      const std::string& out = blocks[static_cast<size_t>(mod(rank_ - s))];
      std::string& in = blocks[static_cast<size_t>(mod(rank_ - s - 1))];
      uint64_t out_len = out.size(), in_len = 0;
      exchange(&out_len, sizeof out_len, &in_len, sizeof in_len);
      in.assign(static_cast<size_t>(in_len), '\0');
      exchange(out.data(), out.size(), in.data(), in.size());
    }
    return blocks;
  }

  std::vector<std::string> gather_bytes(const std::string& mine, int root) override {
    if (root < 0 || root >= size_) throw std::invalid_argument("gather: root " + std::to_string(root));
    std::vector<std::string> all = allgather_bytes(mine);
    return rank_ == root ? all : std::vector<std::string>{};
  }

  void barrier() override { allgather_bytes(""); }

  // The peers see this rank's sockets close and fail their next collective; launchers (torchrun,
  // srun --kill-on-bad-exit) end the rest.
  [[noreturn]] void abort(int code) override { std::_Exit(code); }

 private:
  int mod(int i) const { return ((i % size_) + size_) % size_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("rank " + std::to_string(rank_) + " (" + host_ + "): " + what);
  }

  // Rendezvous: a listening socket, its address through the store, a connection to the next rank
  // and one accepted from the previous.
  void meet(const RankEnvironment& env, const CommunicatorOptions& options) {
    const std::string store_ip = tcp::resolve(env.master_addr);
    if (store_ip.empty()) fail("MASTER_ADDR=" + env.master_addr + " does not resolve to an IPv4 address");
    const std::string route_ip = tcp::local_address_towards(store_ip);
    if (route_ip.empty()) fail("no route to MASTER_ADDR=" + env.master_addr + " (" + store_ip + ")");
    const Socket listener = listen_on(tcp::reachable_address(route_ip));
    const double wait_s = options.collective_timeout_s > 0 ? options.collective_timeout_s : 1800;
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000));
    const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
    c10::intrusive_ptr<c10d::TCPStore> store;
    try {
      c10d::TCPStoreOptions o;
      o.port = env.master_port;
      o.isServer = rank_ == 0 && !env.agent_store;
      o.numWorkers = std::nullopt;
      o.waitWorkers = false;
      o.timeout = timeout;
      o.multiTenant = true;
      store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
    } catch (const std::exception& e) {
      fail(std::string(rank_ == 0 && !env.agent_store ? "cannot host" : "cannot reach") + " the ranks' store at " +
           where + ": " + first_line(e.what()));
    }
    const std::string prefix = "mrcnn/attempt_" + std::to_string(env.attempt) + "/";
    const int next = mod(rank_ + 1);
    std::string next_address;
    try {
      store->set(prefix + "address/" + std::to_string(rank_), bytes_of(listen_address_));
      const std::vector<uint8_t> v = store->get(prefix + "address/" + std::to_string(next));
      next_address.assign(v.begin(), v.end());
    } catch (const std::exception& e) {
      fail("rank " + std::to_string(next) + " did not join at " + where + " within " +
           std::to_string(static_cast<long>(wait_s)) + " s: " + first_line(e.what()));
    }
    next_ = {next, "?", next_address};
    prev_ = {mod(rank_ - 1), "?", "?"};
    next_fd_ = connect_to(next_address, next, timeout);
    prev_fd_ = accept_from(listener.get(), prev_.rank, timeout);
    store_ = store;  // kept until the end: rank 0's server must outlive the others' set-up
  }

  static std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

  Socket listen_on(const std::string& ip) {
    Socket sock(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int fd = sock.get();
    if (fd < 0) fail("socket: " + errno_text(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = 0;                      // any free port
    a.sin_addr.s_addr = htonl(INADDR_ANY);  // `ip` is what the others dial; any interface answers
    socklen_t len = sizeof a;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 4) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      fail("cannot listen on " + ip + ": " + errno_text(errno));
    listen_address_ = ip + ":" + std::to_string(ntohs(a.sin_port));
    return sock;
  }

  Socket connect_to(const std::string& address, int peer, std::chrono::milliseconds timeout) {
    const size_t colon = address.rfind(':');
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(std::atoi(address.c_str() + colon + 1)));
    if (colon == std::string::npos || inet_pton(AF_INET, address.substr(0, colon).c_str(), &a.sin_addr) != 1)
      fail("rank " + std::to_string(peer) + " published a malformed address '" + address + "'");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      Socket sock(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      if (sock.get() < 0) fail("socket: " + errno_text(errno));
      const int e = tcp::connect_within(sock.get(), a, 10000);
      if (e == 0) {
        tcp::tune(sock.get());
        const uint32_t hello[2] = {kHello, static_cast<uint32_t>(rank_)};
        send_all(sock.get(), hello, sizeof hello, peer);
        return sock;
      }
      if (std::chrono::steady_clock::now() > deadline)
        fail("cannot connect to rank " + std::to_string(peer) + " at " + address + ": " + errno_text(e));
      usleep(100 * 1000);
    }
  }

  Socket accept_from(int listener, int peer, std::chrono::milliseconds timeout) {
    pollfd p{listener, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(timeout.count(), INT32_MAX)));
    if (ready <= 0) fail("rank " + std::to_string(peer) + " did not connect within the collective timeout");
    Socket sock(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (sock.get() < 0) fail("accept: " + errno_text(errno));
    tcp::tune(sock.get());
    uint32_t hello[2] = {0, 0};
    recv_all(sock.get(), hello, sizeof hello, peer);
    if (hello[0] != kHello || static_cast<int>(hello[1]) != peer) {
      fail("a connection that is not rank " + std::to_string(peer) + "'s arrived at " + listen_address_ +
           " (another job on this port?)");
    }
    return sock;
  }

  // Every rank's host (over the ring, now that it stands): local ranks are the ranks on this
  // host, in rank order, as MPI counts them.
  void learn_hosts(const RankEnvironment& env) {
    const std::vector<std::string> all = allgather_bytes(host_ + "\n" + listen_address_);
    local_rank_ = 0;
    local_size_ = 0;
    for (int r = 0; r < size_; ++r) {
      const std::string& s = all[static_cast<size_t>(r)];
      const std::string host = s.substr(0, s.find('\n'));
      if (r == next_.rank) next_ = {r, host, s.substr(s.find('\n') + 1)};
      if (r == prev_.rank) prev_ = {r, host, s.substr(s.find('\n') + 1)};
      if (host != host_) continue;
      if (r < rank_) ++local_rank_;
      ++local_size_;
    }
    if (env.local_rank && *env.local_rank != local_rank_)
      fail(env.launcher + " numbers this rank " + std::to_string(*env.local_rank) + " on its node (LOCAL_RANK/SLURM_LOCALID), but it is rank " +
           std::to_string(local_rank_) + " of the " + std::to_string(local_size_) + " ranks on host " + host_ +
           " in rank order: ranks sharing a node must have consecutive ranks");
  }

  void send_all(int fd, const void* data, size_t n, int peer) { transfer(fd, data, n, -1, nullptr, 0, peer, peer); }
  void recv_all(int fd, void* data, size_t n, int peer) { transfer(-1, nullptr, 0, fd, data, n, peer, peer); }

  // Sends `out` to the next rank while receiving `in` from the previous one.
  void exchange(const void* out, size_t out_n, void* in, size_t in_n) {
    transfer(next_fd_.get(), out, out_n, prev_fd_.get(), in, in_n, next_.rank, prev_.rank);
  }

  // Both directions at once (a ring where every rank first sent would stall once the socket
  // buffers fill): poll until the bytes are out and in.
  void transfer(int out_fd, const void* out, size_t out_n, int in_fd, void* in, size_t in_n, int out_peer,
                int in_peer) {
    const auto* o = static_cast<const char*>(out);
    auto* i = static_cast<char*>(in);
    size_t sent = 0, got = 0;
    const int wait_ms = timeout_s_ > 0 ? static_cast<int>(std::min(timeout_s_ * 1000, 2e9)) : -1;
    while (sent < out_n || got < in_n) {
      pollfd p[2];
      int n = 0;
      if (sent < out_n) p[n++] = {out_fd, POLLOUT, 0};
      if (got < in_n) p[n++] = {in_fd, POLLIN, 0};
      const int ready = poll(p, static_cast<nfds_t>(n), wait_ms);  // the wait restarts with every byte
      if (ready < 0) {
        if (errno == EINTR) continue;
        fail("poll: " + errno_text(errno));
      }
      if (ready == 0) stalled(got < in_n ? in_peer : out_peer, got < in_n ? "from" : "to");
      for (int k = 0; k < n; ++k) {
        if (p[k].revents == 0) continue;
        if (p[k].fd == out_fd && sent < out_n && (p[k].events & POLLOUT)) {
          const ssize_t w = ::send(out_fd, o + sent, out_n - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
          if (w > 0) sent += static_cast<size_t>(w);
          else if (w < 0 && errno != EAGAIN && errno != EINTR) lost(out_peer, "sending", errno);
        } else if (p[k].fd == in_fd && got < in_n) {
          const ssize_t r = ::recv(in_fd, i + got, in_n - got, MSG_DONTWAIT);
          if (r > 0) got += static_cast<size_t>(r);
          else if (r == 0) lost(in_peer, "receiving", 0);
          else if (errno != EAGAIN && errno != EINTR) lost(in_peer, "receiving", errno);
        }
      }
    }
  }

  [[noreturn]] void stalled(int peer, const char* direction) const {
    const Peer& p = peer == next_.rank ? next_ : prev_;
    fail(std::string("no data moved ") + direction + " " + (p.rank == peer ? p.name() : "rank " + std::to_string(peer)) +
         " for " + std::to_string(static_cast<long>(timeout_s_)) + " s in the " + doing_ +
         ": it is dead or hung, or the network between them is (launch.collective_timeout_s)");
  }

  [[noreturn]] void lost(int peer, const char* doing, int e) const {
    const Peer& p = peer == next_.rank ? next_ : prev_;
    fail("lost the connection to " + (p.rank == peer ? p.name() : "rank " + std::to_string(peer)) + " while " +
         doing + " in the " + doing_ + ": " +
         (e == 0 ? std::string("it closed the connection (the rank ended)") : errno_text(e)));
  }

  // Ring all-reduce of one contiguous host tensor, in place.
  void ring_allreduce(at::Tensor& t) {
    const int64_t n = t.numel();
    const size_t elem = t.element_size();
    auto begin = [&](int c) { return n * c / size_; };
    auto chunk = [&](int c) { return t.narrow(0, begin(c), begin(c + 1) - begin(c)); };
    at::Tensor incoming = at::empty({n / size_ + 1}, t.options());
    auto* base = static_cast<char*>(t.data_ptr());
    for (int s = 0; s < size_ - 1; ++s) {  // reduce-scatter: rank r ends with chunk r+1 summed
      const int out = mod(rank_ - s), in = mod(rank_ - s - 1);
      const int64_t in_len = begin(in + 1) - begin(in);
      exchange(base + begin(out) * elem, static_cast<size_t>(begin(out + 1) - begin(out)) * elem,
               incoming.data_ptr(), static_cast<size_t>(in_len) * elem);
      chunk(in).add_(incoming.narrow(0, 0, in_len));
    }
    for (int s = 0; s < size_ - 1; ++s) {  // all-gather of the summed chunks
      const int out = mod(rank_ + 1 - s), in = mod(rank_ - s);
      exchange(base + begin(out) * elem, static_cast<size_t>(begin(out + 1) - begin(out)) * elem,
               base + begin(in) * elem, static_cast<size_t>(begin(in + 1) - begin(in)) * elem);
    }
  }

  const int rank_, size_;
  const std::string host_;
  const double timeout_s_;           // 0: wait forever
  const char* doing_ = "set-up";     // the collective under way, for messages
  int local_rank_ = 0, local_size_ = 1;
  std::string listen_address_;
  Peer next_, prev_;
  Socket next_fd_, prev_fd_;  // members: closed even when the constructor throws
  c10::intrusive_ptr<c10d::TCPStore> store_;
};

}  // namespace

std::unique_ptr<Communicator> make_tcp_communicator(const RankEnvironment& env, const CommunicatorOptions& options) {
  return std::make_unique<TcpCommunicator>(env, options);
}

}  // namespace mrcnn::comm
