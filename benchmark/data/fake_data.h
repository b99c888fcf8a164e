// Fake-data mode: random in-memory batches of any shape, for measuring the model's throughput
// without decoding or I/O. A batch is a pure function of (options, seed, step): the same call
// gives the same tensors. Images hold uniform noise in [-pixel_amplitude, pixel_amplitude]; each
// image gets between min_objects and max_objects instances with random boxes inside the image,
// random labels in 1..num_classes-1, and an elliptical polygon inscribed in each box (so that
// mask targets are non-trivial).
//
// Thread-safety: a pure function; safe to call from any thread.
#pragma once

#include <cstdint>

#include "model/structures.h"

namespace mrcnn::data {

struct FakeBatchOptions {
  int64_t batch_size = 2;         // images per batch, >= 1
  int64_t height = 800;           // every image's size before padding, >= 1
  int64_t width = 1333;
  int64_t size_divisible = 32;    // padded size is rounded up to a multiple of this
  int64_t min_objects = 1;        // instances per image, 0 <= min <= max
  int64_t max_objects = 8;
  int64_t num_classes = 81;       // including background, >= 2
  int64_t polygon_vertices = 16;  // vertices of each instance's polygon, >= 3
  float pixel_amplitude = 128.0f; // images are uniform in [-a, a] (BGR 0..255 minus the mean)

  // Throws std::invalid_argument naming the field when a value is out of range.
  void validate() const;
};

model::Batch make_fake_batch(const FakeBatchOptions& options, uint64_t seed, int64_t step = 0);

}  // namespace mrcnn::data
