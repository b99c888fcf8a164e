// The layout of a COCO-format folder, known in this one place:
//
//   ROOT/annotations/instances_<split>.json   the annotations of a split (train2017, val2017, ...)
//   ROOT/<split>/                             its images, named by the annotations' file_name
//   ROOT/annotations/instances_<split>.mrcnn-index  the prepared training index (coco_index.h)
#pragma once

#include <filesystem>
#include <string>

namespace mrcnn::data {

struct CocoLayout {
  std::filesystem::path root;

  std::filesystem::path annotation_file(const std::string& split) const {
    return root / "annotations" / ("instances_" + split + ".json");
  }
  std::filesystem::path index_file(const std::string& split) const {
    return root / "annotations" / ("instances_" + split + ".mrcnn-index");
  }
  std::filesystem::path image_dir(const std::string& split) const { return root / split; }
};

}  // namespace mrcnn::data
