// ModelOptions <-> JSON: the "model" section of a system configuration. The keys mirror the
// structs of model/options.h field for field:
//
//   {"num_classes": 81, "channels_last": false, "precision": "fp32",
//    "sampling_streams": "per_image",
//    "backbone":  {"depth": 50, "base_channels": 64, "norm": "frozen_bn", "group_norm_groups": 32,
//                  "freeze_at": 2, "stride_in_1x1": true},
//    "fpn":       {"out_channels": 256},
//    "rpn":       {"anchor_sizes": [...], "aspect_ratios": [...], "anchor_strides": [...],
//                  "fg_iou_threshold": 0.7, ..., "post_nms_per_batch_train": true, ...},
//    "box_head":  {"pooler_resolution": 7, ..., "box_coder_weights": [10, 10, 5, 5], ...},
//    "mask_head": {"pooler_resolution": 14, "conv_channels": 256, "num_convs": 4, ...}}
//
// Every key is optional (absent keys keep the value of `base`); an unknown key or a value of the
// wrong type is an error naming its path ("model.rpn.batch_size_per_image: expected an integer,
// got \"256\""), so a typo in a system file never goes unnoticed.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>

#include "model/options.h"

namespace mrcnn::model {

// Throws std::invalid_argument; the result is validated (ModelOptions::validate).
ModelOptions model_options_from_json(const nlohmann::json& j, const ModelOptions& base = {},
                                     const std::string& path = "model");

// Every field, so that a run can log the options it used.
nlohmann::json to_json(const ModelOptions& options);

}  // namespace mrcnn::model
