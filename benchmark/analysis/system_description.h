// A system description as `report` and `forecast` read it: the MLPerf system JSON (a submission's
// systems/<name>.json, the `system` section of a kept run's config.json or of the project's
// systems/<name>.json), checked before any figure is drawn from it.
//
// A description that is missing, not JSON, or without a readable node and accelerator count is
// not guessed at: `problem` names the file and what is wrong, and every figure that needs the
// counts (per-accelerator rates, accelerator-hours, cost, scaling, a forecast) is unknown.
// MLPerf writes the counts as strings ("8"); numbers are accepted too.
//
// The network between nodes is free text in a description (`host_networking`, e.g. "Storage: 2x
// ConnectX-6 IB HDR 200Gb/sec, Management: 1x ..., Compute: 8x ConnectX-6 IB HDR 200Gb/Sec"):
// parse_host_networking reads the compute links' line rate per node from it, where it can.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "logging/py_json.h"

namespace mrcnn::analysis {

struct SystemDescription {
  std::string path;     // the file it was read from ("" when none was found)
  std::string problem;  // "" when readable; else what is wrong, naming the file
  logging::Json json;   // the description's object (null when none)
  int64_t nodes = 0;
  int64_t accelerators_per_node = 0;  // 0: a system without accelerators (host processors only)
  std::string accelerator_model, host_processor_model, framework, submitter, host_networking;
  bool ok() const { return problem.empty(); }
};

// The description `object`, read from `path`: its counts checked as above.
SystemDescription describe(const logging::Json& object, const std::string& path);

// The first of `candidates` that exists: a file that does not parse, or whose object lacks the
// counts, is the problem (the later candidates are not read past a broken one). `section`: the
// candidate is a project system file (the description is its "system" object). None exists:
// the problem names them all.
struct DescriptionCandidate {
  std::string path;
  bool section = false;
};
SystemDescription read_description(const std::vector<DescriptionCandidate>& candidates);

// The compute network of a node from `host_networking`: the sum of "N x ... R Gb/s" links (R in
// Gb/s, Gbit/s or Tb/s; a single link without "N x" counts once), over the links labelled
// "Compute:" when any is, else over all but those labelled storage or management. Empty when no
// rate can be read (also "N/A").
struct NodeNetwork {
  std::optional<double> gbps;  // Gbit/s per node
  std::string basis;           // the links summed, as read ("8 x 200 Gb/s")
};
NodeNetwork parse_host_networking(const std::string& text);

}  // namespace mrcnn::analysis
