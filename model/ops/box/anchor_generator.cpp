// AnchorGenerator: torchvision's anchors, computed with the same float32 operations.
#include "model/ops/box/anchor_generator.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "model/ops/host_copy.h"

namespace mrcnn::ops {
namespace {

void check_positive(const std::vector<double>& v, const std::string& what) {
  if (v.empty()) throw std::invalid_argument("AnchorGenerator: " + what + " is empty");
  for (size_t i = 0; i < v.size(); ++i) {
    if (!(std::isfinite(v[i]) && v[i] > 0)) {
      throw std::invalid_argument("AnchorGenerator: " + what + "[" + std::to_string(i) +
                                  "] = " + std::to_string(v[i]) + "; expected a finite value > 0");
    }
  }
}

// torchvision's generate_anchors, in float32: for each ratio (outer) and size (inner),
// round([-ws, -hs, ws, hs] / 2) with h_ratio = sqrt(r), w_ratio = 1 / h_ratio.
at::Tensor make_cell_anchors(const std::vector<double>& sizes, const std::vector<double>& ratios) {
  at::Tensor out = at::empty({static_cast<int64_t>(ratios.size() * sizes.size()), 4},
                             at::TensorOptions().dtype(at::kFloat));
  float* p = out.mutable_data_ptr<float>();
  for (double r : ratios) {
    const float h_ratio = std::sqrt(static_cast<float>(r));
    const float w_ratio = 1.0f / h_ratio;
    for (double s : sizes) {
      const float ws = w_ratio * static_cast<float>(s);
      const float hs = h_ratio * static_cast<float>(s);
      // round half to even, as torch.round
      *p++ = std::nearbyint(-ws / 2.0f);
      *p++ = std::nearbyint(-hs / 2.0f);
      *p++ = std::nearbyint(ws / 2.0f);
      *p++ = std::nearbyint(hs / 2.0f);
    }
  }
  return out;
}

}  // namespace

AnchorGenerator::AnchorGenerator(std::vector<std::vector<double>> sizes,
                                 std::vector<double> aspect_ratios)
    : sizes_(std::move(sizes)), aspect_ratios_(std::move(aspect_ratios)) {
  if (sizes_.empty()) throw std::invalid_argument("AnchorGenerator: no levels (sizes is empty)");
  check_positive(aspect_ratios_, "aspect_ratios");
  for (size_t l = 0; l < sizes_.size(); ++l) {
    check_positive(sizes_[l], "sizes[" + std::to_string(l) + "]");
    cell_anchors_.push_back(make_cell_anchors(sizes_[l], aspect_ratios_));
  }
}

AnchorGenerator AnchorGenerator::fpn_default() {
  return AnchorGenerator({{32}, {64}, {128}, {256}, {512}}, {0.5, 1.0, 2.0});
}

int64_t AnchorGenerator::num_anchors_per_location(int64_t level) const {
  TORCH_CHECK(level >= 0 && level < num_levels(), "AnchorGenerator: level ", level,
              " out of range [0, ", num_levels(), ")");
  return static_cast<int64_t>(sizes_[static_cast<size_t>(level)].size() * aspect_ratios_.size());
}

at::Tensor AnchorGenerator::cell_anchors(int64_t level) const {
  TORCH_CHECK(level >= 0 && level < num_levels(), "AnchorGenerator: level ", level,
              " out of range [0, ", num_levels(), ")");
  return cell_anchors_[static_cast<size_t>(level)].clone();
}

std::vector<at::Tensor> AnchorGenerator::operator()(
    const std::vector<std::array<int64_t, 2>>& grid_sizes, std::array<int64_t, 2> image_size,
    const at::TensorOptions& options) const {
  if (static_cast<int64_t>(grid_sizes.size()) != num_levels()) {
    throw std::invalid_argument("AnchorGenerator: " + std::to_string(grid_sizes.size()) +
                                " feature maps given for " + std::to_string(num_levels()) +
                                " anchor levels");
  }
  if (image_size[0] <= 0 || image_size[1] <= 0) {
    throw std::invalid_argument("AnchorGenerator: image size must be > 0, got " +
                                std::to_string(image_size[0]) + "x" +
                                std::to_string(image_size[1]));
  }
  std::vector<at::Tensor> out;
  for (size_t l = 0; l < grid_sizes.size(); ++l) {
    const int64_t gh = grid_sizes[l][0];
    const int64_t gw = grid_sizes[l][1];
    if (gh <= 0 || gw <= 0) {
      throw std::invalid_argument("AnchorGenerator: grid " + std::to_string(l) + " is " +
                                  std::to_string(gh) + "x" + std::to_string(gw) +
                                  "; expected sizes > 0");
    }
    // torchvision: integer strides, shifts = arange(grid) * stride (int64), then
    // (shifts[:, None, :] + cell[None, :, :]) in float32. Built where they are used: on a GPU
    // from the cell anchors (copied without blocking) and aranges, with no host loop and no
    // blocking copy of the grid's anchors.
    const int64_t stride_h = image_size[0] / gh;
    const int64_t stride_w = image_size[1] / gw;
    const at::Device device = options.device_opt().value_or(at::kCPU);
    const at::Tensor cell = copy_to_device_async(cell_anchors_[l], device);  // [A, 4]
    const auto i64 = at::TensorOptions().dtype(at::kLong).device(device);
    const at::Tensor sy = at::arange(gh, i64).mul_(stride_h).to(at::kFloat).view({gh, 1}).expand({gh, gw});
    const at::Tensor sx = at::arange(gw, i64).mul_(stride_w).to(at::kFloat).view({1, gw}).expand({gh, gw});
    const at::Tensor shifts = at::stack({sx, sy, sx, sy}, 2).view({gh * gw, 1, 4});
    out.push_back((shifts + cell.unsqueeze(0)).view({-1, 4}));
  }
  return out;
}

std::vector<at::Tensor> AnchorGenerator::operator()(at::TensorList features,
                                                    std::array<int64_t, 2> image_size) const {
  std::vector<std::array<int64_t, 2>> grids;
  for (size_t l = 0; l < features.size(); ++l) {
    TORCH_CHECK(features[l].dim() == 4, "AnchorGenerator: features[", l,
                "] must be [N, C, H, W], got ", features[l].sizes());
    grids.push_back({features[l].size(2), features[l].size(3)});
  }
  const at::Device device = features.empty() ? at::Device(at::kCPU) : features[0].device();
  return (*this)(grids, image_size, at::TensorOptions().device(device));
}

namespace {

std::vector<at::Tensor> grid_anchors_op(at::ArrayRef<double> sizes,
                                        at::ArrayRef<double> aspect_ratios,
                                        at::IntArrayRef grid_sizes, at::IntArrayRef image_size) {
  TORCH_CHECK(grid_sizes.size() == 2 * sizes.size(),
              "mrcnn::grid_anchors: expected one (H, W) pair per size, got ", grid_sizes.size(),
              " values for ", sizes.size(), " sizes");
  TORCH_CHECK(image_size.size() == 2, "mrcnn::grid_anchors: image_size must be (H, W)");
  std::vector<std::vector<double>> per_level;
  std::vector<std::array<int64_t, 2>> grids;
  for (size_t l = 0; l < sizes.size(); ++l) {
    per_level.push_back({sizes[l]});
    grids.push_back({grid_sizes[2 * l], grid_sizes[2 * l + 1]});
  }
  return AnchorGenerator(per_level, aspect_ratios.vec())(grids, {image_size[0], image_size[1]});
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(mrcnn, m) {
  // One anchor size per level; grid_sizes flattened (H_0, W_0, H_1, W_1, ...).
  m.def(
      "grid_anchors(float[] sizes, float[] aspect_ratios, int[] grid_sizes, int[] image_size) "
      "-> Tensor[]",
      TORCH_FN(grid_anchors_op));
}

}  // namespace mrcnn::ops
