// The compliance check's engine: the official checker's passes over the rule files
// (mlp_compliance.ComplianceChecker.configured_checks), the advisories, the report and its text.
// The log is read by log_reader.h; the rules are compliance_rules.h's.
#include "logging/compliance.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "logging/compliance_rules.h"
#include "logging/log_reader.h"
#include "logging/py_semantics.h"

namespace mrcnn::logging {
namespace {

using detail::Check;
using detail::Ctx;
using detail::is_num;
using detail::is_other_official_file;
using detail::KeyRule;
using detail::LogLine;
using detail::py_eq;
using detail::PyException;
using detail::RawLog;
using detail::rule_file;
using detail::RuleFile;
using detail::RuleState;
using detail::short_json;

class Engine {
 public:
  Engine(const std::vector<LogLine>& lines, const CheckOptions& opt, std::string ruleset)
      : lines_(lines), opt_(opt), ruleset_(std::move(ruleset)) {}

  void run() {
    if (lines_.empty()) put({0, "", "no :::MLLOG lines found"});
    queue_.push_back("training_" + ruleset_ + "/common.yaml");
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

  // One pass over the log for one rule file, with the official per-file state.
  struct FilePass {
    RuleState s;  // the defaults are what common.yaml's BEGIN block sets; other files use no field
                  // of `s` before setting it, except global_batch_size (optional, KeyError if unset)
    std::map<std::string, const KeyRule*> rules;
    std::map<std::string, std::vector<const LogLine*>> reported;
    std::map<std::string, int> at_least_one;
    std::set<std::string> has_been_exec;
  };

  void run_file(const RuleFile& f) {
    FilePass pass;
    if (f.begin) f.begin(pass.s);
    for (const auto& r : f.keys) {
      pass.rules[r.name] = &r;
      keyed_.erase(r.name);  // overwrite_messages: this file's rules replace earlier verdicts
    }
    for (const auto& r : f.keys) pass.reported[r.name];
    for (const LogLine& ll : lines_) check_line(ll, pass);
    for (const auto& [key, count] : pass.at_least_one)
      if (count == 0)
        put({0, key, "no line passes: " + pass.rules[key]->at_least_one_check->text});
    check_occurrences(f, pass.reported);
    if (f.end) check_end(*f.end, pass.s);
  }

  // The file's END block, after every line and the occurrence checks; its failure is not
  // overwritable (the official checker reports it without a key).
  void check_end(const detail::EndCheck& end, const RuleState& s) {
    try {
      if (!end.fn(s)) put({0, "", "END CHECK failed: " + end.text + " (" + end.detail(s) + ")"});
    } catch (const PyException& e) {
      put({0, "", "END CHECK cannot be evaluated (" + e.what + "): " + end.text});
    }
  }

  // A line under the file's rule for its key: the CHECKs and the POST code (first occurrence of
  // a submission_ key only), then the AT_LEAST_ONE check.
  void check_line(const LogLine& ll, FilePass& pass) {
    if (!ll.key.is_string()) return;
    const std::string key = ll.key.get<std::string>();
    auto it = pass.rules.find(key);
    if (it == pass.rules.end()) return;
    const KeyRule& rule = *it->second;
    pass.reported[key].push_back(&ll);
    Ctx ctx{pass.s, ll, queue_};
    if (!pass.has_been_exec.contains(key)) {
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
      pass.at_least_one.try_emplace(key, 0);
      try {
        if (rule.at_least_one_check->fn(ctx)) ++pass.at_least_one[key];
      } catch (const PyException& e) {
        // The official checker evaluates this outside any try block: it crashes here.
        put({ll.file_line, key, "value cannot be checked against the target (" + e.what +
                                    "; the official checker crashes on this line)  [value " +
                                    short_json(ll.value) + "]"});
      }
    }
    if (key.find("submission_") != std::string::npos) pass.has_been_exec.insert(key);
  }

  // The requirements on how often each key occurs: EXACTLY_ONE, AT_LEAST_ONE, AT_LEAST_ONE_OR.
  void check_occurrences(const RuleFile& f, std::map<std::string, std::vector<const LogLine*>>& reported) {
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
  std::string ruleset_;
  std::deque<std::string> queue_;                             // rule files still to run
  std::vector<CheckMessage> fixed_;                            // not overwritable
  std::map<std::string, std::vector<CheckMessage>> keyed_;     // overwritable, by key
  std::vector<CheckMessage> warnings_;
};

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
  // Blocks count epochs too: a log of blocks only (Google's TPU logs number them from 0 and their
  // evaluations from 1) has finished epoch e once its stopped blocks hold e epochs.
  std::map<int64_t, int64_t> open_blocks;  // first_epoch_num -> epoch_count
  int64_t block_epochs = 0;
  const auto finished = [&](int64_t e) { return stopped_epochs.contains(e) || e <= block_epochs; };
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
    if (k == "block_start") open_blocks[meta_int(l, "first_epoch_num").value_or(-1)] = meta_int(l, "epoch_count").value_or(1);
    if (k == "block_stop") {
      const auto it = open_blocks.find(meta_int(l, "first_epoch_num").value_or(-1));
      // Counts beyond any real run are cut, so that no log's numbers overflow the sum.
      if (it != open_blocks.end()) block_epochs += std::clamp<int64_t>(it->second, 0, 1 << 20), open_blocks.erase(it);
    }
    if (k == "eval_start") {
      const auto e = meta_int(l, "epoch_num");
      if (e && !finished(*e))
        out.push_back({l.file_line, k, "evaluates epoch " + std::to_string(*e) + ", which has not finished"});
    }
    if (k == "eval_accuracy") {
      const auto e = meta_int(l, "epoch_num");
      if (e && !finished(*e))
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

// The ruleset a log is checked against and how it was chosen: the one given, else the round its
// path names, else the default; false when the one given is not implemented.
bool choose_ruleset(const std::string& name, const CheckOptions& opt, CheckReport& rep) {
  if (!opt.ruleset.empty()) {
    rep.ruleset = opt.ruleset, rep.ruleset_source = "given";
    if (is_ruleset(opt.ruleset)) return true;
    rep.readable = false;
    std::string list;
    for (const std::string& r : rulesets()) list += (list.empty() ? "" : ", ") + r;
    rep.errors.push_back({0, "", "ruleset " + opt.ruleset + " is not implemented (Mask R-CNN's rulesets: " + list + ")"});
    return false;
  }
  rep.ruleset = ruleset_from_path(name), rep.ruleset_source = "path";
  if (rep.ruleset.empty()) rep.ruleset = kDefaultRuleset, rep.ruleset_source = "default";
  return true;
}

CheckReport check_records(const RawLog& log, const std::string& name, const CheckOptions& opt) {
  CheckReport rep;
  rep.file = name;
  if (!choose_ruleset(name, opt, rep)) return rep;
  if (log.records.empty() && log.stats.nul_bytes > 0) {
    rep.readable = false;
    rep.errors.push_back({0, "", "binary file (NUL bytes, no :::MLLOG lines): not an MLPerf log"});
    return rep;
  }
  rep.mllog_lines = static_cast<int64_t>(log.records.size());
  const detail::ParsedLog parsed = detail::parse_records(log.records, opt.max_record_bytes);
  const std::vector<LogLine>& lines = parsed.lines;

  Engine engine(lines, opt, rep.ruleset);
  engine.run();
  rep.errors = parsed.errors;
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

const std::vector<std::string>& rulesets() { return detail::carried_rulesets(); }

bool is_ruleset(std::string_view ruleset) {
  return std::find(rulesets().begin(), rulesets().end(), ruleset) != rulesets().end();
}

std::string ruleset_from_path(std::string_view path) {
  // Folder names split at '/' (and '\\'); the deepest that names a round wins.
  std::string found;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find_first_of("/\\", start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(start, end - start);
    // ..._vX.Y, ...-vX.Y or vX.Y (one digit each, as the rounds are named).
    if (part.size() >= 4) {
      const std::string_view tail = part.substr(part.size() - 4);
      const bool shaped = tail[0] == 'v' && std::isdigit(static_cast<unsigned char>(tail[1])) && tail[2] == '.' &&
                          std::isdigit(static_cast<unsigned char>(tail[3]));
      const bool bounded = part.size() == 4 || part[part.size() - 5] == '_' || part[part.size() - 5] == '-';
      if (shaped && bounded) {
        const std::string r = std::string(1, tail[1]) + "." + tail[3] + ".0";
        if (is_ruleset(r)) found = r;
      }
    }
    start = end + 1;
  }
  return found;
}

CheckReport check_log_text(std::string_view text, const std::string& name, const CheckOptions& options) {
  return check_records(detail::read_log_text(text, options.max_record_bytes), name, options);
}

CheckReport check_log_file(const std::string& path, const CheckOptions& options) {
  RawLog log;
  try {
    log = detail::read_log_file(path, options.max_record_bytes);
  } catch (const detail::LogReadError& e) {
    CheckReport rep;
    rep.file = path;
    rep.readable = false;
    rep.errors.push_back({0, "", e.what()});
    return rep;
  }
  return check_records(log, path, options);
}

std::string format_report(const CheckReport& r, bool show_warnings) {
  std::ostringstream o;
  o << r.file << ": ";
  if (!r.readable)
    o << "UNREADABLE";
  else
    o << (r.passed ? "PASSED" : "FAILED");
  o << " (ruleset " << r.ruleset;
  if (r.ruleset_source == "path") o << " from the path";
  if (r.ruleset_source == "default") o << " by default";
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
