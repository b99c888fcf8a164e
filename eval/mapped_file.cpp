#include "eval/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace mrcnn::eval {

namespace {

[[noreturn]] void fail(const std::string& path, const char* what, int err) {
  throw FileError(path + ": " + what + ": " + std::strerror(err));
}

// The rest of an open descriptor's bytes (a pipe, or a file that could not be mapped).
std::string read_all(int fd, const std::string& path) {
  std::string data;
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got == 0) return data;
    if (got < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      fail(path, "cannot read", err);
    }
    data.append(buf, static_cast<size_t>(got));
  }
}

}  // namespace

MappedFile::MappedFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open", errno);
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  if (stated && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw FileError(path + ": is a directory, not a file");
  }
  if (stated && S_ISREG(st.st_mode) && st.st_size > 0) {
    // Read-only, so a private mapping is never copied: every reader shares the page cache.
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p != MAP_FAILED) {
      map_ = p;
      size_ = static_cast<size_t>(st.st_size);
      ::madvise(p, size_, MADV_SEQUENTIAL);
    }
  }
  if (!map_) copy_ = read_all(fd, path);
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (map_) ::munmap(map_, size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : map_(std::exchange(other.map_, nullptr)), size_(std::exchange(other.size_, 0)), copy_(std::move(other.copy_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (map_) ::munmap(map_, size_);
    map_ = std::exchange(other.map_, nullptr);
    size_ = std::exchange(other.size_, 0);
    copy_ = std::move(other.copy_);
  }
  return *this;
}

}  // namespace mrcnn::eval
