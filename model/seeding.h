// Every random stream of a run, derived from the run seed in one place. Header-only, no
// dependencies, so the model and the harness draw from the same recipes:
//
//   stream                                   seed
//   network initialisation                   init_seed(seed)
//   epoch order of the training sampler      epoch_order_seed(seed, epoch)            (0-based epoch)
//   horizontal flip of a sample              flip_seed(seed, epoch, sample_index)
//   a training step's RPN/RoI sampling       step_seed(seed, rank, step)               (0-based step; rank 0 on
//                                            every rank when the model samples per image)
//   one image's sampling within a step       image_sample_seed(step_draw, image_key)  (model/targets)
//   synthetic dataset image                  synth_image_seed(seed, split, index)
//   fake (benchmark) batches                 fake_batch_seed(seed, step)
//
// Each stream is a pure function of its tuple, so a resumed run, another thread count or another
// rank count of the loader draws exactly what the uninterrupted run drew. The recipes are fixed:
// changing one changes every result of every seed, so a change here is a change of the results
// that a reviewer must be told about.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace mrcnn::seeding {

inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // 2^64 / phi, SplitMix64's increment

// SplitMix64's output function of x + kGolden: a stateless, well-mixed 64-bit hash.
constexpr uint64_t mix64(uint64_t x) {
  uint64_t z = x + kGolden;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One step of SplitMix64: advances `state` and returns a well-mixed 64-bit value.
constexpr uint64_t splitmix64(uint64_t& state) {
  const uint64_t out = mix64(state);
  state += kGolden;
  return out;
}

// A seed for the stream named by `parts` (e.g. {run_seed, tag, epoch, index}). Different tuples
// give unrelated streams; the order of the parts matters.
constexpr uint64_t derive_seed(std::initializer_list<uint64_t> parts) {
  uint64_t state = 0x6A09E667F3BCC909ull;  // any fixed constant: the stream family's name
  uint64_t h = splitmix64(state);
  for (uint64_t p : parts) {
    state ^= p + kGolden + (h << 6) + (h >> 2);
    h = splitmix64(state);
  }
  return h;
}

// ---- the run's streams ---------------------------------------------------------------------

constexpr uint64_t init_seed(uint64_t seed) { return seed; }

constexpr uint64_t epoch_order_seed(uint64_t seed, int64_t epoch) {
  return derive_seed({seed, 0x5A3Full, static_cast<uint64_t>(epoch)});
}

constexpr uint64_t flip_seed(uint64_t seed, int64_t epoch, int64_t sample_index) {
  return derive_seed({seed, 0xF11Full, static_cast<uint64_t>(epoch), static_cast<uint64_t>(sample_index)});
}

// Rank 0's stream is the single-rank one; every other rank samples from its own.
constexpr uint64_t step_seed(uint64_t seed, int rank, int64_t step) {
  return mix64(mix64(seed + kGolden * static_cast<uint64_t>(rank)) ^ static_cast<uint64_t>(step));
}

// `step_draw` is one draw from the step's generator; `image_key` identifies the image.
constexpr uint64_t image_sample_seed(uint64_t step_draw, int64_t image_key) {
  return mix64(step_draw ^ mix64(static_cast<uint64_t>(image_key)));
}

constexpr uint64_t synth_image_seed(uint64_t seed, int split, int64_t index) {
  return derive_seed({seed, static_cast<uint64_t>(split), static_cast<uint64_t>(index)});
}

constexpr uint64_t fake_batch_seed(uint64_t seed, int64_t step) {
  return derive_seed({seed, 0xFA4Eull, static_cast<uint64_t>(step)});
}

}  // namespace mrcnn::seeding
