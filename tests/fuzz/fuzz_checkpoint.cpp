// Safetensors files (weights) and training checkpoints (safetensors with the trainer's state in
// the metadata). Invariants: a file that reads has tensors whose bytes lie within the file; a
// checkpoint that loads has the tensors its metadata promises.
#include <string>

#include "benchmark/train/checkpoint.h"
#include "model/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

using namespace mrcnn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, ".safetensors");
  fuzz::accepts([&] {
    const model::TensorFile f = model::read_safetensors(path);
    size_t bytes = 0;
    for (const auto& [name, t] : f.tensors) bytes += t.nbytes();
    fuzz::check(bytes <= size, "tensors fit in the file");
  });
  fuzz::accepts([&] { (void)train::load_checkpoint(path); });
  return 0;
}
