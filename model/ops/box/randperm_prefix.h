// The first k entries of at::randperm(n, generator) on a CPU generator, without the other n - k.
//
// LibTorch's CPU randperm (for n below 2^32 / 20) is a Fisher-Yates shuffle of [0, n): for
// i = 0 .. n-2 it draws z = generator.random() % (n - i) and swaps entries i and i + z. Entry i is
// final once step i is done, so the first k entries need only the first k steps; a map of the
// positions those steps touched stands in for the array. The shuffle's other n - 1 - k draws are
// still taken from the generator (without tempering the words, which nobody reads), so that it
// ends where randperm leaves it: every later draw (the next image's, the RoI head's) is unchanged.
// The sampler keeps at most 256 of ~268,000 anchors of an 800x1344 image: 8 images' draws take
// ~0.1 ms here against ~35 ms for 8 full permutations.
//
// randperm_prefix_matches_aten() compares this with at::randperm once per process (prefix and
// the generator's state after) for a few sizes; the sampler uses the prefix only where it agrees,
// so another LibTorch with another shuffle costs time, never a different draw.
//
// Thread-safety: randperm_prefix mutates the generator and takes no lock: the caller holds the
// generator's mutex. randperm_prefix_matches_aten is safe to call from any thread.
#pragma once

#include <ATen/CPUGeneratorImpl.h>

#include <cstdint>
#include <vector>

namespace mrcnn::ops {

// The largest n for which LibTorch's CPU randperm is the modulo Fisher-Yates described above
// (larger n draw 64-bit words in another order: those go to at::randperm).
inline constexpr int64_t kRandpermPrefixMaxN = (int64_t{1} << 32) / 20 - 1;

// The first min(k, n) entries of at::randperm(n, generator), leaving `generator` as at::randperm
// would. Requires 0 <= n <= kRandpermPrefixMaxN and k >= 0 (std::invalid_argument otherwise).
std::vector<int64_t> randperm_prefix(int64_t n, int64_t k, at::CPUGeneratorImpl& generator);

// Whether randperm_prefix equals at::randperm with this LibTorch (checked once, then cached).
bool randperm_prefix_matches_aten();

}  // namespace mrcnn::ops
