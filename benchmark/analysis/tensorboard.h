// TensorBoard's event files, written without TensorFlow or protobuf: scalars only, which is what a
// run's metrics are.
//
// An event file is a sequence of TFRecords, each
//   uint64 length (little-endian) | uint32 masked CRC-32C of the length | data | uint32 masked CRC-32C of the data
// whose data is one serialized tensorflow.Event:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
// The first event names the format ("brain.Event:2"); TensorBoard reads every file named
// events.out.tfevents.* in a folder.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace mrcnn::analysis::tensorboard {

// CRC-32C (Castagnoli), as TFRecord frames use it, and its masked form.
uint32_t crc32c(std::string_view data);
uint32_t masked_crc32c(std::string_view data);

// Serialized tensorflow.Event messages.
std::string file_version_event(double wall_time);
std::string scalar_event(double wall_time, int64_t step, std::string_view tag, float value);

// One TFRecord frame around `data`.
std::string record(std::string_view data);

// Writes an event file: the version event on opening, then one frame per scalar. Throws
// std::runtime_error naming the file when it cannot be written.
class EventWriter {
 public:
  EventWriter(const std::string& path, double wall_time);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  void scalar(std::string_view tag, int64_t step, double wall_time, float value);
  void close();  // flushes; throws naming the file on a failed write
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& frame);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace mrcnn::analysis::tensorboard
