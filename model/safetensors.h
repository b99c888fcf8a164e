// The safetensors file format (huggingface/safetensors), read and written in C++:
//
//   8 bytes   N, the header length, unsigned little-endian
//   N bytes   a JSON object: {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]},
//             ..., "__metadata__": {"<key>": "<string>", ...}}, padded with spaces
//   rest      the tensors' bytes, row-major, little-endian; offsets relative to the rest's start
//
// Reading checks everything a malformed or truncated file could get wrong (header length, JSON,
// dtype names, shapes, offsets that overlap, leave holes, miss the end of the data or disagree
// with the shape) and throws SafetensorsError naming the file, the tensor and what was expected.
// Tensors are read straight into their own CPU storage (no second copy of the file).
// Writing is atomic: a temporary file beside the target is renamed over it.
//
// Thread-safety: stateless functions; safe to call concurrently on different files.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <stdexcept>
#include <string>

namespace mrcnn::model {

class SafetensorsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TensorFile {
  std::map<std::string, at::Tensor> tensors;      // CPU, contiguous
  std::map<std::string, std::string> metadata;    // the "__metadata__" object (may be empty)
};

// Supported dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL.
TensorFile read_safetensors(const std::string& path);

// Writes `tensors` (any device and layout; copied to contiguous CPU memory) in name order.
// Throws SafetensorsError on an unsupported dtype, a name that is empty or "__metadata__", or an
// I/O failure.
void write_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace mrcnn::model
