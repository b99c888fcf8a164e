// What every fuzz target holds its code to. An input may be refused, but only with one of the
// project's clear errors (std::runtime_error, std::invalid_argument and their kin, whose message
// names the file and the element). These are findings, reported as crashes so that libFuzzer
// keeps the input:
//   - a crash, a hang, a sanitizer report, an allocation beyond libFuzzer's -malloc_limit_mb;
//   - a raw library error reaching the caller (std::bad_alloc, std::length_error,
//     std::out_of_range, an unknown exception type), which users would see as a bare
//     "std::bad_alloc" or "vector::_M_range_check";
//   - a broken invariant a target checks (round trips, agreement of two readers).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>

#include <unistd.h>

namespace mrcnn::fuzz {

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::abort();
}

inline void check(bool ok, const char* invariant) {
  if (!ok) finding(std::string("invariant broken: ") + invariant);
}

// Runs f; the project's clear errors are fine, anything else is a finding. Returns whether f
// completed without an error.
template <class F>
bool accepts(F&& f) {
  try {
    f();
    return true;
  } catch (const std::bad_alloc&) {
    finding("std::bad_alloc reached the caller");
  } catch (const std::length_error& e) {
    finding(std::string("std::length_error reached the caller: ") + e.what());
  } catch (const std::out_of_range& e) {
    finding(std::string("std::out_of_range reached the caller: ") + e.what());
  } catch (const std::exception& e) {
    if (std::string_view(e.what()).empty()) finding("an error with an empty message");
    return false;
  } catch (...) {
    finding("an exception of unknown type reached the caller");
  }
}

// For readers that take a path: the input written to a file of this process's own.
inline std::string write_input(const uint8_t* data, size_t size, const char* suffix) {
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/mrcnn-fuzz-" + std::to_string(::getpid()) + suffix;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) finding("cannot write " + path);
  if (size > 0 && std::fwrite(data, 1, size, f) != size) finding("cannot write " + path);
  std::fclose(f);
  return path;
}

}  // namespace mrcnn::fuzz
