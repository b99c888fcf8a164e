// JsonCursor: escapes, numbers, skipping (deep nesting without recursion), located errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "eval/json_cursor.h"

namespace mrcnn::eval {
namespace {

using ::testing::HasSubstr;

TEST(JsonCursor, StringsWithEscapes) {
  const std::string text = "[\"plain\", \"a\\\"b\\\\c\\/d\\n\", \"\\u00e9\\ud83d\\ude00\", \"\"]";
  JsonCursor c(text, "t.json");
  std::string scratch;
  c.begin_array();
  ASSERT_TRUE(c.next_element());
  EXPECT_EQ(c.string(scratch), "plain");
  ASSERT_TRUE(c.next_element());
  EXPECT_EQ(c.string(scratch), "a\"b\\c/d\n");
  ASSERT_TRUE(c.next_element());
  EXPECT_EQ(c.string(scratch), "\xC3\xA9\xF0\x9F\x98\x80");  // é and U+1F600 from a surrogate pair
  ASSERT_TRUE(c.next_element());
  EXPECT_EQ(c.string(scratch), "");
  EXPECT_FALSE(c.next_element());
  c.expect_end();
}

TEST(JsonCursor, Numbers) {
  JsonCursor c("[0, -0.5, 1e3, 2.5E-2, 18446744073709551615, -9223372036854775808, 1e-400]", "n.json");
  c.begin_array();
  c.next_element();
  EXPECT_EQ(c.uint64(), 0u);
  c.next_element();
  EXPECT_EQ(c.number(), -0.5);
  c.next_element();
  EXPECT_EQ(c.number(), 1000.0);
  c.next_element();
  EXPECT_EQ(c.number(), 0.025);
  c.next_element();
  EXPECT_EQ(c.uint64(), 18446744073709551615ull);
  c.next_element();
  EXPECT_EQ(c.int64(), INT64_MIN);
  c.next_element();
  EXPECT_EQ(c.number(), 0.0);  // underflows to zero, as in Python
  EXPECT_FALSE(c.next_element());
}

TEST(JsonCursor, NumberErrors) {
  auto err = [](const char* text, auto read) {
    JsonCursor c(text, "e.json");
    try {
      read(c);
    } catch (const JsonError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_THAT(err("18446744073709551616", [](JsonCursor& c) { c.uint64(); }), HasSubstr("64 bits"));
  EXPECT_THAT(err("1e999", [](JsonCursor& c) { c.number(); }), HasSubstr("out of the range"));
  EXPECT_THAT(err("01", [](JsonCursor& c) { c.number(); c.expect_end(); }), HasSubstr("end of the file"));
  EXPECT_THAT(err("-", [](JsonCursor& c) { c.number(); }), HasSubstr("expected a number"));
  EXPECT_THAT(err("1.", [](JsonCursor& c) { c.number(); }), HasSubstr("a digit after the decimal point"));
  EXPECT_THAT(err("Infinity", [](JsonCursor& c) { c.number(); }), HasSubstr("finite number"));
  EXPECT_THAT(err("\"a\\x\"", [](JsonCursor& c) { std::string s; c.string(s); }), HasSubstr("valid escape"));
  EXPECT_THAT(err("\"a\nb\"", [](JsonCursor& c) { std::string s; c.string(s); }),
              HasSubstr("control characters must be escaped"));
  EXPECT_THAT(err("tru", [](JsonCursor& c) { c.boolean(); }), HasSubstr("expected 'true'"));
}

TEST(JsonCursor, SkipsDeepNestingWithoutRecursion) {
  const size_t depth = 200000;
  std::string text = "{\"deep\": " + std::string(depth, '[') + std::string(depth, ']') +
                     ", \"mixed\": {\"a\": [1, {\"b\": null}, \"s\\\"]\"], \"c\": true}, \"x\": 7}";
  JsonCursor c(text, "deep.json");
  c.begin_object();
  std::string_view key;
  int64_t x = -1;
  while (c.next_key(key)) {
    if (key == "x") x = c.int64();
    else c.skip();
  }
  c.expect_end();
  EXPECT_EQ(x, 7);
  // Unbalanced deep nesting is an error, not a crash.
  const std::string bad = std::string(depth, '[') + "1" + std::string(depth - 1, ']');
  JsonCursor b(bad, "bad.json");
  EXPECT_THROW(b.skip(), JsonError);
}

TEST(JsonCursor, ErrorsCarryPathLineAndColumn) {
  JsonCursor c("{\n  \"a\": [1,\n    2 3]}", "p.json");
  c.begin_object();
  std::string_view key;
  ASSERT_TRUE(c.next_key(key));
  c.begin_array();
  try {
    while (c.next_element()) c.number();
    FAIL();
  } catch (const JsonError& e) {
    EXPECT_THAT(e.what(), HasSubstr("p.json: byte 19 (line 3, column 7) at a[1]: expected ',' or ']', found '3'"));
  }
}

}  // namespace
}  // namespace mrcnn::eval
