// Google Benchmark suite of the run fingerprint's SHA-256 (logging/sha256.h, libcrypto), on a
// 256 MiB buffer and a 256 MiB file in the page cache (a COCO run hashes ~470 MB of executable,
// libraries and annotations after every run):
//   BM_Sha256Hex                 sha256_hex of the buffer: libcrypto's hashing alone
//   BM_Sha256File                sha256_file of the file: what the fingerprint pays
//   BM_LibcryptoFileBlocks/<KiB> the file read and hashed in <KiB> blocks with EVP_DigestUpdate
//                                (32 KiB is what sha256sum reads): how sha256_file's 1 MiB was chosen
// Measured on a 2-core AMD EPYC with SHA-NI (2026-11-25): 1.44 GB/s buffer, 1.24 GB/s file; the
// portable C++ SHA-256 the project had before did 187-240 MB/s and 161-212 MB/s on the same
// machine, in the same process as libcrypto (benchmark/README.md).
#include <benchmark/benchmark.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "logging/sha256.h"

namespace {

struct CloseFile {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

constexpr size_t kBytes = size_t{256} << 20;

// xorshift bytes, the same every run (a digest to compare between machines).
const std::string& buffer() {
  static const std::string b = [] {
    std::string s(kBytes, '\0');
    uint64_t x = 88172645463325252ull;
    for (char& c : s) x ^= x << 13, x ^= x >> 7, x ^= x << 17, c = static_cast<char>(x);
    return s;
  }();
  return b;
}

// Written once a process and left in the page cache by the write: the timings are hashing and
// copying out of the cache, not the disk. Removed at exit.
const std::string& file_path() {
  struct File {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("mrcnn_bench_sha256_" + std::to_string(::getpid()));
    File() { std::ofstream(path, std::ios::binary) << buffer(); }
    ~File() { std::filesystem::remove(path); }
  };
  static const File f;
  static const std::string p = f.path.string();
  return p;
}

void BM_Sha256Hex(benchmark::State& state) {
  const auto& b = buffer();
  for (auto _ : state) benchmark::DoNotOptimize(mrcnn::logging::sha256_hex(b));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * b.size()));
}
BENCHMARK(BM_Sha256Hex)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Sha256File(benchmark::State& state) {
  const auto& p = file_path();
  for (auto _ : state) benchmark::DoNotOptimize(mrcnn::logging::sha256_file(p));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}
BENCHMARK(BM_Sha256File)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LibcryptoFileBlocks(benchmark::State& state) {
  const auto& p = file_path();
  std::vector<unsigned char> buf(static_cast<size_t>(state.range(0)) << 10);
  const std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  for (auto _ : state) {
    const std::unique_ptr<std::FILE, CloseFile> f(std::fopen(p.c_str(), "rb"));
    if (!f || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw std::runtime_error(p);
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) EVP_DigestUpdate(ctx.get(), buf.data(), n);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx.get(), md, &len);
    benchmark::DoNotOptimize(md);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}
BENCHMARK(BM_LibcryptoFileBlocks)->Arg(32)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
