// Everything of the detection ops library (mrcnn_ops) in one include.
#pragma once

#include "model/ops/box/anchor_generator.h"
#include "model/ops/box/box_coder.h"
#include "model/ops/box/boxes.h"
#include "model/ops/mask_targets.h"
#include "model/ops/box/matcher.h"
#include "model/ops/multilevel_roi_align.h"
#include "model/ops/nms.h"
#include "model/ops/paste_masks.h"
#include "model/ops/proposals.h"
#include "model/ops/roi_align.h"
#include "model/ops/box/sampler.h"
