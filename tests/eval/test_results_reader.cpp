// The results reader's parallel pieces and fast path give exactly what JsonCursor alone gives:
// the same detections on every kind of valid file, the same error message on every bad one
// (errors in a later piece included), whatever the thread count and piece size.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "eval/coco.h"
#include "eval/json_cursor.h"
#include "eval/results_reader.h"
#include "eval/rle.h"

namespace mrcnn::eval {
namespace {

// JsonCursor alone, one thread: the reference.
ResultsReadOptions reference() {
  ResultsReadOptions o;
  o.threads = 1;
  o.fast_path = false;
  return o;
}

// Every other way of reading: 1..8 threads, pieces as small as the text allows, with and
// without the fast path.
std::vector<ResultsReadOptions> variants() {
  std::vector<ResultsReadOptions> out;
  for (int threads : {1, 2, 3, 4, 8}) {
    for (bool fast : {true, false}) {
      for (size_t piece : {size_t{1}, size_t{64}, size_t{1} << 20}) {
        ResultsReadOptions o;
        o.threads = threads;
        o.fast_path = fast;
        o.min_piece_bytes = piece;
        out.push_back(o);
      }
    }
  }
  return out;
}

std::string describe(const ResultsReadOptions& o) {
  return "threads " + std::to_string(o.threads) + ", fast " + (o.fast_path ? "on" : "off") +
         ", pieces >= " + std::to_string(o.min_piece_bytes) + " bytes";
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void expect_same(const std::vector<Detection>& want, const std::vector<Detection>& got,
                 const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    const Detection& a = want[i];
    const Detection& b = got[i];
    const std::string at = what + ", detection " + std::to_string(i);
    EXPECT_EQ(a.image_id, b.image_id) << at;
    EXPECT_EQ(a.category_id, b.category_id) << at;
    EXPECT_TRUE(same_bits(a.score, b.score)) << at << ": " << a.score << " vs " << b.score;
    EXPECT_EQ(a.has_bbox, b.has_bbox) << at;
    for (size_t k = 0; k < 4; ++k) EXPECT_TRUE(same_bits(a.bbox[k], b.bbox[k])) << at << " bbox " << k;
    const Segmentation& s = a.segmentation;
    const Segmentation& t = b.segmentation;
    EXPECT_EQ(s.kind, t.kind) << at;
    EXPECT_EQ(s.height, t.height) << at;
    EXPECT_EQ(s.width, t.width) << at;
    EXPECT_EQ(s.counts, t.counts) << at;
    EXPECT_EQ(s.compressed.str(), t.compressed.str()) << at;
    ASSERT_EQ(s.polygons.size(), t.polygons.size()) << at;
    for (size_t p = 0; p < s.polygons.size(); ++p) {
      ASSERT_EQ(s.polygons[p].size(), t.polygons[p].size()) << at;
      for (size_t k = 0; k < s.polygons[p].size(); ++k) {
        EXPECT_TRUE(same_bits(s.polygons[p][k], t.polygons[p][k])) << at;
      }
    }
  }
}

void expect_all_ways_equal(const std::string& json) {
  const std::vector<Detection> want = parse_results(json, "res.json", reference());
  for (const ResultsReadOptions& o : variants()) {
    expect_same(want, parse_results(json, "res.json", o), describe(o));
  }
  expect_same(want, parse_results(json, "res.json"), "default options");
}

std::string error_of(const std::string& json, const ResultsReadOptions& o) {
  try {
    parse_results(json, "res.json", o);
  } catch (const CocoError& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_same_error(const std::string& json, const std::string& expected_part) {
  const std::string want = error_of(json, reference());
  EXPECT_THAT(want, ::testing::HasSubstr(expected_part));
  for (const ResultsReadOptions& o : variants()) {
    EXPECT_EQ(error_of(json, o), want) << describe(o);
  }
  EXPECT_EQ(error_of(json, ResultsReadOptions{}), want);
}

// One detection as Python's json.dumps writes it by default, its counts holding an escape.
const std::string kUsual =
    R"({"image_id": 12, "category_id": 7, "score": 0.8345, "bbox": [414.0, 537.0, 86.0, 103.0], )"
    R"("segmentation": {"size": [640, 500], "counts": "iXS81oc01O2N2\\b0^1L4"}})";

// A results array of n copies of `element`.
std::string array_of(const std::string& element, int n) {
  std::string out = "[";
  for (int i = 0; i < n; ++i) out += (i ? ", " : "") + element;
  return out + "]";
}

// A random number token as JSON allows it (and Python's json writes it).
std::string random_number(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> kind(0, 7);
  std::uniform_int_distribution<uint64_t> any;
  char buf[64];
  switch (kind(rng)) {
    case 0: return std::to_string(any(rng) % 1000);
    case 1: std::snprintf(buf, sizeof buf, "%.4f", static_cast<double>(any(rng) % 1000000) / 1000); return buf;
    case 2: std::snprintf(buf, sizeof buf, "%.17g", static_cast<double>(any(rng) % (1ull << 53)) / 3e7); return buf;
    case 3: std::snprintf(buf, sizeof buf, "%.25f", static_cast<double>(any(rng) % 1000) / 7); return buf;
    case 4: std::snprintf(buf, sizeof buf, "%de%d", static_cast<int>(any(rng) % 100), static_cast<int>(any(rng) % 40) - 20); return buf;
    case 5: std::snprintf(buf, sizeof buf, "%.3E", static_cast<double>(any(rng) % 100000) * 1e-3); return buf;
    case 6: return "0.0";
    default: std::snprintf(buf, sizeof buf, "%llu.%llu", static_cast<unsigned long long>(any(rng) % 10000000000000000000ull), static_cast<unsigned long long>(any(rng) % 1000)); return buf;
  }
}

// A results file with every shape a detection can take.
std::string varied_results(size_t n, uint64_t seed, bool with_bbox_always) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, 11);
  const char* ws[] = {" ", "", "\n  ", "\t", "\r\n"};
  std::uniform_int_distribution<int> wpick(0, 4);
  auto w = [&]() { return std::string(ws[wpick(rng)]); };
  std::string out = "[";
  out += w();
  for (size_t i = 0; i < n; ++i) {
    if (i) {
      out += ',';
      out += w();
    }
    std::vector<std::string> fields;
    fields.push_back("\"image_id\":" + w() + std::to_string(rng() % 5 == 0 ? 18446744073709551615ull - i : i % 7));
    fields.push_back("\"category_id\":" + w() + std::to_string(rng() % 90));
    std::string score = random_number(rng);
    if (score[0] != '-' && rng() % 7 == 0) score.insert(score.begin(), '-');
    fields.push_back("\"score\":" + w() + score);
    const int kind = pick(rng);
    const bool bbox = with_bbox_always || kind % 3 != 0;
    if (bbox) {
      fields.push_back("\"bbox\":" + w() + "[" + random_number(rng) + "," + w() + random_number(rng) + ", " +
                       random_number(rng) + "," + random_number(rng) + w() + "]");
    }
    switch (kind) {
      case 0: fields.push_back("\"segmentation\": {\"size\": [640, 480], \"counts\": \"ab\\\\cd\\\\\\\\e\"}"); break;
      case 1: fields.push_back("\"segmentation\": {\"counts\": \"PPYo0\\\\0a3\", \"size\": [3, 4]}"); break;
      case 2: fields.push_back("\"segmentation\": [[0, 0, 1.5, 0, 1, 1], [2e0, 2, 3, 3, 2, 3]]"); break;
      case 3: fields.push_back("\"segmentation\": {\"size\": [3, 4], \"counts\": [3, 2, 7]}"); break;
      case 4: fields.push_back("\"segmentation\": {\"size\": [3,4],\"counts\":\"\\u0030\\/\\\"x\"}"); break;
      case 5: fields.push_back("\"segmentation\": {\"size\": [1, 1], \"counts\": \"1\", \"extra\": {\"a\": [1, {}]}}"); break;
      case 6: fields.push_back("\"note\": \"}, {\\\"image_id\\\": 1}, {\""); break;  // looks like a boundary
      case 7: fields.push_back("\"id\": 12, \"area\": 3.5, \"iscrowd\": 0"); break;
      case 8: fields.push_back("\"segmentation\": null"); break;
      case 9: fields.push_back("\"segmentation\": {\"size\": [480, 640], \"counts\": \"\"}"); break;
      default: break;
    }
    if (!bbox && (kind == 6 || kind == 7 || kind == 8 || kind > 9)) {
      fields.push_back("\"segmentation\": {\"size\": [2, 2], \"counts\": \"04\"}");
    }
    if (rng() % 4 == 0) std::swap(fields[0], fields[fields.size() - 1]);
    if (rng() % 4 == 0) std::swap(fields[1], fields[2]);
    out += '{';
    out += w();
    for (size_t f = 0; f < fields.size(); ++f) {
      if (f) {
        out += ',';
        out += w();
      }
      out += fields[f];
    }
    out += w() + "}";
  }
  out += w() + "]" + w();
  return out;
}

TEST(ResultsReaderPieces, SameDetectionsAsTheCursorOnVariedFiles) {
  for (size_t n : {1, 2, 3, 7, 40, 300}) {
    for (uint64_t seed : {1, 2, 3}) {
      SCOPED_TRACE("n " + std::to_string(n) + ", seed " + std::to_string(seed));
      expect_all_ways_equal(varied_results(n, seed, false));
      expect_all_ways_equal(varied_results(n, seed, true));
    }
  }
}

TEST(ResultsReaderPieces, UsualShapeAndOddLayouts) {
  const std::string& usual = kUsual;
  expect_all_ways_equal(array_of(usual, 500));
  expect_all_ways_equal("[" + usual + "]");                  // one detection
  expect_all_ways_equal("\xEF\xBB\xBF[" + usual + "]\n");    // a byte order mark
  expect_all_ways_equal("[" + usual + "," + usual + "]");    // fewer than the threads
  // Keys repeated (the last wins for the cursor), bbox [], -0.0, exponents, big ids.
  expect_all_ways_equal(R"([{"image_id": 1, "image_id": 2, "category_id": 3, "score": -0.0, "bbox": []
    , "bbox": [1e2, 2E-2, 0.0, 1.5e+1]}, {"image_id": 9999999999999999999, "category_id": 0,
    "score": 1e-400, "bbox": [1, 2, 3, 4]}, {"image_id": 10000000000000000000, "category_id": 1,
    "score": 0.30000000000000000000000001, "bbox": [0.1, 0.2, 0.3, 123456789012345678901234]}])");
}

TEST(ResultsReaderPieces, SameErrorsAsTheCursor) {
  const std::string good =
      R"({"image_id": 1, "category_id": 2, "score": 0.5, "bbox": [1, 2, 3, 4], "segmentation": {"size": [4, 4], "counts": "0\\4"}})";
  std::string head = "[";
  for (int i = 0; i < 60; ++i) head += good + ",\n";
  // Each bad element sits after 60 good ones: in the last piece at every thread count.
  const std::pair<std::string, std::string> bad[] = {
      {R"({"image_id": 1, "category_id": 2, "bbox": [1, 2, 3, 4]}])", "[60]: detection is missing its \"score\""},
      {R"({"image_id": 1, "category_id": 2, "score": NaN, "bbox": [1, 2, 3, 4]}])", "[60].score: expected a finite number"},
      {R"({"image_id": 1, "category_id": 2, "score": 1, "bbox": [1, 2, -3, 4]}])", "[60].bbox[2]: a bbox width or height must not be negative"},
      {R"({"image_id": 1, "category_id": 2, "score": 1, "bbox": [1, 2, 3]}])", "[60].bbox: expected a bbox of 4 numbers"},
      {R"({"image_id": 1, "category_id": 2, "score": 1, "bbox": [1, 2, 3, 4, 5]}])", "[60].bbox"},
      {R"({"image_id": "1", "category_id": 2, "score": 1, "bbox": [1, 2, 3, 4]}])", "[60].image_id: expected an integer"},
      {R"({"image_id": 01, "category_id": 2, "score": 1, "bbox": [1, 2, 3, 4]}])", "[60].image_id: expected ',' or '}', found '1'"},
      {R"({"image_id": 1.5, "category_id": 2, "score": 1, "bbox": [1, 2, 3, 4]}])", "[60].image_id: expected an integer, found a number with a fraction"},
      {R"({"image_id": -1, "category_id": 2, "score": 1, "bbox": [1, 2, 3, 4]}])", "[60].image_id: expected a non-negative integer"},
      {R"({"image_id": 123456789012345678901, "category_id": 2, "score": 1, "bbox": [1, 2, 3, 4]}])", "[60].image_id: integer does not fit in 64 bits"},
      {R"({"image_id": 1, "category_id": 2, "score": 1e999, "bbox": [1, 2, 3, 4]}])", "[60].score: number out of the range of a double"},
      {R"({"image_id": 1, "category_id": 2, "score": 1.}])", "[60].score: expected a digit after the decimal point"},
      {R"({"image_id": 1, "category_id": 2, "score": 1, "segmentation": {"size": [4, 4], "counts": "0\q"}}])", "[60].segmentation.counts: expected a valid escape"},
      {"{\"image_id\": 1, \"category_id\": 2, \"score\": 1, \"segmentation\": {\"size\": [4, 4], \"counts\": \"0\t\"}}]", "a string character (control characters must be escaped)"},
      {R"({"image_id": 1, "category_id": 2, "score": 1, "segmentation": {"size": [4, 4]}}])", "[60].segmentation: an RLE segmentation needs both"},
      {R"({"image_id": 1, "category_id": 2, "score": 1, "segmentation": {"size": [4, 4], "counts": true}}])", "[60].segmentation.counts: expected RLE counts"},
      {R"({"image_id": 1, "category_id": 2, "score": 1, "segmentation": {"size": [4, 3000000000], "counts": "0"}}])", "size out of range"},
      {R"({"image_id": 1, "category_id": 2, "score": 1, "segmentation": [[1, 2, 3]]}])", "[60].segmentation[0]: a polygon needs an even number"},
      {R"({"image_id": 1, "category_id": 2, "score": 1}])", "[60]: detection has neither"},
      {R"({"image_id": 1, "category_id": 2, "score": 1, "bbox": [1, 2, 3, 4]},])", "[61]: expected an object"},
      {R"({"image_id": 1, "category_id": 2, "score": 1, "bbox": [1, 2, 3, 4]}] x)", "expected the end of the file"},
      {R"({"image_id": 1, "category_id": 2, "score": 1, "bbox": [1, 2, 3, 4]})", "found the end of the file"},
      {R"({"image_id": 1, "category_id": 2, "score": 1, "bbox": [1, 2, 3, 4]} {"image_id": 1}])", "expected ',' or ']'"},
      {R"({"image_id": 1 "category_id": 2, "score": 1, "bbox": [1, 2, 3, 4]}])", "[60].image_id: expected ',' or '}', found '\"'"},
      {R"({"image_id": 1, "category_id": 2, "score": 1, "bbox": [1, 2, 3, 4], "x": [1, }])", "[60].x"},
      {R"({"image_id": 1, "category_id": 2, "score": 1, "bbox": [1, 2, 3, 4], "note": "abc)", "expected the closing '\"' of a string"},
      {R"(7])", "[60]: expected an object"},
  };
  for (const auto& [tail, expected] : bad) {
    SCOPED_TRACE(tail);
    expect_same_error(head + tail, expected);
  }
  // Errors in the first element and at the top level.
  expect_same_error("[]", "res.json: the results array is empty");
  expect_same_error("  [ \n ] ", "res.json: the results array is empty");
  expect_same_error(R"({"image_id": 1})", "expected a results array");
  expect_same_error("", "expected a results array");
  expect_same_error(R"([{"image_id": 1, "category_id": 2, "score": 1, "bbox": [1, 2, 3, 4]}, )" + good, "found the end of the file");
  // The same messages name the file, the byte, the line and the column.
  EXPECT_THAT(error_of(head + bad[0].first, ResultsReadOptions{}),
              ::testing::MatchesRegex("res\\.json: byte [0-9]+ \\(line 61, column [0-9]+\\) at \\[60\\]: .*"));
}

TEST(ResultsReaderPieces, NumbersConvertAsFromChars) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> len(1, 24), digit(0, 9), exp(-30, 30);
  for (int i = 0; i < 200000; ++i) {
    std::string s;
    if (rng() % 2) s += '-';
    const int n = len(rng);
    const int dot = static_cast<int>(rng() % static_cast<uint64_t>(n + 1));
    for (int k = 0; k < n; ++k) {
      if (k == dot && k > 0) s += '.';
      s += static_cast<char>('0' + digit(rng));
    }
    // JSON: no leading zero before more digits.
    const size_t first = s[0] == '-' ? 1 : 0;
    if (s.size() > first + 1 && s[first] == '0' && s[first + 1] != '.') s[first] = '1';
    if (rng() % 3 == 0) {
      s += 'e';
      s += std::to_string(exp(rng));
    }
    double want = 0, got = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), want);
    ASSERT_EQ(r.ptr, s.data() + s.size()) << s;
    ASSERT_TRUE(detail::json_number_to_double(s.data(), s.data() + s.size(), got)) << s;
    ASSERT_TRUE(same_bits(want, got)) << s << ": " << want << " vs " << got;
    // Through the fast path of the reader too: near the text's end (read byte by byte) and far
    // from it (short decimals read eight bytes at a time).
    const std::string json = "[{\"image_id\": 1, \"category_id\": 1, \"score\": " + s + ", \"bbox\": [0, 0, 1, 1]}]";
    if (i % 20 == 0) {
      ASSERT_TRUE(same_bits(parse_results(json, "n.json")[0].score, want)) << s;
      ASSERT_TRUE(same_bits(parse_results(json + std::string(64, ' '), "n.json")[0].score, want)) << s;
    }
  }
}

// The fast path reads short decimals and integers eight bytes at a time: every length of integer
// and fraction around that width, trailing zeros, signs, leading zeros (refused), ids of 1-19
// digits, against the cursor alone.
TEST(ResultsReaderPieces, WordAtATimeNumbersEqualTheCursors) {
  std::mt19937_64 rng(11);
  std::vector<std::string> numbers = {"0", "-0", "0.0", "-0.0", "414.0", "0.8345", "1.50", "0.05",
                                      "9999999.9999999", "12345678", "1234567.12345678", "7e2",
                                      "3.25E-1", "0.1000000", "100.0000000"};
  for (int int_digits = 1; int_digits <= 9; ++int_digits) {
    for (int frac_digits = 0; frac_digits <= 9; ++frac_digits) {
      std::string x;
      for (int k = 0; k < int_digits; ++k) x += static_cast<char>('0' + (k == 0 ? 1 + rng() % 9 : rng() % 10));
      if (frac_digits) x += '.';
      for (int k = 0; k < frac_digits; ++k) x += static_cast<char>('0' + rng() % 10);
      numbers.push_back(x);
      numbers.push_back("-" + x);
    }
  }
  std::string json = "[";
  for (size_t i = 0; i < numbers.size(); ++i) {
    std::string id = std::to_string(1 + rng() % 9);
    for (size_t k = 0; k < i % 19; ++k) id += static_cast<char>('0' + rng() % 10);
    json += (i ? ", " : "") + std::string("{\"image_id\": ") + id + ", \"category_id\": " + std::to_string(i) +
            ", \"score\": " + numbers[i] + ", \"bbox\": [" + numbers[i] + ", " + numbers[(i + 1) % numbers.size()] +
            ", 1.5, 2.25]}";
  }
  json += "]";
  expect_all_ways_equal(json);
  // A leading zero ends the number (JSON): the cursor's message, however the number is read.
  expect_same_error(R"([{"image_id": 1, "category_id": 2, "score": 0.5, "bbox": [01.5, 2, 3, 4]}])" +
                        std::string(64, ' '),
                    "[0].bbox[0]: expected ',' or ']', found '1'");
  expect_same_error(R"([{"image_id": 007, "category_id": 2, "score": 0.5, "bbox": [1, 2, 3, 4]}])" +
                        std::string(64, ' '),
                    "[0].image_id: expected ',' or '}', found '0'");
}

// After one element the reader compares the next ones' literal text (keys, separators) with it and
// converts only their values. Every way a later element can differ from the learned layout, valid
// or not, gives the cursor's detections or its error.
TEST(ResultsReaderPieces, LearnedLayoutGivesTheCursorsResultsOnEveryDifference) {
  const std::string& base = kUsual;
  const std::vector<std::string> variants = {
      base,
      R"({"image_id": 123456789, "category_id": 0, "score": -1e-3, "bbox": [1.25, -2.5, 0.0, 1234567.5], )"
      R"("segmentation": {"size": [1, 2], "counts": ""}})",  // other values, same layout
      R"({"image_id": 12, "category_id": 7, "score": 0.8345, "bbox": [414.0, 537.0, -86.0, 103.0], )"
      R"("segmentation": {"size": [640, 500], "counts": "iX"}})",  // negative width: an error
      R"({"image_id": 12, "category_id": 7, "score": 0.8345, "bbox": [414.0, 537.0, 86.0, 103.0], )"
      R"("segmentation": {"size": [640, 500], "counts": "a\u0030b"}})",  // an escape the cursor decodes
      R"({"image_id": 12, "category_id": 7, "score": 0.8345, "bbox": [414.0, 537.0, 86.0, 103.0], )"
      R"("segmentation": {"size": [640, 500], "counts": "a)" "\x01" R"(b"}})",  // a control character
      R"({"image_id": 12, "category_id": 7, "score": "0.8", "bbox": [414.0, 537.0, 86.0, 103.0], )"
      R"("segmentation": {"size": [640, 500], "counts": "iX"}})",  // a string for a number
      R"({"image_id": 12,  "category_id": 7, "score": 0.8345, "bbox": [414.0, 537.0, 86.0, 103.0], )"
      R"("segmentation": {"size": [640, 500], "counts": "iX"}})",  // one more space
      R"({"image_id": 12, "category_id": 7, "score": 0.8345, "bbox": [],   )"
      R"("segmentation": {"size": [640, 500], "counts": "iX"}})",  // no box
      R"({"image_id": 12, "category_id": 7, "score": 0.8345, "bbox": [414.0, 537.0, 86.0, 103.0]})",
      R"({"image_id": 12, "category_id": 7, "score": 0.8345, "bbox": [414.0, 537.0, 86.0, 103.0], )"
      R"("segmentation": {"size": [640, 500], "counts": "iX"}, "extra": 1})",  // another key
      R"({"image_id": 12, "image_id": 7, "score": 0.8345, "bbox": [414.0, 537.0, 86.0, 103.0], )"
      R"("segmentation": {"size": [640, 500], "counts": "iX"}})",  // a repeated key
      R"({"category_id": 7, "image_id": 12, "score": 0.8345, "bbox": [414.0, 537.0, 86.0, 103.0], )"
      R"("segmentation": {"size": [640, 500], "counts": "iX"}})",  // another order
      R"({"image_id": 12, "category_id": 7, "score": 0.8345, "bbox": [414.0, 537.0, 86.0, 103.0], )"
      R"("segmentation": {"size": [640, 500], "counts": "iX"}  })",  // more space before the end
      R"({"image_id": 12, "category_id": 7, "score": 0.8345, "bbox": [414.0, 537.0, 86.0, 103.0], )"
      R"("segmentation": {"size": [640, 5000000000], "counts": "iX"}})",  // a size out of range
      R"({"image_id": 12, "category_id": 7, "score": 0.8345, "bbox": [414.0, 537.0, 86.0, 103.0], )"
      R"("segmentation": {"size": [640, 500], "counts": "iX})",  // unterminated
      R"({"image_id": 12, "category_id": 7, "score": 1.5e400, "bbox": [414.0, 537.0, 86.0, 103.0], )"
      R"("segmentation": {"size": [640, 500], "counts": "iX"}})",  // not a finite number
      R"({"image_id": 12, "category_id": 7.5, "score": 0.8345, "bbox": [414.0, 537.0, 86.0, 103.0], )"
      R"("segmentation": {"size": [640, 500], "counts": "iX"}})",  // a fraction in an id
  };
  for (size_t v = 0; v < variants.size(); ++v) {
    SCOPED_TRACE("variant " + std::to_string(v));
    std::string json = "[";
    for (int i = 0; i < 40; ++i) json += base + ", ";
    json += variants[v];
    for (int i = 0; i < 40; ++i) json += ", " + base;
    json += "]" + std::string(64, ' ');
    if (error_of(json, reference()) == "(no error)") {
      expect_all_ways_equal(json);
    } else {
      expect_same_error(json, "res.json: byte ");
    }
  }
  // A layout learned from a box-only element, then elements with masks, and back.
  const std::string box_only = R"({"image_id": 3, "category_id": 1, "score": 0.5, "bbox": [1, 2, 3, 4]})";
  std::string mixed = "[";
  for (int i = 0; i < 60; ++i) mixed += (i ? ", " : "") + (i % 7 < 3 ? box_only : base);
  expect_all_ways_equal(mixed + "]" + std::string(64, ' '));
}

// A text cut anywhere, held in a buffer of exactly its size (as a mapped file whose size is a
// multiple of the page size is): the cursor's error, and no byte read past the end (the address
// sanitizer build checks the reads).
TEST(ResultsReaderPieces, TruncatedTextsAreErrorsWithoutReadingPastTheEnd) {
  const std::string whole = array_of(kUsual, 3);
  for (size_t n = 1; n < whole.size(); ++n) {
    const std::unique_ptr<char[]> exact(new char[n]);
    std::memcpy(exact.get(), whole.data(), n);
    const std::string_view text(exact.get(), n);
    SCOPED_TRACE("first " + std::to_string(n) + " bytes");
    ResultsReadOptions o;
    o.threads = 2;
    o.min_piece_bytes = 64;
    EXPECT_THROW(parse_results(text, "res.json", o), CocoError);
    EXPECT_THROW(parse_results(text, "res.json"), CocoError);
  }
}

// load_results refers to the mapped file instead of copying the counts strings: the detections
// equal the cursor's, escapes included, and stay valid after the file is gone and the vector
// that held them is destroyed (each keeps the mapping alive).
TEST(ResultsReaderFile, DetectionsReferToTheFileAndOutliveIt) {
  // A real 640x500 mask whose counts string holds '\\' (escaped in the file), and one with every
  // escape the fast path takes.
  std::string counts;
  for (uint32_t v = 1; counts.find('\\') == std::string::npos; ++v) {
    counts = to_string(from_counts({v * 37, 1000 + v, 640 * 500 - v * 37 - 1000 - v}, 640, 500));
  }
  std::string escaped;
  for (char c : counts) escaped += c == '\\' ? std::string("\\\\") : std::string(1, c);
  const std::string mask = R"({"image_id": 3, "category_id": 7, "score": 0.5, "bbox": [1, 2, 3, 4], )"
                           R"("segmentation": {"size": [640, 500], "counts": ")" + escaped + "\"}}";
  const std::string odd = R"({"image_id": 4, "category_id": 7, "score": 0.5, "bbox": [1, 2, 3, 4], )"
                          R"("segmentation": {"size": [640, 500], "counts": "b0\\^1\/x\"y"}})";
  std::string json = varied_results(300, 7, true);
  json.resize(json.rfind(']'));  // the varied file's detections, then more of the usual shape
  for (int i = 0; i < 2000; ++i) json += ", " + (i % 2 ? mask : odd);
  json += "]";
  const std::string path = ::testing::TempDir() + "results_reader_file.json";
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(json.data(), 1, json.size(), f), json.size());
    std::fclose(f);
  }
  const std::vector<Detection> want = parse_results(json, "res.json", reference());
  ASSERT_EQ(want.back().segmentation.compressed.str(), counts);
  Detection kept, kept_odd;
  {
    ResultsReadOptions o;
    o.threads = 3;
    o.min_piece_bytes = 4096;
    std::vector<Detection> got = load_results(path, o);
    expect_same(want, got, "load_results, 3 pieces");
    expect_same(want, load_results(path), "load_results, default options");
    kept = got.back();
    kept_odd = got[got.size() - 2];
    ASSERT_EQ(std::remove(path.c_str()), 0);
  }
  EXPECT_EQ(kept.segmentation.compressed.str(), counts);
  EXPECT_EQ(kept_odd.segmentation.compressed.str(), "b0\\^1/x\"y");
  // Referred to, not copied: the characters held are the file's, escapes and all (a copy holds
  // them decoded).
  EXPECT_EQ(kept.segmentation.compressed.raw(), escaped);
  EXPECT_EQ(kept_odd.segmentation.compressed.raw(), "b0\\\\^1\\/x\\\"y");
  EXPECT_EQ(want.back().segmentation.compressed.raw(), counts) << "parse_results copies";
  EXPECT_EQ(to_rle(kept.segmentation, 640, 500, "kept").counts, from_string(counts, 640, 500).counts)
      << "decoded through the escapes";
}

TEST(CompressedCounts, OwnsOrRefersCopiesShareMovesEmpty) {
  CompressedCounts owned = std::string("0\\4");
  std::string scratch;
  EXPECT_EQ(owned.text(scratch), "0\\4");
  EXPECT_TRUE(scratch.empty()) << "no escapes: the characters themselves";

  auto text = std::make_shared<const std::string>(R"(ab\\c\/d\"e)");
  CompressedCounts borrowed = CompressedCounts::in_json(text, *text, true);
  EXPECT_EQ(borrowed.str(), "ab\\c/d\"e");
  EXPECT_EQ(borrowed, CompressedCounts("ab\\c/d\"e"));
  EXPECT_FALSE(borrowed == owned);
  EXPECT_EQ(text.use_count(), 2);

  CompressedCounts copy = borrowed;
  EXPECT_EQ(text.use_count(), 3);
  CompressedCounts moved = std::move(borrowed);
  EXPECT_EQ(text.use_count(), 3);
  EXPECT_TRUE(borrowed.empty());  // NOLINT(bugprone-use-after-move): the documented state
  EXPECT_EQ(borrowed.str(), "");  // NOLINT(bugprone-use-after-move)
  text.reset();
  EXPECT_EQ(copy.str(), "ab\\c/d\"e") << "the copy keeps the text alive";
  EXPECT_EQ(moved, copy);
  EXPECT_TRUE(CompressedCounts().empty());
  EXPECT_TRUE(CompressedCounts("").empty());
}

}  // namespace
}  // namespace mrcnn::eval
