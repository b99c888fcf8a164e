// A JSON file read whole, every failure one error that names the file: a folder or a device where
// the file should be, a file that cannot be opened, a syntax error (with its byte offset), a number
// beyond a double's range. The configuration, `report`, `forecast` and the system descriptions read
// their files through it.
#pragma once

#include <stdexcept>
#include <string>

#include "logging/py_json.h"

namespace mrcnn::logging {

struct JsonFileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws JsonFileError "<path>: <problem>".
Json read_json_file(const std::string& path);

}  // namespace mrcnn::logging
