// launch.host_memory: with "retain", a large block freed stays in the process (glibc: it is not
// mapped on its own, and the heap is not trimmed when it is freed).
#include "benchmark/run/host_memory.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace mrcnn::run {
namespace {

TEST(HostMemory, NamesParseAndAnythingElseIsRefused) {
  EXPECT_EQ(host_memory_from_string("retain"), HostMemory::kRetain);
  EXPECT_EQ(host_memory_from_string("system"), HostMemory::kSystem);
  EXPECT_THROW(host_memory_from_string("keep"), std::invalid_argument);
  EXPECT_TRUE(apply_host_memory(HostMemory::kSystem));
}

#if defined(__GLIBC__)
constexpr size_t kBlock = size_t{96} << 20;  // above glibc's largest mmap threshold (32 MB)

// Touches every page so that the block is really there.
void* touched_block() {
  void* p = std::malloc(kBlock);
  if (p) std::memset(p, 1, kBlock);
  return p;
}

// The control (ctest runs each test in its own process; run alone, this one comes first): by
// glibc's defaults such a block is mapped on its own and unmapped when freed.
TEST(HostMemory, SystemDefaultsMapALargeBlockAndHandItBack) {
  const size_t mapped = mallinfo2().hblkhd;
  void* p = touched_block();
  ASSERT_NE(p, nullptr);
  EXPECT_GE(mallinfo2().hblkhd, mapped + kBlock);
  std::free(p);
  EXPECT_EQ(mallinfo2().hblkhd, mapped);
}

TEST(HostMemory, RetainKeepsAFreedLargeBlockForTheNextAllocation) {
  ASSERT_TRUE(apply_host_memory(HostMemory::kRetain));
  const size_t mapped = mallinfo2().hblkhd;
  void* p = touched_block();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(mallinfo2().hblkhd, mapped);  // from the heap, not a mapping of its own
  std::free(p);
  EXPECT_GE(mallinfo2().fordblks, kBlock);  // free, but still the process's
  void* again = std::malloc(kBlock);
  EXPECT_EQ(again, p);  // the same pages, already faulted in
  std::free(again);
}
#endif

}  // namespace
}  // namespace mrcnn::run
