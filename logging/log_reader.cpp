#include "logging/log_reader.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "logging/py_semantics.h"

namespace mrcnn::logging::detail {
namespace {

constexpr std::string_view kToken = ":::MLLOG ";

// Splits text fed in chunks of any size into lines (\n, \r\n and \r end a line, as Python's
// universal newlines), and keeps the text after the last token of each line that holds one.
class RecordReader {
 public:
  explicit RecordReader(size_t max_bytes) : max_(max_bytes) {}

  void feed(std::string_view chunk, RawLog& out) {
    for (char c : chunk) out.stats.nul_bytes += c == '\0';
    size_t pos = 0;
    if (pending_cr_ && !chunk.empty()) {
      pending_cr_ = false;
      if (chunk[0] == '\n') pos = 1;  // "\r\n" split across chunks
    }
    while (pos < chunk.size()) {
      size_t nl = pos;
      while (nl < chunk.size() && chunk[nl] != '\n' && chunk[nl] != '\r') ++nl;
      append(chunk.substr(pos, nl - pos));
      if (nl == chunk.size()) break;
      end_line(out);
      if (chunk[nl] == '\r') {
        if (nl + 1 < chunk.size()) {
          if (chunk[nl + 1] == '\n') ++nl;
        } else {
          pending_cr_ = true;
        }
      }
      pos = nl + 1;
    }
  }

  void finish(RawLog& out) {
    if (in_record_ || !carry_.empty() || !line_empty_) end_line(out);
  }

 private:
  void append(std::string_view seg) {
    if (seg.empty()) return;
    line_empty_ = false;
    // Search for a (later) token in what could contain one: the last bytes seen plus `seg`.
    std::string hay = carry_;
    hay.append(seg);
    const size_t p = hay.rfind(kToken);
    if (p != std::string::npos) {
      in_record_ = true;
      overflow_ = false;
      buf_.assign(hay, p + kToken.size());
    } else if (in_record_ && !overflow_) {
      buf_.append(seg);
    }
    if (in_record_ && !overflow_ && buf_.size() > max_) {
      overflow_ = true;
      buf_.clear();
      buf_.shrink_to_fit();
    }
    const size_t keep = kToken.size() - 1;
    carry_ = hay.size() > keep ? hay.substr(hay.size() - keep) : hay;
  }

  void end_line(RawLog& out) {
    ++line_no_;
    ++out.stats.lines;
    if (in_record_) out.records.push_back({line_no_, overflow_ ? std::string() : std::move(buf_), overflow_});
    buf_.clear();
    carry_.clear();
    in_record_ = overflow_ = false;
    line_empty_ = true;
  }

  const size_t max_;
  int64_t line_no_ = 0;
  std::string buf_;    // text after the last token of the current line
  std::string carry_;  // last bytes of the current line, for a token split across segments
  bool in_record_ = false;
  bool overflow_ = false;
  bool pending_cr_ = false;
  bool line_empty_ = true;
};

bool py_space(unsigned char c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0;
}

}  // namespace

RawLog read_log_text(std::string_view text, size_t max_record_bytes) {
  RecordReader reader(max_record_bytes);
  RawLog log;
  reader.feed(text, log);
  reader.finish(log);
  return log;
}

RawLog read_log_file(const std::string& path, size_t max_record_bytes) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) throw LogReadError("cannot read: no such file");
  if (std::filesystem::is_directory(st)) throw LogReadError("cannot read: is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw LogReadError(std::string("cannot open: ") + std::strerror(errno));
  RecordReader reader(max_record_bytes);
  RawLog log;
  std::vector<char> buf(size_t{1} << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = static_cast<size_t>(in.gcount());
    if (got == 0) break;
    reader.feed(std::string_view(buf.data(), got), log);
  }
  if (in.bad()) throw LogReadError(std::string("read error: ") + std::strerror(errno));
  reader.finish(log);
  return log;
}

ParsedLog parse_records(const std::vector<RawRecord>& records, size_t max_record_bytes) {
  ParsedLog out;
  for (const RawRecord& r : records) {
    if (r.too_long) {
      out.errors.push_back({r.file_line, "", ":::MLLOG record longer than " +
                                                 std::to_string(max_record_bytes >> 20) + " MiB; not read"});
      continue;
    }
    std::string_view t = r.text;
    while (!t.empty() && py_space(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
    if (t.empty()) {
      out.errors.push_back({r.file_line, "", "nothing after ':::MLLOG '"});
      continue;
    }
    Json m;
    try {
      m = py_json_loads(t);
    } catch (const PyJsonError& e) {
      out.errors.push_back({r.file_line, "", std::string("invalid JSON after ':::MLLOG ': ") + e.what() +
                                                 " (column " + std::to_string(e.offset + 10) + ")"});
      continue;
    }
    if (!m.is_object()) {
      out.errors.push_back({r.file_line, "", "the record is a JSON " + py_type(m) + ", not an object"});
      continue;
    }
    std::string missing;
    for (const char* f : {"time_ms", "key", "value", "metadata"})
      if (!m.contains(f)) missing += (missing.empty() ? "" : ", ") + std::string(f);
    if (!missing.empty()) {
      out.errors.push_back({r.file_line, m.value("key", Json("")).is_string() ? m.value("key", "") : "",
                            "record lacks " + missing + " (the official checker crashes on it)"});
      continue;
    }
    const Json& tm = m["time_ms"];
    std::optional<double> ts;
    if (is_num(tm))
      ts = num(tm, "float");
    else if (tm.is_string())
      ts = py_float_from_string(tm.get_ref<const std::string&>());
    if (!ts) {
      out.errors.push_back({r.file_line, m["key"].is_string() ? m["key"].get<std::string>() : "",
                            "time_ms " + short_json(tm) + " is not a number"});
      continue;
    }
    out.lines.push_back({r.file_line, std::string(t), *ts, m["key"], m["value"], m["metadata"]});
  }
  return out;
}

}  // namespace mrcnn::logging::detail
