#include "model/safetensors.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include <unistd.h>

namespace mrcnn::model {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader copies bytes as they are");

// The reference implementation refuses headers above 100 MB.
constexpr uint64_t kMaxHeader = 100ull * 1000 * 1000;

struct DtypeName {
  const char* name;
  at::ScalarType type;
};
constexpr DtypeName kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16},
    {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
    {"U8", at::kByte},    {"BOOL", at::kBool},
};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw SafetensorsError(path + ": " + what);
}

struct Entry {
  std::string name;
  at::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& v) {
  const std::string where = "tensor '" + name + "'";
  if (!v.is_object()) fail(path, where + ": expected an object {dtype, shape, data_offsets}");
  Entry e;
  e.name = name;
  const auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) fail(path, where + ": expected a string \"dtype\"");
  const std::string dtype = dt->get<std::string>();
  const auto known = std::find_if(std::begin(kDtypes), std::end(kDtypes),
                                  [&](const DtypeName& d) { return dtype == d.name; });
  if (known == std::end(kDtypes))
    fail(path, where + ": unsupported dtype \"" + dtype +
                   "\" (expected F64, F32, F16, BF16, I64, I32, I16, I8, U8 or BOOL)");
  e.type = known->type;

  const auto shape = v.find("shape");
  if (shape == v.end() || !shape->is_array())
    fail(path, where + ": expected an array \"shape\"");
  uint64_t numel = 1;
  for (const auto& d : *shape) {
    if (!d.is_number_unsigned()) fail(path, where + ": shape entries must be integers >= 0");
    const uint64_t n = d.get<uint64_t>();
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (n != 0 && numel > std::numeric_limits<uint64_t>::max() / n))
      fail(path, where + ": shape is too large");
    numel *= n;
    e.shape.push_back(static_cast<int64_t>(n));
  }

  const auto offsets = v.find("data_offsets");
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
    fail(path, where + ": expected \"data_offsets\": [begin, end] with integers >= 0");
  e.begin = (*offsets)[0].get<uint64_t>();
  e.end = (*offsets)[1].get<uint64_t>();
  const uint64_t item = c10::elementSize(e.type);
  if (e.end < e.begin || e.end - e.begin != numel * item)
    fail(path, where + ": data_offsets [" + std::to_string(e.begin) + ", " +
                   std::to_string(e.end) + "] hold " + std::to_string(e.end - e.begin) +
                   " bytes, the dtype and shape need " + std::to_string(numel * item));
  return e;
}

}  // namespace

TensorFile read_safetensors(const std::string& path) {
  if (std::filesystem::is_directory(path)) fail(path, "is a directory, not a safetensors file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open for reading");
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (file_size < 8)
    fail(path, "too short for a safetensors file (" + std::to_string(file_size) +
                   " bytes; the header length alone takes 8)");
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len < 2 || header_len > kMaxHeader || header_len > file_size - 8)
    fail(path, "header length " + std::to_string(header_len) +
                   " is not within 2 and the file's remaining " + std::to_string(file_size - 8) +
                   " bytes (at most 100 MB): not a safetensors file, or truncated");
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!in) fail(path, "cannot read the header");

  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::parse_error& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(path, "header must be a JSON object");

  TensorFile out;
  std::vector<Entry> entries;
  for (const auto& [name, value] : j.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) fail(path, "\"__metadata__\" must be an object of strings");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) fail(path, "\"__metadata__\"." + k + " must be a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    if (name.empty()) fail(path, "a tensor has an empty name");
    entries.push_back(parse_entry(path, name, value));
  }

  // The data section must be covered exactly: no overlaps, no holes, nothing after the end.
  const uint64_t data_size = file_size - 8 - header_len;
  std::vector<const Entry*> order;
  for (const Entry& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t cursor = 0;
  for (const Entry* e : order) {
    if (e->begin != cursor)
      fail(path, "tensor '" + e->name + "' starts at byte " + std::to_string(e->begin) +
                     " of the data, expected " + std::to_string(cursor) +
                     " (tensors must not overlap or leave holes)");
    cursor = e->end;
  }
  if (cursor != data_size)
    fail(path, "the tensors cover " + std::to_string(cursor) + " bytes of data but the file holds " +
                   std::to_string(data_size) + " (truncated or trailing bytes)");

  for (const Entry& e : entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.type));
    const uint64_t bytes = e.end - e.begin;
    if (bytes > 0) {
      in.seekg(static_cast<std::streamoff>(8 + header_len + e.begin));
      in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(bytes));
      if (!in) fail(path, "cannot read the data of tensor '" + e.name + "'");
    }
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<at::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || name == "__metadata__")
      fail(path, "cannot write a tensor named \"" + name + "\"");
    if (!tensor.defined()) fail(path, "tensor '" + name + "' is undefined");
    const auto known = std::find_if(std::begin(kDtypes), std::end(kDtypes), [&](const DtypeName& d) {
      return d.type == tensor.scalar_type();
    });
    if (known == std::end(kDtypes))
      fail(path, "tensor '" + name + "' has dtype " + std::string(c10::toString(tensor.scalar_type())) +
                     ", which safetensors files here do not hold");
    at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(t.nbytes());
    header[name] = {{"dtype", known->name},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(t));
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // 8-byte aligned data, as the reference writes

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(path, "cannot open " + tmp + " for writing");
    unsigned char len_bytes[8];
    uint64_t n = text.size();
    for (int i = 0; i < 8; ++i, n >>= 8) len_bytes[i] = static_cast<unsigned char>(n & 0xff);
    out.write(reinterpret_cast<const char*>(len_bytes), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const at::Tensor& t : data)
      out.write(static_cast<const char*>(t.const_data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      fail(path, "write failed (disk full?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail(path, "cannot rename the written file into place: " + ec.message());
  }
}

}  // namespace mrcnn::model
