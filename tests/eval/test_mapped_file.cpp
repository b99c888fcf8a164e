// eval/mapped_file.h: the one file-mapping class (the COCO readers and the prepared index).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "eval/coco.h"
#include "eval/mapped_file.h"

namespace mrcnn::eval {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

struct TempDir {
  fs::path dir = fs::temp_directory_path() / ("mapped_file_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(dir); }
  ~TempDir() { fs::remove_all(dir); }
};

std::string error_of(const std::string& path) {
  try {
    MappedFile f(path);
  } catch (const FileError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(MappedFile, ARegularFileIsMappedWithEveryByte) {
  TempDir t;
  std::string bytes(100000, '\0');
  for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<char>(k * 31 + 7);
  std::ofstream(t.dir / "a.bin", std::ios::binary) << bytes;
  MappedFile f((t.dir / "a.bin").string());
  EXPECT_TRUE(f.mapped());
  EXPECT_EQ(f.bytes(), bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f.bytes().data()) % alignof(std::max_align_t), 0u);

  MappedFile moved(std::move(f));  // the mapping moves with it; the source holds nothing
  EXPECT_EQ(moved.bytes(), bytes);
  EXPECT_EQ(f.size(), 0u);  // NOLINT(bugprone-use-after-move): the moved-from state is part of the contract
}

TEST(MappedFile, APipeIsReadToItsEnd) {
  TempDir t;
  const fs::path fifo = t.dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string text(200000, 'x');
  const pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    std::FILE* w = std::fopen(fifo.c_str(), "wb");
    const bool ok = w && std::fwrite(text.data(), 1, text.size(), w) == text.size() && std::fclose(w) == 0;
    ::_exit(ok ? 0 : 1);
  }
  MappedFile f(fifo.string());
  int status = 0;
  ::waitpid(writer, &status, 0);
  EXPECT_FALSE(f.mapped());
  EXPECT_EQ(f.bytes(), text);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(MappedFile, AnEmptyFileHasNoBytes) {
  TempDir t;
  std::ofstream(t.dir / "empty.json").close();
  EXPECT_EQ(MappedFile((t.dir / "empty.json").string()).size(), 0u);
}

TEST(MappedFile, AMissingFileOrADirectoryIsRefusedByName) {
  TempDir t;
  EXPECT_THAT(error_of((t.dir / "missing.json").string()), HasSubstr("missing.json: cannot open: No such file"));
  EXPECT_THAT(error_of(t.dir.string()), HasSubstr(t.dir.string() + ": is a directory, not a file"));
  // The COCO readers give the same words as their own error type.
  try {
    load_dataset(t.dir.string());
    FAIL() << "a directory was read as a dataset";
  } catch (const CocoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is a directory"));
  }
}

}  // namespace
}  // namespace mrcnn::eval
