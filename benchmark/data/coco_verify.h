// `mlperf-maskrcnn data verify DIR`: whether a COCO-format folder is what a 20-minute run needs,
// checked before the run instead of failing inside it.
//
// For each split (train2017 and val2017 by default): the annotation file is present, parses, is
// an instances file of the year its name says (not person-keypoints or captions, not 2014 under
// a 2017 name); every image is present, decodes to the end (a truncated JPEG is an error, as in
// training) and has the size its record says; the images the reference trains on (at least one
// usable annotation) are counted. Against the COCO 2017 release: the file's size and SHA-256, the
// image and annotation counts, the 80 category ids. A mismatch with the release is a note, or,
// with `release` set (a closed-division submitter's check), an error.
//
// Problems are gathered by class (missing images, undecodable images, size mismatches, ...),
// each class one error naming its first files and its count, so one run shows everything wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mrcnn::data {

struct VerifyOptions {
  std::string root;
  std::vector<std::string> splits{"train2017", "val2017"};
  int threads = 1;       // image checks in parallel
  bool release = false;  // differences from the COCO 2017 release are errors
  bool progress = true;  // a progress line on stderr while images are checked
};

struct SplitReport {
  std::string split;
  std::string annotation_file;
  uint64_t bytes = 0;
  std::string sha256;
  bool release_file = false;  // size and SHA-256 equal the release's
  int64_t images = 0;
  int64_t annotations = 0;
  int64_t crowd = 0;
  int64_t categories = 0;
  int64_t images_for_training = 0;  // the reference's remove_images_without_annotations
  int64_t images_checked = 0;
  double seconds = 0;
};

struct VerifyReport {
  std::vector<SplitReport> splits;
  std::vector<std::string> errors;  // one a problem class; empty: the folder is usable
  std::vector<std::string> notes;   // what differs from the release without being an error
  bool ok() const { return errors.empty(); }
  std::string text() const;         // the report, for the console
};

// Never throws for a problem of the folder (those are report errors); throws only for bad
// options.
VerifyReport verify_coco(const VerifyOptions& options);

}  // namespace mrcnn::data
