#include "benchmark/analysis/tensorboard.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace mrcnn::analysis::tensorboard {

namespace {

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected Castagnoli
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Protocol-buffer wire format: a key is (field << 3) | wire type.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

template <typename T>
void little_endian(std::string& out, T v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // x86-64 and AArch64 Linux are little-endian
  out.append(reinterpret_cast<const char*>(b), sizeof(T));
}

void key(std::string& out, int field, int wire_type) { varint(out, static_cast<uint64_t>(field << 3 | wire_type)); }

void length_delimited(std::string& out, int field, std::string_view bytes) {
  key(out, field, 2);
  varint(out, bytes.size());
  out.append(bytes);
}

std::string event_head(double wall_time) {
  std::string e;
  key(e, 1, 1);  // wall_time, 64-bit
  little_endian(e, wall_time);
  return e;
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  uint32_t c = 0xFFFFFFFFu;
  for (const unsigned char b : data) c = crc_table()[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

std::string file_version_event(double wall_time) {
  std::string e = event_head(wall_time);
  length_delimited(e, 3, "brain.Event:2");
  return e;
}

std::string scalar_event(double wall_time, int64_t step, std::string_view tag, float value) {
  std::string v;
  length_delimited(v, 1, tag);
  key(v, 2, 5);  // simple_value, 32-bit
  little_endian(v, value);
  std::string summary;
  length_delimited(summary, 1, v);
  std::string e = event_head(wall_time);
  key(e, 2, 0);  // step, varint (two's complement for a negative one, as protobuf writes int64)
  varint(e, static_cast<uint64_t>(step));
  length_delimited(e, 5, summary);
  return e;
}

std::string record(std::string_view data) {
  std::string header;
  little_endian(header, static_cast<uint64_t>(data.size()));
  std::string frame = header;
  little_endian(frame, masked_crc32c(header));
  frame.append(data);
  little_endian(frame, masked_crc32c(data));
  return frame;
}

EventWriter::EventWriter(const std::string& path, double wall_time) : path_(path), file_(std::fopen(path.c_str(), "wb")) {
  if (file_ == nullptr) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  write(record(file_version_event(wall_time)));
}

EventWriter::~EventWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void EventWriter::scalar(std::string_view tag, int64_t step, double wall_time, float value) {
  write(record(scalar_event(wall_time, step, tag, value)));
}

void EventWriter::write(const std::string& frame) {
  if (file_ == nullptr) throw std::logic_error("EventWriter: " + path_ + " is closed");
  if (std::fwrite(frame.data(), 1, frame.size(), file_) != frame.size())
    throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
}

void EventWriter::close() {
  if (file_ == nullptr) return;
  const bool flushed = std::fflush(file_) == 0;
  const int err = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed) throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(flushed ? errno : err));
}

}  // namespace mrcnn::analysis::tensorboard
