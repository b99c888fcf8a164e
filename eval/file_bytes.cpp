#include "eval/file_bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "eval/coco.h"

namespace mrcnn::eval::detail {

FileBytes::FileBytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CocoError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  if (stated && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw CocoError(path + ": is a directory, not a JSON file");
  }
  if (stated && S_ISREG(st.st_mode) && st.st_size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p != MAP_FAILED) {
      map_ = p;
      size_ = static_cast<size_t>(st.st_size);
      ::madvise(p, size_, MADV_SEQUENTIAL);
    }
  }
  ::close(fd);
  if (!map_) copy_ = read_file(path);
}

FileBytes::~FileBytes() {
  if (map_) ::munmap(map_, size_);
}

}  // namespace mrcnn::eval::detail
