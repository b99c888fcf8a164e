// A file's bytes for one parse: mapped read-only when it is a regular file (no copy, no zero
// fill of a 150 MB buffer), else read into memory (a pipe). Internal to the COCO readers.
//
// Ownership: owns the mapping (or the copy); not copyable. view() is valid while it lives, and
// may be read from any number of threads.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mrcnn::eval::detail {

class FileBytes {
 public:
  // Throws CocoError naming the path when it cannot be opened or read, or is a directory.
  explicit FileBytes(const std::string& path);
  ~FileBytes();
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  std::string_view view() const {
    return map_ ? std::string_view(static_cast<const char*>(map_), size_) : std::string_view(copy_);
  }

 private:
  void* map_ = nullptr;
  size_t size_ = 0;
  std::string copy_;
};

}  // namespace mrcnn::eval::detail
