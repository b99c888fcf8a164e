#include "benchmark/analysis/system_description.h"

#include <cctype>
#include <filesystem>
#include <regex>
#include <sstream>

#include "logging/json_file.h"

namespace mrcnn::analysis {

namespace fs = std::filesystem;
using logging::Json;

namespace {

// A count as MLPerf writes it ("8", or 8): a whole number >= 0; empty when it is not one.
std::optional<int64_t> count_of(const Json& object, const char* key) {
  if (!object.contains(key)) return std::nullopt;
  const Json& v = object[key];
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<int64_t>();
  if (!v.is_string()) return std::nullopt;
  const std::string text = v.get<std::string>();
  if (text.empty() || text.size() > 9 || !std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); }))
    return std::nullopt;
  return std::stoll(text);
}

std::string text_of(const Json& object, const char* key) {
  return object.contains(key) && object[key].is_string() ? object[key].get<std::string>() : "";
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

SystemDescription describe(const Json& object, const std::string& path) {
  SystemDescription d;
  d.path = path;
  if (!object.is_object()) {
    d.problem = path + ": the system description is not a JSON object";
    return d;
  }
  d.json = object;
  const auto nodes = count_of(object, "number_of_nodes");
  const auto per_node = count_of(object, "accelerators_per_node");
  if (!nodes || *nodes < 1) {
    d.problem = path + ": number_of_nodes is " + (object.contains("number_of_nodes") ? object["number_of_nodes"].dump() : "missing") +
                ", not a node count >= 1";
    return d;
  }
  if (!per_node) {
    d.problem = path + ": accelerators_per_node is " +
                (object.contains("accelerators_per_node") ? object["accelerators_per_node"].dump() : "missing") +
                ", not a count >= 0";
    return d;
  }
  d.nodes = *nodes;
  d.accelerators_per_node = *per_node;
  d.accelerator_model = text_of(object, "accelerator_model_name");
  d.host_processor_model = text_of(object, "host_processor_model_name");
  d.framework = text_of(object, "framework");
  d.submitter = text_of(object, "submitter");
  d.host_networking = text_of(object, "host_networking");
  if (d.accelerators_per_node > 0 && (d.accelerator_model.empty() || lower(d.accelerator_model) == "n/a"))
    d.problem = path + ": " + std::to_string(d.accelerators_per_node) + " accelerators per node of no accelerator_model_name";
  return d;
}

SystemDescription read_description(const std::vector<DescriptionCandidate>& candidates) {
  std::string looked;
  for (const DescriptionCandidate& c : candidates) {
    std::error_code ec;
    if (!fs::exists(c.path, ec)) {
      looked += (looked.empty() ? "" : ", ") + c.path;
      continue;
    }
    SystemDescription d;
    d.path = c.path;
    if (fs::is_directory(c.path, ec)) {
      d.problem = c.path + ": a folder where the system description should be";
      return d;
    }
    Json j;
    try {
      j = logging::read_json_file(c.path);
    } catch (const logging::JsonFileError& e) {
      d.problem = c.path + ": not readable as JSON (" + std::string(e.what()).substr(c.path.size() + 2) + ")";
      return d;
    }
    if (c.section) {
      if (!j.is_object() || !j.contains("system")) {
        d.problem = c.path + ": no \"system\" section";
        return d;
      }
      j = j["system"];
    }
    return describe(j, c.path);
  }
  SystemDescription d;
  d.problem = "no system description (looked for " + (looked.empty() ? std::string("none") : looked) + ")";
  return d;
}

NodeNetwork parse_host_networking(const std::string& text) {
  // Links are separated by commas or semicolons; a label ("Compute:") applies to its own link.
  static const std::regex kRate(R"((?:(\d+)\s*[xX]\s*)?[^,;]*?(\d+(?:\.\d+)?)\s*(G|T)(?:igabit|erabit|bits?|bps|b))",
                                std::regex::icase);
  struct Link {
    std::string label;
    double gbps = 0;
    std::string as_read;
  };
  std::vector<Link> links;
  std::string part;
  std::stringstream in(text);
  while (std::getline(in, part, ',')) {
    std::stringstream sub(part);
    std::string piece;
    while (std::getline(sub, piece, ';')) {
      Link l;
      const auto colon = piece.find(':');
      if (colon != std::string::npos) l.label = lower(piece.substr(0, colon));
      std::smatch m;
      std::string body = colon == std::string::npos ? piece : piece.substr(colon + 1);
      body.erase(0, body.find_first_not_of(" \t"));  // the count, when there is one, leads
      if (!std::regex_search(body, m, kRate)) continue;
      const double count = m[1].matched ? std::stod(m[1].str()) : 1.0;
      const double rate = std::stod(m[2].str()) * (std::toupper(static_cast<unsigned char>(m[3].str()[0])) == 'T' ? 1000 : 1);
      l.gbps = count * rate;
      char b[96];
      std::snprintf(b, sizeof b, "%g x %g Gb/s", count, rate);
      l.as_read = b;
      links.push_back(l);
    }
  }
  const bool labelled = std::any_of(links.begin(), links.end(), [](const Link& l) { return l.label.find("compute") != std::string::npos; });
  NodeNetwork n;
  for (const Link& l : links) {
    const bool use = labelled ? l.label.find("compute") != std::string::npos
                              : l.label.find("storage") == std::string::npos && l.label.find("management") == std::string::npos;
    if (!use) continue;
    n.gbps = n.gbps.value_or(0) + l.gbps;
    n.basis += (n.basis.empty() ? "" : " + ") + l.as_read;
  }
  return n;
}

}  // namespace mrcnn::analysis
