// SHA-256 (FIPS 180-4) of bytes and of files: the checksums a run's fingerprint records, the same
// hex digests `sha256sum` prints, so an auditor can check a binary or a dataset by hand. Computed
// by OpenSSL's libcrypto (SHA-NI where the CPU has it); no shared state, any thread may call.
#pragma once

#include <string>
#include <string_view>

namespace mrcnn::logging {

std::string sha256_hex(std::string_view bytes);

// Reads the file in blocks; throws std::runtime_error naming the file when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace mrcnn::logging
