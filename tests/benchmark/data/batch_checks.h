// Checks the data tests share.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "benchmark/data/dataset.h"
#include "model/structures.h"

namespace mrcnn::data::testing {

// Shape-padded batch == the batch's own padding inside [0, own_h) x [0, own_w) (each image, its
// own padding zeros included), zeros beyond; every target and piece of metadata unchanged.
inline void expect_same_batch_padded_further(const model::Batch& own, const model::Batch& shaped, ImageSize shape) {
  ASSERT_EQ(shaped.images.size(0), own.images.size(0));
  ASSERT_EQ(shaped.images.size(2), shape.height);
  ASSERT_EQ(shaped.images.size(3), shape.width);
  const int64_t h = own.images.size(2), w = own.images.size(3);
  EXPECT_TRUE(at::equal(shaped.images.narrow(2, 0, h).narrow(3, 0, w), own.images));
  EXPECT_EQ(shaped.images.narrow(2, h, shape.height - h).abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(shaped.images.narrow(3, w, shape.width - w).abs().sum().item<float>(), 0.0f);
  EXPECT_TRUE(at::equal(shaped.gt_boxes, own.gt_boxes));
  EXPECT_TRUE(at::equal(shaped.gt_labels, own.gt_labels));
  EXPECT_TRUE(at::equal(shaped.gt_counts, own.gt_counts));
  EXPECT_TRUE(at::equal(shaped.image_sizes, own.image_sizes));
  EXPECT_TRUE(at::equal(shaped.original_sizes, own.original_sizes));
  EXPECT_EQ(shaped.image_ids, own.image_ids);
  ASSERT_EQ(shaped.gt_polygons.size(), own.gt_polygons.size());
  for (size_t j = 0; j < own.gt_polygons.size(); ++j) {
    EXPECT_TRUE(at::equal(shaped.gt_polygons[j].coords, own.gt_polygons[j].coords));
    EXPECT_TRUE(at::equal(shaped.gt_polygons[j].poly_offsets, own.gt_polygons[j].poly_offsets));
    EXPECT_TRUE(at::equal(shaped.gt_polygons[j].instance_offsets, own.gt_polygons[j].instance_offsets));
  }
}

}  // namespace mrcnn::data::testing
