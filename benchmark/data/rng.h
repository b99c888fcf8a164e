// The data pipeline's own random numbers: a small, fully specified generator so that every
// decision (epoch shuffle, flips, synthetic images) is the same on every machine, compiler and
// standard library. std::shuffle and std::uniform_*_distribution are implementation-defined and
// are never used for anything that must reproduce.
//
//   Rng r(seeding::flip_seed(seed, epoch, index));  // seeds: model/seeding.h, one per stream
//   r.next_u64(); r.uniform01(); r.below(n); r.uniform(lo, hi);
//
// Rng is xoshiro256** seeded through SplitMix64. A value type: cheap to copy, not thread-safe
// (give each thread its own), no global state.
#pragma once

#include <cstdint>

#include "model/seeding.h"

namespace mrcnn::data {

using seeding::derive_seed;

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t s = seed;
    for (auto& w : s_) w = seeding::splitmix64(s);
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform01() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform01(); }

  // Uniform integer in [0, n), unbiased (Lemire's multiply-and-reject). REQUIRES: n > 0.
  uint64_t below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * n;
    auto low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next_u64()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // Fisher-Yates shuffle of [first, last), the same permutation everywhere for the same stream.
  template <typename It>
  void shuffle(It first, It last) {
    const auto n = static_cast<uint64_t>(last - first);
    for (uint64_t i = n; i > 1; --i) {
      const uint64_t j = below(i);
      auto tmp = first[i - 1];
      first[i - 1] = first[j];
      first[j] = tmp;
    }
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];  // xoshiro256** state, never all zero (SplitMix64 output)
};

}  // namespace mrcnn::data
