// Precompiled header shared by every LibTorch target (see mrcnn_use_torch in CMakeLists.txt).
// Only stable third-party headers belong here; project headers would rebuild everything.
#pragma once
#include <torch/torch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>
