#include "logging/json_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace mrcnn::logging {

Json read_json_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw JsonFileError(path + ": is a directory, not a JSON file");
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw JsonFileError(path + ": is not a regular file (a device or a pipe), not a JSON file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw JsonFileError(path + ": cannot open (" + std::string(std::strerror(errno)) + ")");
  std::ostringstream buf;
  buf << in.rdbuf();
  try {
    return Json::parse(buf.str());
  } catch (const Json::parse_error& e) {
    throw JsonFileError(path + ": not valid JSON at byte " + std::to_string(e.byte) + ": " +
                        std::string(e.what()).substr(std::string(e.what()).find(':') + 2));
  } catch (const Json::out_of_range& e) {  // a number beyond a double's range (1e999)
    throw JsonFileError(path + ": " + std::string(e.what()).substr(std::string(e.what()).find(']') + 2) +
                        " (beyond the range of a double)");
  }
}

}  // namespace mrcnn::logging
