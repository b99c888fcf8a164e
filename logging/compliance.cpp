#include "logging/compliance.h"

#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "logging/py_json.h"

namespace mrcnn::logging {
namespace {

constexpr std::string_view kToken = ":::MLLOG ";

// ================================================================================================
// Reading: the official parser's view of a file. It reads Latin-1 text with universal newlines,
// keeps lines containing the token, keeps what follows the token's last occurrence, strips
// Python whitespace, and parses the rest as JSON.
// ================================================================================================

struct RawRecord {
  int64_t file_line;
  std::string text;  // after the last token, not yet stripped
  bool too_long;
};

struct ReadStats {
  int64_t nul_bytes = 0;
  int64_t lines = 0;
};

class RecordReader {
 public:
  explicit RecordReader(size_t max_bytes) : max_(max_bytes) {}

  void feed(std::string_view chunk, std::vector<RawRecord>& out, ReadStats& stats) {
    for (char c : chunk) stats.nul_bytes += c == '\0';
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
      end_line(out, stats);
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

  void finish(std::vector<RawRecord>& out, ReadStats& stats) {
    if (in_record_ || !carry_.empty() || !line_empty_) end_line(out, stats);
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

  void end_line(std::vector<RawRecord>& out, ReadStats& stats) {
    ++line_no_;
    ++stats.lines;
    if (in_record_) out.push_back({line_no_, overflow_ ? std::string() : std::move(buf_), overflow_});
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

// ================================================================================================
// Python semantics on JSON values (only what the 3.1.0 Mask R-CNN rules use).
// ================================================================================================

struct PyException {
  std::string what;  // e.g. "TypeError: '>' not supported between 'str' and 'int'"
};

std::string py_type(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "NoneType";
    case Json::value_t::boolean: return "bool";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "int";
    case Json::value_t::number_float: return "float";
    case Json::value_t::string: return "str";
    case Json::value_t::array: return "list";
    case Json::value_t::object: return "dict";
    default: return "object";
  }
}

bool is_num(const Json& v) { return v.is_number() || v.is_boolean(); }

double num(const Json& v, const char* op) {
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_number()) return v.get<double>();
  throw PyException{std::string("TypeError: '") + op + "' not supported for '" + py_type(v) + "'"};
}

__int128 as_int(const Json& v) {
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (v.is_number_unsigned()) return static_cast<__int128>(v.get<uint64_t>());
  return static_cast<__int128>(v.get<int64_t>());
}

bool py_eq(const Json& a, const Json& b) {
  if (is_num(a) && is_num(b)) {
    if (a.is_number_float() || b.is_number_float()) return num(a, "==") == num(b, "==");
    return as_int(a) == as_int(b);  // int/bool compare exactly, as Python ints do
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!py_eq(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a.items()) {
      auto it = b.find(k);
      if (it == b.end() || !py_eq(v, *it)) return false;
    }
    return true;
  }
  return a == b;
}

// `needle in hay` for a string needle.
bool py_in(std::string_view needle, const Json& hay) {
  if (hay.is_object()) return hay.contains(std::string(needle));
  if (hay.is_array()) {
    for (const auto& e : hay)
      if (e.is_string() && e.get_ref<const std::string&>() == needle) return true;
    return false;
  }
  if (hay.is_string()) return hay.get_ref<const std::string&>().find(needle) != std::string::npos;
  throw PyException{"TypeError: argument of type '" + py_type(hay) + "' is not iterable"};
}

const Json& py_index(const Json& v, std::string_view k) {
  if (v.is_object()) {
    auto it = v.find(std::string(k));
    if (it == v.end()) throw PyException{"KeyError: '" + std::string(k) + "'"};
    return *it;
  }
  if (v.is_string() || v.is_array())
    throw PyException{"TypeError: " + py_type(v) + " indices must be integers"};
  throw PyException{"TypeError: '" + py_type(v) + "' object is not subscriptable"};
}

size_t py_len_of(const Json& v) {
  if (v.is_string()) return py_len(v.get_ref<const std::string&>());
  if (v.is_array() || v.is_object()) return v.size();
  throw PyException{"TypeError: object of type '" + py_type(v) + "' has no len()"};
}

double py_div(double a, double b) {
  if (b == 0) throw PyException{"ZeroDivisionError: float division by zero"};
  return a / b;
}

// mlp_compliance.is_integer: abs(round(value) - value) < 0.00001
bool is_integer(double v) {
  if (std::isnan(v)) throw PyException{"ValueError: cannot convert float NaN to integer"};
  if (std::isinf(v)) throw PyException{"OverflowError: cannot convert float infinity to integer"};
  return std::abs(std::nearbyint(v) - v) < 0.00001;
}

// ================================================================================================
// Parsed log lines.
// ================================================================================================

struct LogLine {
  int64_t file_line;
  std::string text;
  double timestamp;
  Json key;
  Json value;
  Json metadata;
  std::string key_str() const { return key.is_string() ? key.get<std::string>() : std::string(); }
};

// ================================================================================================
// The rule files of training_3.1.0, as data. Each CHECK keeps the official Python text, which is
// what the report quotes, beside its C++ translation.
// ================================================================================================

struct State {  // the official `s` dictionary, fresh for each rule file
  bool init_started = false, init_stopped = false, run_started = false, run_stopped = false;
  double first_init_start = 9e99;
  double compile_time_mins = 0;
  std::optional<Json> global_batch_size;
};

class Engine;

struct Ctx {
  State& s;
  const LogLine& ll;
  Engine& engine;
  const Json& v_value() const { return ll.value; }
  const Json& v_meta() const { return ll.metadata; }
};

struct Check {
  std::string text;
  std::function<bool(Ctx&)> fn;
};

struct KeyRule {
  std::string name;
  std::string req;  // EXACTLY_ONE, AT_LEAST_ONE, AT_LEAST_ONE_OR(x) or ""
  std::vector<Check> checks;
  std::function<void(Ctx&)> post;
  std::optional<Check> at_least_one_check;
};

struct RuleFile {
  std::string name;
  std::vector<KeyRule> keys;
};

const std::vector<std::string> kBenchmarks = {"resnet", "ssd", "stable_diffusion", "maskrcnn", "gpt3",
                                              "dlrm_dcnv2", "bert", "rnnt", "unet3d"};

bool value_in_list(const Json& v, const std::vector<std::string>& list) {
  for (const auto& s : list)
    if (py_eq(v, Json(s))) return true;
  return false;
}

std::string py_str(const Json& v) {  // str(v) for the values a POST formats into a file name
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  return py_json_dumps(v);
}

void enqueue(Ctx& c, const std::string& config);

Check has_epoch_or_step() {
  return {"('epoch_num' in v['metadata']) | ('step_num' in v['metadata'])", [](Ctx& c) {
            const bool a = py_in("epoch_num", c.v_meta());
            const bool b = py_in("step_num", c.v_meta());
            return a || b;
          }};
}

Check value_not_empty() {
  return {"v['value'] != ''", [](Ctx& c) { return !py_eq(c.v_value(), Json("")); }};
}

Check num_cmp(std::string text, bool strict_gt) {
  return {std::move(text), [strict_gt](Ctx& c) {
            const double x = num(c.v_value(), strict_gt ? ">" : ">=");
            return strict_gt ? x > 0 : x >= 0;
          }};
}

RuleFile common_310() {
  RuleFile f{"training_3.1.0/common.yaml", {}};
  auto& k = f.keys;
  k.push_back({"submission_org", "EXACTLY_ONE", {value_not_empty()}, nullptr, {}});
  k.push_back({"submission_platform", "EXACTLY_ONE", {value_not_empty()}, nullptr, {}});
  k.push_back({"submission_division", "EXACTLY_ONE",
               {{"v['value'] in ['closed', 'open']",
                 [](Ctx& c) { return value_in_list(c.v_value(), {"closed", "open"}); }}},
               [](Ctx& c) {
                 enqueue(c, "training_3.1.0/" + py_str(c.v_value()) + "_common.yaml");
                 c.s.compile_time_mins = py_eq(c.v_value(), Json("open")) ? 240 : 30;
               },
               {}});
  k.push_back({"submission_status", "EXACTLY_ONE",
               {{"v['value'] in ['cloud', 'onprem', 'preview', 'research']",
                 [](Ctx& c) {
                   return value_in_list(c.v_value(), {"cloud", "onprem", "preview", "research"});
                 }}},
               nullptr, {}});
  k.push_back({"cache_clear", "AT_LEAST_ONE", {{"'value' in v", [](Ctx&) { return true; }}}, nullptr, {}});
  k.push_back({"init_start", "AT_LEAST_ONE",
               {{"not s['init_stopped']", [](Ctx& c) { return !c.s.init_stopped; }},
                {"not s['run_started']", [](Ctx& c) { return !c.s.run_started; }}},
               [](Ctx& c) {
                 c.s.init_started = true;
                 // Python's min(a, b) keeps a unless b < a (so a NaN timestamp is ignored).
                 if (c.ll.timestamp < c.s.first_init_start) c.s.first_init_start = c.ll.timestamp;
               },
               {}});
  k.push_back({"init_stop", "EXACTLY_ONE",
               {{"s['init_started']", [](Ctx& c) { return c.s.init_started; }},
                {"not s['run_started']", [](Ctx& c) { return !c.s.run_started; }},
                {"ll.timestamp - s['first_init_start'] < (s['compile_time_mins']*60*1e3)",
                 [](Ctx& c) {
                   return c.ll.timestamp - c.s.first_init_start < c.s.compile_time_mins * 60 * 1e3;
                 }}},
               [](Ctx& c) { c.s.init_stopped = true; }, {}});
  k.push_back({"run_start", "EXACTLY_ONE",
               {{"( s['init_stopped'] == True )", [](Ctx& c) { return c.s.init_stopped; }}},
               [](Ctx& c) { c.s.run_started = true; }, {}});
  k.push_back({"run_stop", "EXACTLY_ONE",
               {{"s['run_started']", [](Ctx& c) { return c.s.run_started; }},
                {"'status' in v['metadata']", [](Ctx& c) { return py_in("status", c.v_meta()); }}},
               [](Ctx& c) { c.s.run_stopped = true; }, {}});
  k.push_back(
      {"block_start", "AT_LEAST_ONE_OR(epoch_start)",
       {{"s['run_started']", [](Ctx& c) { return c.s.run_started; }},
        {"('epoch_count' in v['metadata']) | ('step_num' in v['metadata'])",
         [](Ctx& c) {
           const bool a = py_in("epoch_count", c.v_meta());
           const bool b = py_in("step_num", c.v_meta());
           return a || b;
         }},
        {"'first_epoch_num' in v['metadata'] if 'epoch_count' in v['metadata'] else True",
         [](Ctx& c) { return py_in("epoch_count", c.v_meta()) ? py_in("first_epoch_num", c.v_meta()) : true; }},
        {"v['metadata']['epoch_count'] > 0 if 'epoch_count' in v['metadata'] else True",
         [](Ctx& c) {
           return py_in("epoch_count", c.v_meta()) ? num(py_index(c.v_meta(), "epoch_count"), ">") > 0 : true;
         }},
        {"v['metadata']['step_num'] >= 0 if 'step_num' in v['metadata'] else True",
         [](Ctx& c) {
           return py_in("step_num", c.v_meta()) ? num(py_index(c.v_meta(), "step_num"), ">=") >= 0 : true;
         }}},
       nullptr, {}});
  k.push_back({"block_stop", "AT_LEAST_ONE_OR(epoch_stop)",
               {{"('first_epoch_num' in v['metadata']) | ('step_num' in v['metadata'])",
                 [](Ctx& c) {
                   const bool a = py_in("first_epoch_num", c.v_meta());
                   const bool b = py_in("step_num", c.v_meta());
                   return a || b;
                 }}},
               nullptr, {}});
  k.push_back({"epoch_start", "AT_LEAST_ONE_OR(block_start)",
               {{"'epoch_num' in v['metadata']", [](Ctx& c) { return py_in("epoch_num", c.v_meta()); }}},
               nullptr, {}});
  k.push_back({"epoch_stop", "AT_LEAST_ONE_OR(block_stop)",
               {{"'epoch_num' in v['metadata']", [](Ctx& c) { return py_in("epoch_num", c.v_meta()); }}},
               nullptr, {}});
  k.push_back({"eval_start", "AT_LEAST_ONE_OR(block_start)", {has_epoch_or_step()}, nullptr, {}});
  k.push_back({"eval_stop", "AT_LEAST_ONE_OR(block_stop)", {has_epoch_or_step()}, nullptr, {}});
  k.push_back({"eval_accuracy", "AT_LEAST_ONE", {has_epoch_or_step()}, nullptr, {}});
  k.push_back({"train_samples", "EXACTLY_ONE", {value_not_empty()}, nullptr, {}});
  k.push_back({"eval_samples", "EXACTLY_ONE", {value_not_empty()}, nullptr, {}});
  return f;
}

KeyRule submission_benchmark(const std::string& division) {
  return {"submission_benchmark", "EXACTLY_ONE",
          {{"v['value'] in ['resnet', 'ssd', 'stable_diffusion', 'maskrcnn', 'gpt3', 'dlrm_dcnv2', "
            "'bert', 'rnnt', 'unet3d']",
            [](Ctx& c) { return value_in_list(c.v_value(), kBenchmarks); }}},
          [division](Ctx& c) {
            enqueue(c, "training_3.1.0/" + division + "_" + py_str(c.v_value()) + ".yaml");
          },
          {}};
}

RuleFile closed_common_310() {
  RuleFile f{"training_3.1.0/closed_common.yaml", {}};
  f.keys.push_back(submission_benchmark("closed"));
  f.keys.push_back({"gradient_accumulation_steps", "EXACTLY_ONE", {num_cmp("v['value'] > 0", true)}, nullptr, {}});
  return f;
}

RuleFile open_common_310() {
  RuleFile f{"training_3.1.0/open_common.yaml", {}};
  f.keys.push_back(submission_benchmark("open"));
  return f;
}

std::vector<Check> eval_accuracy_checks() {
  return {{"'BBOX' in v['value']", [](Ctx& c) { return py_in("BBOX", c.v_value()); }},
          {"'SEGM' in v['value']", [](Ctx& c) { return py_in("SEGM", c.v_value()); }},
          {"'epoch_num' in v['metadata']", [](Ctx& c) { return py_in("epoch_num", c.v_meta()); }}};
}

RuleFile closed_maskrcnn_310() {
  RuleFile f{"training_3.1.0/closed_maskrcnn.yaml", {}};
  auto& k = f.keys;
  k.push_back({"global_batch_size", "EXACTLY_ONE", {num_cmp("v['value'] > 0", true)},
               [](Ctx& c) { c.s.global_batch_size = c.v_value(); }, {}});
  k.push_back({"opt_base_learning_rate", "EXACTLY_ONE",
               {{"is_integer(v['value'] / 0.02) or ( s['global_batch_size'] < 16 and is_integer(0.02 / "
                 "v['value']) )",
                 [](Ctx& c) {
                   if (is_integer(py_div(num(c.v_value(), "/"), 0.02))) return true;
                   if (!c.s.global_batch_size) throw PyException{"KeyError: 'global_batch_size'"};
                   if (!(num(*c.s.global_batch_size, "<") < 16)) return false;
                   return is_integer(py_div(0.02, num(c.v_value(), "/")));
                 }}},
               nullptr, {}});
  k.push_back({"opt_learning_rate_warmup_steps", "EXACTLY_ONE", {num_cmp("v['value'] >= 0", false)}, nullptr, {}});
  k.push_back({"opt_learning_rate_warmup_factor", "EXACTLY_ONE", {num_cmp("v['value'] > 0", true)}, nullptr, {}});
  k.push_back({"num_image_candidates", "EXACTLY_ONE",
               {{"is_integer(v['value'] / 1000.0)",
                 [](Ctx& c) { return is_integer(py_div(num(c.v_value(), "/"), 1000.0)); }}},
               nullptr, {}});
  k.push_back({"opt_learning_rate_decay_factor", "EXACTLY_ONE",
               {{"v['value'] == 0.1", [](Ctx& c) { return py_eq(c.v_value(), Json(0.1)); }}}, nullptr, {}});
  k.push_back({"opt_learning_rate_decay_steps", "EXACTLY_ONE",
               {{"len(v['value']) == 2", [](Ctx& c) { return py_len_of(c.v_value()) == 2; }}}, nullptr, {}});
  k.push_back({"min_image_size", "EXACTLY_ONE", {num_cmp("v['value'] >= 0", false)}, nullptr, {}});
  k.push_back({"max_image_size", "EXACTLY_ONE", {num_cmp("v['value'] >= 0", false)}, nullptr, {}});
  k.push_back({"eval_accuracy", "AT_LEAST_ONE", eval_accuracy_checks(), nullptr,
               Check{"v['value']['BBOX'] >= 0.377 and v['value']['BBOX'] < 1.0 and v['value']['SEGM'] >= "
                     "0.339 and v['value']['SEGM'] < 1.0",
                     [](Ctx& c) {
                       const Json& v = c.v_value();
                       return num(py_index(v, "BBOX"), ">=") >= 0.377 && num(py_index(v, "BBOX"), "<") < 1.0 &&
                              num(py_index(v, "SEGM"), ">=") >= 0.339 && num(py_index(v, "SEGM"), "<") < 1.0;
                     }}});
  return f;
}

RuleFile open_maskrcnn_310() {
  RuleFile f{"training_3.1.0/open_maskrcnn.yaml", {}};
  f.keys.push_back({"eval_accuracy", "AT_LEAST_ONE", eval_accuracy_checks(), nullptr,
                    Check{"v['value']['BBOX'] < 1.0 and v['value']['SEGM'] < 1.0", [](Ctx& c) {
                            const Json& v = c.v_value();
                            return num(py_index(v, "BBOX"), "<") < 1.0 && num(py_index(v, "SEGM"), "<") < 1.0;
                          }}});
  return f;
}

// Rule files of other benchmarks exist in the official package; this checker does not carry them.
bool is_other_official_file(const std::string& name) {
  for (const auto& b : kBenchmarks)
    if (b != "maskrcnn" && (name == "training_3.1.0/closed_" + b + ".yaml" ||
                            name == "training_3.1.0/open_" + b + ".yaml"))
      return true;
  return false;
}

std::optional<RuleFile> rule_file(const std::string& name) {
  if (name == "training_3.1.0/common.yaml") return common_310();
  if (name == "training_3.1.0/closed_common.yaml") return closed_common_310();
  if (name == "training_3.1.0/open_common.yaml") return open_common_310();
  if (name == "training_3.1.0/closed_maskrcnn.yaml") return closed_maskrcnn_310();
  if (name == "training_3.1.0/open_maskrcnn.yaml") return open_maskrcnn_310();
  return std::nullopt;
}

std::string short_json(const Json& v) {
  std::string s = py_json_dumps(v);
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  return s;
}

// ================================================================================================
// The engine: mlp_compliance.ComplianceChecker.configured_checks, pass by pass.
// ================================================================================================

class Engine {
 public:
  Engine(const std::vector<LogLine>& lines, const CheckOptions& opt) : lines_(lines), opt_(opt) {}

  void run() {
    if (lines_.empty()) put({0, "", "no :::MLLOG lines found"});
    queue_.push_back("training_" + opt_.ruleset + "/common.yaml");
    while (!queue_.empty()) {
      const std::string name = queue_.front();
      queue_.pop_front();
      auto file = rule_file(name);
      if (!file) {
        if (is_other_official_file(name))
          put({0, "submission_benchmark",
               "rules '" + name + "' belong to another benchmark; this checker implements maskrcnn only"});
        else
          put({0, "", "no such rule file: " + name + " (check submission_division / submission_benchmark)"});
        continue;
      }
      run_file(*file);
    }
  }

  void enqueue(const std::string& name) { queue_.push_back(name); }

  std::vector<CheckMessage> errors() const {
    std::vector<CheckMessage> out = fixed_;
    for (const auto& [key, msgs] : keyed_) out.insert(out.end(), msgs.begin(), msgs.end());
    std::stable_sort(out.begin(), out.end(),
                     [](const CheckMessage& a, const CheckMessage& b) { return a.line < b.line; });
    return out;
  }
  const std::vector<CheckMessage>& warnings() const { return warnings_; }

 private:
  void put(CheckMessage m) { fixed_.push_back(std::move(m)); }
  void put_keyed(CheckMessage m) { keyed_[m.key].push_back(std::move(m)); }
  void put_warning(CheckMessage m) {
    if (opt_.werror)
      put_keyed(std::move(m));
    else
      warnings_.push_back(std::move(m));
  }

  void run_file(const RuleFile& f) {
    State s;  // the defaults are what common.yaml's BEGIN block sets; other files use no field
              // of `s` before setting it, except global_batch_size (optional, KeyError if unset)
    std::map<std::string, const KeyRule*> rules;
    for (const auto& r : f.keys) {
      rules[r.name] = &r;
      keyed_.erase(r.name);  // overwrite_messages: this file's rules replace earlier verdicts
    }
    std::map<std::string, std::vector<const LogLine*>> reported;
    for (const auto& r : f.keys) reported[r.name];
    std::map<std::string, int> at_least_one;
    std::set<std::string> has_been_exec;

    for (const LogLine& ll : lines_) {
      if (!ll.key.is_string()) continue;
      const std::string key = ll.key.get<std::string>();
      auto it = rules.find(key);
      if (it == rules.end()) continue;
      const KeyRule& rule = *it->second;
      reported[key].push_back(&ll);
      Ctx ctx{s, ll, *this};
      if (!has_been_exec.contains(key)) {
        for (const Check& chk : rule.checks) {
          try {
            if (!chk.fn(ctx))
              put_keyed({ll.file_line, key, "CHECK failed: " + chk.text + "  [value " + short_json(ll.value) +
                                                ", metadata " + short_json(ll.metadata) + "]"});
          } catch (const PyException& e) {
            put_keyed({ll.file_line, key, "CHECK cannot be evaluated (" + e.what + "): " + chk.text +
                                              "  [value " + short_json(ll.value) + "]"});
          }
        }
        if (rule.post) {
          try {
            rule.post(ctx);
          } catch (const PyException& e) {
            put_keyed({ll.file_line, key, "POST code failed (" + e.what + ")"});
          }
        }
      }
      if (rule.at_least_one_check) {
        at_least_one.try_emplace(key, 0);
        try {
          if (rule.at_least_one_check->fn(ctx)) ++at_least_one[key];
        } catch (const PyException& e) {
          // The official checker evaluates this outside any try block: it crashes here.
          put({ll.file_line, key, "value cannot be checked against the target (" + e.what +
                                      "; the official checker crashes on this line)  [value " +
                                      short_json(ll.value) + "]"});
        }
      }
      if (key.find("submission_") != std::string::npos) has_been_exec.insert(key);
    }

    for (const auto& [key, count] : at_least_one)
      if (count == 0)
        put({0, key, "no line passes: " + rules[key]->at_least_one_check->text});

    std::set<std::set<std::string>> alternatives;
    for (const auto& r : f.keys) {
      const auto& vals = reported[r.name];
      const auto n = vals.size();
      if (r.req == "EXACTLY_ONE" && n != 1) {
        bool all_same = n > 0;
        for (const LogLine* l : vals) all_same = all_same && py_eq(l->value, vals.front()->value);
        std::string where;
        for (const LogLine* l : vals) where += (where.empty() ? " (lines " : ", ") + std::to_string(l->file_line);
        if (!where.empty()) where += ")";
        if (all_same)
          put_warning({vals.back()->file_line, r.name,
                       "required exactly once, found " + std::to_string(n) + " times with the same value" + where});
        else
          put_keyed({n ? vals.back()->file_line : 0, r.name,
                     "required exactly once, found " + std::to_string(n) +
                         (n ? " times with different values" + where : std::string())});
      } else if (r.req == "AT_LEAST_ONE" && n < 1) {
        put_keyed({0, r.name, "required at least once, found 0"});
      } else if (r.req.starts_with("AT_LEAST_ONE_OR(")) {
        const std::string alt = r.req.substr(16, r.req.size() - 17);
        alternatives.insert({r.name, alt});
      }
    }
    for (const auto& alts : alternatives) {
      bool any = false;
      std::string names;
      for (const auto& k : alts) {
        any = any || !reported[k].empty();
        names += (names.empty() ? "'" : " or '") + k + "'";
      }
      if (!any) put({0, *alts.begin(), "required at least once: " + names});
    }
  }

  const std::vector<LogLine>& lines_;
  const CheckOptions& opt_;
  std::deque<std::string> queue_;
  std::vector<CheckMessage> fixed_;                            // not overwritable
  std::map<std::string, std::vector<CheckMessage>> keyed_;     // overwritable, by key
  std::vector<CheckMessage> warnings_;
};

void enqueue(Ctx& c, const std::string& config) { c.engine.enqueue(config); }

// ================================================================================================
// Advisories: what the official rules let through but a reviewer would not.
// ================================================================================================

std::optional<int64_t> meta_int(const LogLine& l, const char* field) {
  if (!l.metadata.is_object()) return std::nullopt;
  auto it = l.metadata.find(field);
  if (it == l.metadata.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

std::vector<CheckMessage> advisories(const std::vector<LogLine>& lines) {
  std::vector<CheckMessage> out;
  bool run_started = false, run_stopped = false, seed = false, target_line = false;
  bool epoch_open = false;
  std::optional<int64_t> open_epoch;  // epoch_num of the open epoch, when it logged one
  int64_t last_epoch = 0;
  std::set<int64_t> stopped_epochs, evaluated;
  const LogLine* run_stop = nullptr;
  for (const LogLine& l : lines) {
    const std::string k = l.key_str();
    const bool timed = k == "block_start" || k == "block_stop" || k == "epoch_start" ||
                       k == "epoch_stop" || k == "eval_start" || k == "eval_stop";
    if (k == "seed") {
      seed = true;
      if (!l.value.is_number_integer())
        out.push_back({l.file_line, k, "seed should be an integer (the package checker reads it with int())"});
    }
    if (k == "run_start") run_started = true;
    if (timed && !run_started) out.push_back({l.file_line, k, "logged before run_start"});
    if ((timed || k == "eval_accuracy") && run_stopped)
      out.push_back({l.file_line, k, "logged after run_stop"});
    if (k == "run_stop") {
      run_stopped = true;
      run_stop = &l;
    }
    if (k == "epoch_start") {
      const auto e = meta_int(l, "epoch_num");
      if (epoch_open) out.push_back({l.file_line, k, "the previous epoch was never stopped"});
      if (e && *e != last_epoch + 1)
        out.push_back({l.file_line, k, "epoch_num " + std::to_string(*e) + " follows epoch " +
                                           std::to_string(last_epoch) + " (epochs count from 1, one by one)"});
      epoch_open = true;
      open_epoch = e;
      if (e) last_epoch = *e;
    }
    if (k == "epoch_stop") {
      const auto e = meta_int(l, "epoch_num");
      if (!epoch_open || e != open_epoch)
        out.push_back({l.file_line, k, "does not close the epoch that is open"});
      if (e) stopped_epochs.insert(*e);
      epoch_open = false;
    }
    if (k == "eval_start") {
      const auto e = meta_int(l, "epoch_num");
      if (e && !stopped_epochs.contains(*e))
        out.push_back({l.file_line, k, "evaluates epoch " + std::to_string(*e) + ", which has not finished"});
    }
    if (k == "eval_accuracy") {
      const auto e = meta_int(l, "epoch_num");
      if (e && !stopped_epochs.contains(*e))
        out.push_back({l.file_line, k, "accuracy for epoch " + std::to_string(*e) + ", which has not finished"});
      if (e && !evaluated.insert(*e).second)
        out.push_back({l.file_line, k, "a second accuracy for epoch " + std::to_string(*e)});
      if (l.value.is_object() && l.value.contains("BBOX") && l.value.contains("SEGM") &&
          is_num(l.value["BBOX"]) && is_num(l.value["SEGM"]) && l.value["BBOX"].get<double>() >= 0.377 &&
          l.value["SEGM"].get<double>() >= 0.339)
        target_line = true;
    }
  }
  if (!seed) out.push_back({0, "seed", "no seed logged (the package checker needs one per run)"});
  if (run_stop != nullptr && run_stop->metadata.is_object()) {
    const auto st = run_stop->metadata.value("status", Json());
    if (!st.is_string() || (st != "success" && st != "aborted"))
      out.push_back({run_stop->file_line, "run_stop", "status should be \"success\" or \"aborted\""});
    else if (st == "success" && !target_line)
      out.push_back({run_stop->file_line, "run_stop", "status success, but no eval_accuracy reaches the targets"});
  }
  return out;
}

// ================================================================================================

CheckReport check_records(const std::vector<RawRecord>& records, const ReadStats& stats,
                          const std::string& name, const CheckOptions& opt) {
  CheckReport rep;
  rep.file = name;
  if (opt.ruleset != "3.1.0") {
    rep.readable = false;
    rep.errors.push_back({0, "", "ruleset " + opt.ruleset + " is not implemented (3.1.0 is; use it)"});
    return rep;
  }
  if (records.empty() && stats.nul_bytes > 0) {
    rep.readable = false;
    rep.errors.push_back({0, "", "binary file (NUL bytes, no :::MLLOG lines): not an MLPerf log"});
    return rep;
  }
  std::vector<LogLine> lines;
  std::vector<CheckMessage> line_errors;
  for (const RawRecord& r : records) {
    ++rep.mllog_lines;
    if (r.too_long) {
      line_errors.push_back({r.file_line, "", ":::MLLOG record longer than " +
                                                  std::to_string(opt.max_record_bytes >> 20) +
                                                  " MiB; not read"});
      continue;
    }
    std::string_view t = r.text;
    while (!t.empty() && py_space(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
    if (t.empty()) {
      line_errors.push_back({r.file_line, "", "nothing after ':::MLLOG '"});
      continue;
    }
    Json m;
    try {
      m = py_json_loads(t);
    } catch (const PyJsonError& e) {
      line_errors.push_back({r.file_line, "", std::string("invalid JSON after ':::MLLOG ': ") + e.what() +
                                                  " (column " + std::to_string(e.offset + 10) + ")"});
      continue;
    }
    if (!m.is_object()) {
      line_errors.push_back({r.file_line, "", "the record is a JSON " + py_type(m) + ", not an object"});
      continue;
    }
    std::string missing;
    for (const char* f : {"time_ms", "key", "value", "metadata"})
      if (!m.contains(f)) missing += (missing.empty() ? "" : ", ") + std::string(f);
    if (!missing.empty()) {
      line_errors.push_back({r.file_line, m.value("key", Json("")).is_string() ? m.value("key", "") : "",
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
      line_errors.push_back({r.file_line, m["key"].is_string() ? m["key"].get<std::string>() : "",
                             "time_ms " + short_json(tm) + " is not a number"});
      continue;
    }
    lines.push_back({r.file_line, std::string(t), *ts, m["key"], m["value"], m["metadata"]});
  }

  Engine engine(lines, opt);
  engine.run();
  rep.errors = line_errors;
  const auto errs = engine.errors();
  rep.errors.insert(rep.errors.end(), errs.begin(), errs.end());
  rep.warnings = engine.warnings();
  for (auto& a : advisories(lines)) (opt.strict ? rep.errors : rep.warnings).push_back(std::move(a));
  for (const LogLine& l : lines) {
    if (l.key_str() == "submission_division" && l.value.is_string() && rep.division.empty())
      rep.division = l.value.get<std::string>();
    if (l.key_str() == "submission_benchmark" && l.value.is_string() && rep.benchmark.empty())
      rep.benchmark = l.value.get<std::string>();
  }
  rep.passed = rep.errors.empty();
  return rep;
}

}  // namespace

CheckReport check_log_text(std::string_view text, const std::string& name, const CheckOptions& options) {
  RecordReader reader(options.max_record_bytes);
  std::vector<RawRecord> records;
  ReadStats stats;
  reader.feed(text, records, stats);
  reader.finish(records, stats);
  return check_records(records, stats, name, options);
}

CheckReport check_log_file(const std::string& path, const CheckOptions& options) {
  auto unreadable = [&](const std::string& why) {
    CheckReport rep;
    rep.file = path;
    rep.readable = false;
    rep.errors.push_back({0, "", why});
    return rep;
  };
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) return unreadable("cannot read: no such file");
  if (std::filesystem::is_directory(st)) return unreadable("cannot read: is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return unreadable(std::string("cannot open: ") + std::strerror(errno));
  RecordReader reader(options.max_record_bytes);
  std::vector<RawRecord> records;
  ReadStats stats;
  std::vector<char> buf(size_t{1} << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = static_cast<size_t>(in.gcount());
    if (got == 0) break;
    reader.feed(std::string_view(buf.data(), got), records, stats);
  }
  if (in.bad()) return unreadable(std::string("read error: ") + std::strerror(errno));
  reader.finish(records, stats);
  return check_records(records, stats, path, options);
}

std::string format_report(const CheckReport& r, bool show_warnings) {
  std::ostringstream o;
  o << r.file << ": ";
  if (!r.readable)
    o << "UNREADABLE";
  else
    o << (r.passed ? "PASSED" : "FAILED");
  o << " (ruleset 3.1.0";
  if (!r.division.empty()) o << ", " << r.division;
  if (!r.benchmark.empty()) o << " " << r.benchmark;
  o << "; " << r.mllog_lines << " :::MLLOG lines; " << r.errors.size() << " error"
    << (r.errors.size() == 1 ? "" : "s") << ", " << r.warnings.size() << " warning"
    << (r.warnings.size() == 1 ? "" : "s") << ")\n";
  auto put = [&](const CheckMessage& m, const char* level) {
    o << "  " << level << " ";
    if (m.line > 0) o << "line " << m.line << ": ";
    if (!m.key.empty()) o << m.key << ": ";
    o << m.text << "\n";
  };
  for (const auto& m : r.errors) put(m, "error:");
  if (show_warnings)
    for (const auto& m : r.warnings) put(m, "warning:");
  return o.str();
}

}  // namespace mrcnn::logging
