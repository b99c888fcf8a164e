// The TCP communicator's sockets (internal to benchmark/comm): one closed when it goes out of
// scope, tuned for the ring, and a connect() that gives up in time. No LibTorch.
#pragma once

#include <netinet/in.h>
#include <unistd.h>

#include <utility>

namespace mrcnn::comm::tcp {

// A socket closed when it goes out of scope (set-up that throws leaks nothing).
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// No Nagle delay; 4 MiB send and receive buffers (a ring step's chunk in flight).
void tune(int fd);

// connect() within `ms` milliseconds (a silently dropped SYN would otherwise block for the
// kernel's two minutes of retries); 0 or the errno of the failure.
int connect_within(int fd, const sockaddr_in& a, int ms);

}  // namespace mrcnn::comm::tcp
