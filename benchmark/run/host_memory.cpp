#include "benchmark/run/host_memory.h"

#include <stdexcept>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace mrcnn::run {

HostMemory host_memory_from_string(const std::string& name) {
  if (name == "retain") return HostMemory::kRetain;
  if (name == "system") return HostMemory::kSystem;
  throw std::invalid_argument("host memory policy \"" + name + "\" is not one of retain, system");
}

bool apply_host_memory(HostMemory policy) {
  if (policy == HostMemory::kSystem) return true;
#if defined(__GLIBC__)
  // No block is mapped on its own (so none is unmapped on free), and the top of the heap is never
  // given back (-1: mallopt(3)'s "disables trimming completely"). Threads' own arenas still map
  // their 64 MB heaps, and fall back to a mapping for a block larger than one.
  const bool no_mmap = mallopt(M_MMAP_MAX, 0) == 1;
  const bool no_trim = mallopt(M_TRIM_THRESHOLD, -1) == 1;
  return no_mmap && no_trim;
#else
  return false;
#endif
}

}  // namespace mrcnn::run
