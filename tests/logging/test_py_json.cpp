#include "logging/py_json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace mrcnn::logging {
namespace {

TEST(PyFloatRepr, MatchesPythonRepr) {
  // Expected strings are Python 3's repr() of the same doubles.
  EXPECT_EQ(py_float_repr(0.1), "0.1");
  EXPECT_EQ(py_float_repr(2.0), "2.0");
  EXPECT_EQ(py_float_repr(-3.5), "-3.5");
  EXPECT_EQ(py_float_repr(0.0001), "0.0001");
  EXPECT_EQ(py_float_repr(0.00001), "1e-05");
  EXPECT_EQ(py_float_repr(1.5e-7), "1.5e-07");
  EXPECT_EQ(py_float_repr(1e16), "1e+16");
  EXPECT_EQ(py_float_repr(1.5e16), "1.5e+16");
  EXPECT_EQ(py_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(py_float_repr(123456789.125), "123456789.125");
  EXPECT_EQ(py_float_repr(1e100), "1e+100");
  EXPECT_EQ(py_float_repr(0.3781), "0.3781");
  EXPECT_EQ(py_float_repr(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(py_float_repr(5e-324), "5e-324");
  EXPECT_EQ(py_float_repr(-0.0), "-0.0");
  EXPECT_EQ(py_float_repr(std::nan("")), "NaN");
  EXPECT_EQ(py_float_repr(-std::numeric_limits<double>::infinity()), "-Infinity");
}

TEST(PyJsonDumps, EscapesLikeEnsureAscii) {
  EXPECT_EQ(py_json_dumps(Json("a\"b\\c\n\t\x01")), "\"a\\\"b\\\\c\\n\\t\\u0001\"");
  EXPECT_EQ(py_json_dumps(Json("caf\xc3\xa9")), "\"caf\\u00e9\"");
  EXPECT_EQ(py_json_dumps(Json("\xf0\x9f\x98\x80")), "\"\\ud83d\\ude00\"");  // U+1F600
  EXPECT_EQ(py_json_dumps(Json("\x7f")), "\"\\u007f\"");
  EXPECT_EQ(py_json_dumps(Json("bad\xff")), "\"bad\\ufffd\"");
}

TEST(PyJsonDumps, ContainersUsePythonSeparators) {
  Json o = Json::object();
  o["b"] = 1;
  o["a"] = Json::array({1, 2.5, nullptr, true});
  o["e"] = Json::object();
  o["f"] = Json::array();
  EXPECT_EQ(py_json_dumps(o), "{\"b\": 1, \"a\": [1, 2.5, null, true], \"e\": {}, \"f\": []}");
}

TEST(PyJsonLoads, AcceptsWhatPythonAccepts) {
  const Json v = py_json_loads(" {\"a\": NaN, \"b\": -Infinity, \"c\": 12, \"d\": 1.0, \"e\": 1e2, \"a\": 3} ");
  EXPECT_EQ(v["a"], 3);  // last duplicate wins
  EXPECT_TRUE(std::isinf(v["b"].get<double>()));
  EXPECT_TRUE(v["c"].is_number_integer());
  EXPECT_TRUE(v["d"].is_number_float());
  EXPECT_TRUE(v["e"].is_number_float());
  EXPECT_EQ(v.begin().key(), "a");  // first position kept, as a Python dict does
  EXPECT_EQ(py_json_loads("\"\\u00e9\"").get<std::string>(), "\xc3\xa9");
  EXPECT_EQ(py_json_loads("\"\xe9\"").get<std::string>(), "\xc3\xa9");  // Latin-1 byte
  EXPECT_EQ(py_json_loads("18446744073709551615").get<uint64_t>(), 18446744073709551615ull);
}

TEST(PyJsonLoads, RefusesWhatPythonRefuses) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", ".5", "tru", "\"a\x01\"", "{\"a\": 1} x",
                          "'a'", "{a: 1}", "\"\\x\""}) {
    EXPECT_THROW(py_json_loads(bad), PyJsonError) << bad;
  }
  try {
    py_json_loads("{\"a\": [1, 2,, 3]}");
    FAIL();
  } catch (const PyJsonError& e) {
    EXPECT_EQ(e.offset, 12u);  // Python: "Expecting value: line 1 column 13 (char 12)"
  }
}

TEST(PyFloatFromString, FollowsPythonFloat) {
  EXPECT_EQ(py_float_from_string(" 12.5 "), 12.5);
  EXPECT_EQ(py_float_from_string("1_000"), 1000.0);
  EXPECT_EQ(py_float_from_string("1e3"), 1000.0);
  EXPECT_EQ(py_float_from_string("-inf"), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(*py_float_from_string("NaN")));
  EXPECT_FALSE(py_float_from_string("1.2.3"));
  EXPECT_FALSE(py_float_from_string(""));
  EXPECT_FALSE(py_float_from_string("_1"));
  EXPECT_FALSE(py_float_from_string("1__0"));
  EXPECT_FALSE(py_float_from_string("abc"));
}

}  // namespace
}  // namespace mrcnn::logging
