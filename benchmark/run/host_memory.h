// What happens to host memory a process frees: kept for its next allocations, or handed back.
//
// A training step at 800x1333 allocates and frees tens of tensors of 30-140 MB each. With the C
// library's defaults (glibc: blocks above the mmap threshold, at most 32 MB, are mapped on
// allocation and unmapped on free) every step maps them afresh, and the kernel faults in and zeroes
// every page again: on 2 cores over a fifth of the step went to that (ResNet-50-FPN, batch 2: 22.8 s
// a step, 37 s of system time in a 96 s run; retained: 17.7 s, 10 s). kRetain keeps what is freed
// in the process instead (no mapped blocks, the heap never trimmed): the next step reuses pages
// already faulted in. The price is a peak resident size that stays at its high-water mark, +18 %
// in that run (3.06 -> 3.61 GB). Where the number matters more than the time, kSystem leaves the
// library's defaults. Neither changes a result: the arithmetic, and every tensor's alignment
// (64 bytes), are the same.
#pragma once

#include <string>

namespace mrcnn::run {

enum class HostMemory { kSystem, kRetain };

// "retain" | "system" (launch.host_memory); throws std::invalid_argument on anything else.
HostMemory host_memory_from_string(const std::string& name);

// Sets this process's policy; call it before the large allocations (blocks already mapped are
// unmapped on free as before). Returns false where it cannot be applied (a C library other than
// glibc); kSystem always succeeds (it changes nothing). Once retained, a process stays so.
bool apply_host_memory(HostMemory policy);

}  // namespace mrcnn::run
