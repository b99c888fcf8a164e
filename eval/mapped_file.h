// A file's bytes, read-only: mapped when it is a regular file (no copy, no zero fill of a 150 MB
// buffer; every process on the node reads the page cache's one copy), else read into memory (a
// pipe). The project's one file-mapping class: the COCO readers parse from it, and the prepared
// COCO index (benchmark/data/coco_index) lays its arrays over it.
//
// Ownership: owns the mapping (or the copy); movable, not copyable. bytes() is valid while it
// lives, may be read from any number of threads, and starts at an address aligned for any scalar.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mrcnn::eval {

// A file that cannot be opened or read, or is a directory; the message names the path.
class FileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class MappedFile {
 public:
  // Throws FileError naming the path when it cannot be opened or read, or is a directory.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const {
    return map_ ? std::string_view(static_cast<const char*>(map_), size_) : std::string_view(copy_);
  }
  size_t size() const { return bytes().size(); }
  bool mapped() const { return map_ != nullptr; }

 private:
  void* map_ = nullptr;
  size_t size_ = 0;
  std::string copy_;
};

}  // namespace mrcnn::eval
