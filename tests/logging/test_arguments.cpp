#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "logging/arguments.h"

namespace mrcnn::cli {
namespace {

using ::testing::HasSubstr;

// argv for a command: {"cmd", args...}.
struct Argv {
  explicit Argv(std::vector<std::string> a) : words(std::move(a)) {
    words.insert(words.begin(), "cmd");
    for (auto& w : words) ptrs.push_back(w.data());
  }
  int argc() { return static_cast<int>(words.size()); }
  char** argv() { return ptrs.data(); }
  std::vector<std::string> words;
  std::vector<char*> ptrs;
};

Arguments parse(std::vector<std::string> args, const ArgumentSpec& spec) {
  Argv a(std::move(args));
  return Arguments(a.argc(), a.argv(), spec);
}

std::string error_of(std::vector<std::string> args, const ArgumentSpec& spec) {
  try {
    parse(std::move(args), spec);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

const ArgumentSpec kSpec{.with_value = {"--json", "--set", "--tolerance", "--threads"},
                         .switches = {"--quiet"},
                         .positional = {1, 2, "one or two runs"}};

TEST(Arguments, ValuesSwitchesAndPositionalsInAnyOrder) {
  const Arguments a = parse({"run1", "--set", "a=1", "--quiet", "--set", "b=2", "run2", "--json", "x.json"}, kSpec);
  EXPECT_FALSE(a.help());
  EXPECT_EQ(a.positional(), (std::vector<std::string>{"run1", "run2"}));
  EXPECT_EQ(a.values("--set"), (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_EQ(a.value("--set"), "b=2");  // the last one wins
  EXPECT_EQ(a.value("--json"), "x.json");
  EXPECT_TRUE(a.flag("--quiet"));
  EXPECT_TRUE(a.has("--json"));
  EXPECT_FALSE(a.has("--tolerance"));
  EXPECT_EQ(a.value("--tolerance", "0.5"), "0.5");
  EXPECT_TRUE(a.values("--tolerance").empty());
}

TEST(Arguments, EveryBadCommandLineIsOneUsageError) {
  EXPECT_EQ(error_of({"run", "--bogus"}, kSpec), "unknown option '--bogus' (see --help)");
  EXPECT_EQ(error_of({"run", "-x"}, kSpec), "unknown option '-x' (see --help)");
  EXPECT_EQ(error_of({"run", "--json"}, kSpec), "--json needs a value");
  EXPECT_EQ(error_of({}, kSpec), "expected one or two runs (see --help)");
  EXPECT_EQ(error_of({"a", "b", "c"}, kSpec), "expected one or two runs, got 3 argument(s) (see --help)");
  EXPECT_EQ(error_of({"a"}, {.positional = {0, 0, "nothing"}}), "unexpected argument 'a' (see --help)");
  // "-" alone is a positional (standard input, by convention), not an option.
  EXPECT_EQ(parse({"-"}, kSpec).positional(), std::vector<std::string>{"-"});
}

TEST(Arguments, HelpAnywhereSkipsEveryCheck) {
  EXPECT_TRUE(parse({"--bogus", "--help"}, kSpec).help());
  EXPECT_TRUE(parse({"-h"}, kSpec).help());
}

TEST(Arguments, NumbersAreCheckedAgainstTheirRange) {
  const Arguments a = parse({"r", "--tolerance", "0.25", "--threads", "8"}, kSpec);
  EXPECT_DOUBLE_EQ(a.number("--tolerance", 0, {0, 1}), 0.25);
  EXPECT_EQ(a.integer("--threads", 1, {1, 64}), 8);
  EXPECT_EQ(a.integer("--absent", 3, {1, 64}), 3);
  auto number_error = [](const std::string& value, Range range) {
    try {
      parse({"r", "--tolerance", value}, kSpec).number("--tolerance", 0, range);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(number_error("1.5", {0, 1}), "--tolerance 1.5: expected a number from 0 to 1");
  EXPECT_EQ(number_error("abc", {0, 1}), "--tolerance abc: expected a number from 0 to 1");
  EXPECT_EQ(number_error("nan", {0, 1}), "--tolerance nan: expected a number from 0 to 1");
  EXPECT_EQ(number_error("-1", {0}), "--tolerance -1: expected a number of at least 0");
  EXPECT_EQ(number_error("0.5", {0}), "no error");
  try {
    parse({"r", "--threads", "8.5"}, kSpec).integer("--threads", 1, {1, 64});
    ADD_FAILURE() << "8.5 taken as a whole number";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--threads 8.5: expected a whole number from 1 to 64"));
  }
}

}  // namespace
}  // namespace mrcnn::cli
