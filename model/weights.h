// Saving and loading a module's weights (parameters and buffers, by their dotted names) as a
// safetensors file, and the names MLPerf's weights_initialization events use.
//
// A checkpoint holds float32 tensors in NCHW layout whatever the model's memory format or
// device; loading copies into the existing tensors, so their device and memory format stay.
// model/tools/convert_weights.py writes the same names from torchvision or Detectron weights.
//
// Thread-safety: save_weights reads the module, load_weights writes it: no concurrent forward.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <map>
#include <string>
#include <vector>

#include "model/options.h"

namespace mrcnn::model {

// Every parameter and buffer of `module` by name, as it stands (no copy).
std::map<std::string, at::Tensor> named_tensors(const torch::nn::Module& module);

// Writes named_tensors(module) to `path` (atomically) with optional string metadata.
// Throws SafetensorsError on I/O failure.
void save_weights(const torch::nn::Module& module, const std::string& path,
                  const std::map<std::string, std::string>& metadata = {});

struct LoadOptions {
  // Names of the module missing from the file keep their current values (e.g. a file holding
  // only a pretrained backbone, "backbone.*"). Otherwise they are an error.
  bool allow_missing = false;
  // Names in the file that the module does not have are ignored. Otherwise they are an error.
  bool allow_unexpected = false;
};

struct LoadReport {
  std::vector<std::string> loaded;
  std::vector<std::string> missing;     // in the module, not in the file
  std::vector<std::string> unexpected;  // in the file, not in the module
  std::map<std::string, std::string> metadata;
};

// Loads `path` into `module`. Throws SafetensorsError naming the file and the tensor on a
// malformed file, a shape mismatch, a dtype that does not convert (floating <-> integer), or
// missing / unexpected names not allowed by `options`. Nothing is modified when it throws.
LoadReport load_weights(torch::nn::Module& module, const std::string& path,
                        const LoadOptions& options = {});

// The same from tensors in memory; `source` names them in error messages.
LoadReport load_named_tensors(torch::nn::Module& module,
                              const std::map<std::string, at::Tensor>& tensors,
                              const LoadOptions& options, const std::string& source);

// One MLPerf weights_initialization tensor (metadata "tensor": mlperf_name) and the parameters of
// this model it stands for.
struct InitializedTensor {
  std::string mlperf_name;               // e.g. "FPN_inner_block1"
  std::vector<std::string> parameters;   // e.g. {"fpn.inner.0.weight", "fpn.inner.0.bias"}
};

// The tensors the MLPerf reference initializes (not loaded from the pretrained backbone):
// FPN_inner_block1..4, FPN_layer_block1..4, RPNHead_conv/cls/bbox,
// ROI_BOX_FEATURE_EXTRACTOR_fc6/fc7, ROI_BOX_PREDICTOR_cls/bbox,
// ROI_MASK_FEATURE_EXTRACTOR_fcn1..N, ROI_MASK_PREDICTOR_fcn5, ROI_MASK_PREDICTOR_fcn_logits:
// 21 with the reference's four mask convolutions.
std::vector<InitializedTensor> mlperf_initialized_tensors(const ModelOptions& options);

}  // namespace mrcnn::model
