// The ground-truth reader of coco.h: load_dataset / parse_dataset, element by element through
// the pull cursor (the elements both COCO readers share are coco_json.h's).
#include <string>
#include <vector>

#include "eval/coco.h"
#include "eval/coco_json.h"
#include "eval/json_cursor.h"

namespace mrcnn::eval {

namespace {

using detail::read_bbox;
using detail::read_dim;
using detail::read_segmentation;
using detail::with_coco_errors;

// ---- the ground truth's elements ----------------------------------------------------------------

bool read_flag(JsonCursor& c) {
  if (c.peek() == JsonCursor::Kind::kTrue || c.peek() == JsonCursor::Kind::kFalse) {
    return c.boolean();
  }
  const int64_t v = c.int64();
  if (v != 0 && v != 1) c.fail_value("expected 0 or 1, found " + std::to_string(v));
  return v == 1;
}

void read_images(JsonCursor& c, std::vector<Image>& images, std::string& scratch) {
  c.begin_array();
  while (c.next_element()) {
    Image& im = images.emplace_back();
    c.begin_object();
    std::string_view key;
    bool id = false, w = false, h = false;
    while (c.next_key(key)) {
      if (key == "id") {
        im.id = c.uint64();
        id = true;
      } else if (key == "width") {
        im.width = static_cast<int>(read_dim(c));
        if (im.width == 0) c.fail_value("expected a positive image width");
        w = true;
      } else if (key == "height") {
        im.height = static_cast<int>(read_dim(c));
        if (im.height == 0) c.fail_value("expected a positive image height");
        h = true;
      } else if (key == "file_name") {
        im.file_name = c.string(scratch);
      } else {
        c.skip();
      }
    }
    if (!id || !w || !h) {
      c.fail_value(std::string("image is missing its ") + (!id ? "\"id\"" : !w ? "\"width\"" : "\"height\""));
    }
  }
}

void read_categories(JsonCursor& c, std::vector<Category>& cats, std::string& scratch) {
  c.begin_array();
  while (c.next_element()) {
    Category& cat = cats.emplace_back();
    c.begin_object();
    std::string_view key;
    bool id = false;
    while (c.next_key(key)) {
      if (key == "id") {
        cat.id = c.uint64();
        id = true;
      } else if (key == "name") {
        cat.name = c.string(scratch);
      } else if (key == "supercategory") {
        cat.supercategory = c.string(scratch);
      } else {
        c.skip();
      }
    }
    if (!id) c.fail_value("category is missing its \"id\"");
  }
}

void read_annotations(JsonCursor& c, std::vector<Annotation>& anns, bool& has_keypoints, std::string& scratch) {
  c.begin_array();
  while (c.next_element()) {
    Annotation& a = anns.emplace_back();
    c.begin_object();
    std::string_view key;
    bool id = false, img = false, cat = false, bbox = false, area = false, caption = false;
    while (c.next_key(key)) {
      if (key == "id") {
        a.id = c.uint64();
        id = true;
      } else if (key == "image_id") {
        a.image_id = c.uint64();
        img = true;
      } else if (key == "category_id") {
        a.category_id = c.uint64();
        cat = true;
      } else if (key == "bbox") {
        read_bbox(c, a.bbox, bbox);
        if (!bbox) c.fail_value("expected a bbox of 4 numbers [x, y, width, height]");
      } else if (key == "area") {
        a.area = c.number();
        area = true;
      } else if (key == "iscrowd") {
        a.iscrowd = read_flag(c);
      } else if (key == "segmentation") {
        read_segmentation(c, a.segmentation, scratch);
      } else {
        has_keypoints |= key == "keypoints";
        caption |= key == "caption";
        c.skip();
      }
    }
    if (caption && !cat) c.fail_value("a captions annotation (it has a \"caption\" and no \"category_id\"); expected an instances file");
    if (!id || !img || !cat || !bbox || !area) {
      const char* missing = !id ? "\"id\"" : !img ? "\"image_id\"" : !cat ? "\"category_id\"" : !bbox ? "\"bbox\"" : "\"area\"";
      c.fail_value(std::string("annotation is missing its ") + missing);
    }
  }
}

}  // namespace

Dataset parse_dataset(std::string_view json, const std::string& source) {
  return with_coco_errors([&]() {
    Dataset ds;
    ds.source = source;
    JsonCursor c(json, source);
    std::string scratch;
    if (!c.next_is(JsonCursor::Kind::kObject)) c.fail("a COCO dataset object {\"images\": ...}");
    c.begin_object();
    std::string_view key;
    bool have_images = false;
    while (c.next_key(key)) {
      if (key == "images") {
        read_images(c, ds.images, scratch);
        have_images = true;
      } else if (key == "categories") {
        read_categories(c, ds.categories, scratch);
      } else if (key == "annotations") {
        read_annotations(c, ds.annotations, ds.has_keypoints, scratch);
      } else if (key == "info" && c.next_is(JsonCursor::Kind::kObject)) {
        c.begin_object();
        std::string_view info_key;
        while (c.next_key(info_key)) {
          if (info_key == "year" && c.next_is(JsonCursor::Kind::kNumber))
            ds.info_year = static_cast<int64_t>(c.number());
          else
            c.skip();
        }
      } else {
        c.skip();
      }
    }
    c.expect_end();
    if (!have_images) throw CocoError(source + ": the dataset has no \"images\" array");
    try {
      ds.build_index();
    } catch (const CocoError& e) {
      throw CocoError(source + ": " + e.what());
    }
    return ds;
  });
}

Dataset load_dataset(const std::string& path) {
  const auto file = detail::map_json_file(path);
  return parse_dataset(file->bytes(), path);
}

}  // namespace mrcnn::eval
