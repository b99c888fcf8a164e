#include "benchmark/data/fake_data.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

#include "benchmark/data/batch.h"
#include "benchmark/data/rng.h"

namespace mrcnn::data {

void FakeBatchOptions::validate() const {
  auto bad = [](const std::string& what) { throw std::invalid_argument("FakeBatchOptions: " + what); };
  if (batch_size < 1) bad("batch_size must be >= 1");
  if (height < 1 || width < 1) bad("height and width must be >= 1");
  if (size_divisible < 1) bad("size_divisible must be >= 1");
  if (min_objects < 0 || max_objects < min_objects) bad("need 0 <= min_objects <= max_objects");
  if (num_classes < 2) bad("num_classes must be >= 2 (background plus one class)");
  if (polygon_vertices < 3) bad("polygon_vertices must be >= 3");
  if (!(pixel_amplitude >= 0.0f) || !std::isfinite(pixel_amplitude)) bad("pixel_amplitude must be finite and >= 0");
}

model::Batch make_fake_batch(const FakeBatchOptions& o, uint64_t seed, int64_t step) {
  o.validate();
  Rng rng(seeding::fake_batch_seed(seed, step));
  const ImageSize size{o.height, o.width};
  std::vector<SampleTargets> samples(static_cast<size_t>(o.batch_size));
  const double w = static_cast<double>(o.width), h = static_cast<double>(o.height);
  for (int64_t i = 0; i < o.batch_size; ++i) {
    SampleTargets& s = samples[static_cast<size_t>(i)];
    s.image_id = step * o.batch_size + i;
    s.original = size;
    s.resized = size;
    const int64_t count =
        o.min_objects + static_cast<int64_t>(rng.below(static_cast<uint64_t>(o.max_objects - o.min_objects + 1)));
    for (int64_t k = 0; k < count; ++k) {
      // Boxes 5%..50% of each side, anywhere inside the image.
      const double bw = rng.uniform(0.05, 0.5) * w, bh = rng.uniform(0.05, 0.5) * h;
      const double x0 = rng.uniform(0.0, w - bw), y0 = rng.uniform(0.0, h - bh);
      s.targets.boxes.insert(s.targets.boxes.end(), {static_cast<float>(x0), static_cast<float>(y0),
                                                     static_cast<float>(x0 + bw), static_cast<float>(y0 + bh)});
      s.targets.labels.push_back(1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(o.num_classes - 1))));
      for (int64_t v = 0; v < o.polygon_vertices; ++v) {
        const double a = 2.0 * std::numbers::pi * static_cast<double>(v) / static_cast<double>(o.polygon_vertices);
        s.targets.coords.push_back(x0 + bw * (0.5 + 0.5 * std::cos(a)));
        s.targets.coords.push_back(y0 + bh * (0.5 + 0.5 * std::sin(a)));
      }
      s.targets.poly_offsets.push_back(static_cast<int64_t>(s.targets.coords.size()));
      s.targets.instance_offsets.push_back(static_cast<int64_t>(s.targets.poly_offsets.size()) - 1);
    }
  }
  const ImageSize pad = padded_batch_size({size}, o.size_divisible);
  model::Batch batch;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(rng.next_u64());
  batch.images = at::zeros({o.batch_size, 3, pad.height, pad.width}, at::kFloat);
  batch.images.narrow(2, 0, o.height)
      .narrow(3, 0, o.width)
      .uniform_(-o.pixel_amplitude, o.pixel_amplitude, gen);
  assemble_targets(batch, samples, /*pin_memory=*/false);
  return batch;
}

}  // namespace mrcnn::data
