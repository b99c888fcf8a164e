// randperm_prefix: the used prefix of LibTorch's CPU Fisher-Yates shuffle, and the skip of the
// generator over the draws the rest of the shuffle would have made.
#include "model/ops/box/randperm_prefix.h"

#include <ATen/ATen.h>
#include <ATen/core/MT19937RNGEngine.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace mrcnn::ops {

namespace {

constexpr int kStateWords = 624;  // mt19937's N
constexpr int kShift = 397;       // mt19937's M

inline uint32_t twist(uint32_t u, uint32_t v) {
  const uint32_t mixed = (u & 0x80000000u) | (v & 0x7fffffffu);
  return (mixed >> 1) ^ ((v & 1u) ? 0x9908b0dfu : 0u);
}

// mt19937's regeneration of its 624 words, as at::mt19937 computes it.
void regenerate(std::array<uint32_t, kStateWords>& s) {
  for (int i = 0; i < kStateWords - kShift; ++i) s[i] = s[i + kShift] ^ twist(s[i], s[i + 1]);
  for (int i = kStateWords - kShift; i < kStateWords - 1; ++i)
    s[i] = s[i + kShift - kStateWords] ^ twist(s[i], s[i + 1]);
  s[kStateWords - 1] = s[kShift - 1] ^ twist(s[kStateWords - 1], s[0]);
}

// The engine after `count` more 32-bit outputs. An output decrements left_ (regenerating the
// words when it reaches 0, which sets left_ = 624 and next_ = 0) and then reads word next_++:
// left_ - 1 outputs come before the next regeneration.
void discard(at::CPUGeneratorImpl& generator, uint64_t count) {
  if (count == 0) return;
  at::mt19937 engine = generator.engine();
  at::mt19937_data_pod d = engine.data();
  while (count > 0) {
    const auto before_regeneration = static_cast<uint64_t>(d.left_ - 1);
    if (count <= before_regeneration) {
      d.left_ -= static_cast<int>(count);
      d.next_ += static_cast<uint32_t>(count);
      break;
    }
    count -= before_regeneration + 1;  // the ones left, and the one that regenerates
    regenerate(d.state_);
    d.left_ = kStateWords;
    d.next_ = 1;
  }
  engine.set_data(d);
  generator.set_engine(engine);
}

bool same_state(const at::mt19937_data_pod& a, const at::mt19937_data_pod& b) {
  return a.seed_ == b.seed_ && a.left_ == b.left_ && a.seeded_ == b.seeded_ && a.next_ == b.next_ &&
         a.state_ == b.state_;
}

at::CPUGeneratorImpl& cpu_impl(at::Generator& g) { return *at::check_generator<at::CPUGeneratorImpl>(g); }

// One case of the probe: from a generator seeded with `seed` that has already drawn `before`
// words (so that shuffles start mid-block), prefix and state after, both ways.
bool agrees(int64_t n, int64_t k, uint64_t seed, int before) {
  at::Generator mine = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Generator theirs = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (int i = 0; i < before; ++i) {
    cpu_impl(mine).random();
    cpu_impl(theirs).random();
  }
  std::vector<int64_t> prefix;
  {
    std::lock_guard<std::mutex> lock(mine.mutex());
    prefix = randperm_prefix(n, k, cpu_impl(mine));
  }
  const at::Tensor full = at::randperm(n, theirs, at::TensorOptions().dtype(at::kLong));
  const int64_t used = std::min(k, n);
  if (static_cast<int64_t>(prefix.size()) != used) return false;
  const int64_t* p = full.const_data_ptr<int64_t>();
  if (!std::equal(prefix.begin(), prefix.end(), p)) return false;
  return same_state(cpu_impl(mine).engine().data(), cpu_impl(theirs).engine().data());
}

}  // namespace

std::vector<int64_t> randperm_prefix(int64_t n, int64_t k, at::CPUGeneratorImpl& generator) {
  if (n < 0 || n > kRandpermPrefixMaxN || k < 0)
    throw std::invalid_argument("randperm_prefix: need 0 <= n <= " + std::to_string(kRandpermPrefixMaxN) +
                                " and k >= 0, got n " + std::to_string(n) + ", k " + std::to_string(k));
  if (n == 0) return {};
  const int64_t used = std::min(k, n);
  const int64_t steps = std::min(k, n - 1);  // the shuffle makes n - 1 steps
  std::vector<int64_t> prefix(static_cast<size_t>(used));
  // The entries the steps moved; every other position j still holds j. A step i reads position i
  // (never written again) and writes position i + z >= i, so only the latter is kept.
  std::unordered_map<int64_t, int64_t> moved;
  moved.reserve(static_cast<size_t>(2 * steps));
  auto at_position = [&](int64_t j) {
    const auto it = moved.find(j);
    return it == moved.end() ? j : it->second;
  };
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t j = i + static_cast<int64_t>(generator.random()) % (n - i);
    const int64_t at_i = at_position(i), at_j = at_position(j);
    prefix[static_cast<size_t>(i)] = at_j;
    moved[j] = at_i;
  }
  if (used == n) prefix.back() = at_position(n - 1);  // the last entry takes no step
  discard(generator, static_cast<uint64_t>(n - 1 - steps));
  return prefix;
}

bool randperm_prefix_matches_aten() {
  static const bool matches = [] {
    // Sizes across several regenerations (624 words), prefixes shorter than, equal to and longer
    // than n, and starts at several offsets into the words.
    struct Case { int64_t n, k; };
    for (const Case c : {Case{0, 0}, Case{1, 1}, Case{2, 0}, Case{2, 5}, Case{3, 1}, Case{700, 0},
                         Case{700, 256}, Case{5000, 128}, Case{5000, 5000}, Case{20000, 256}})
      for (const int before : {0, 1, 623, 1000})
        if (!agrees(c.n, c.k, 1234 + static_cast<uint64_t>(c.n), before)) return false;
    return true;
  }();
  return matches;
}

}  // namespace mrcnn::ops
