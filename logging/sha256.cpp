#include "logging/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

namespace mrcnn::logging {
namespace {

// 1 MiB reads: few enough system calls that reading costs nothing beside hashing, small enough
// to stay in the cache between read and hash (bench_analysis_sha256: larger blocks gain nothing).
constexpr size_t kReadBlock = size_t{1} << 20;

std::string to_hex(const unsigned char* md, unsigned int n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (unsigned int i = 0; i < n; ++i) out += kDigits[md[i] >> 4], out += kDigits[md[i] & 0xf];
  return out;
}

// libcrypto fails only without memory or with a broken provider setup (e.g. a FIPS-only
// configuration without its module): name the call, there is no file to blame.
void check(int ok, const char* call) {
  if (ok != 1) throw std::runtime_error(std::string("SHA-256: libcrypto's ") + call + " failed");
}

struct CloseFile {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
struct FreeDigest {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  check(EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr), "EVP_Digest");
  return to_hex(md, n);
}

std::string sha256_file(const std::string& path) {
  const std::unique_ptr<std::FILE, CloseFile> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw std::runtime_error(path + ": cannot be read: " + std::strerror(errno));
  const std::unique_ptr<EVP_MD_CTX, FreeDigest> ctx(EVP_MD_CTX_new());
  if (!ctx) throw std::runtime_error("SHA-256: libcrypto's EVP_MD_CTX_new failed");
  check(EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr), "EVP_DigestInit_ex");
  std::vector<unsigned char> buf(kReadBlock);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0)
    check(EVP_DigestUpdate(ctx.get(), buf.data(), n), "EVP_DigestUpdate");
  // fopen succeeds on a directory; its first read fails (EISDIR) and lands here.
  if (std::ferror(f.get()) != 0) throw std::runtime_error(path + ": read error: " + std::strerror(errno));
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  check(EVP_DigestFinal_ex(ctx.get(), md, &len), "EVP_DigestFinal_ex");
  return to_hex(md, len);
}

}  // namespace mrcnn::logging
