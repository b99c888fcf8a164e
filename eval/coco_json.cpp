#include "eval/coco_json.h"

#include <limits>
#include <vector>

namespace mrcnn::eval::detail {

std::shared_ptr<const MappedFile> map_json_file(const std::string& path) {
  try {
    return std::make_shared<const MappedFile>(path);
  } catch (const FileError& e) {
    throw CocoError(e.what());
  }
}

void read_bbox(JsonCursor& c, std::array<double, 4>& bb, bool& present) {
  c.begin_array();
  size_t n = 0;
  while (c.next_element()) {
    if (n == 4) c.fail("']' after the 4 numbers of a bbox [x, y, width, height]");
    bb[n++] = c.number();
    if (n >= 3 && bb[n - 1] < 0) {
      c.fail_value("a bbox width or height must not be negative, found " +
                   std::to_string(bb[n - 1]));
    }
  }
  if (n != 0 && n != 4) c.fail_value("expected a bbox of 4 numbers [x, y, width, height]");
  present = n == 4;
}

uint32_t read_dim(JsonCursor& c) {
  const uint64_t v = c.uint64();
  if (v > std::numeric_limits<int32_t>::max()) c.fail_value("size out of range (at most 2^31-1)");
  return static_cast<uint32_t>(v);
}

void read_segmentation(JsonCursor& c, Segmentation& s, std::string& scratch) {
  switch (c.peek()) {
    case JsonCursor::Kind::kNull:
      c.null();
      s.kind = Segmentation::Kind::kNone;
      return;
    case JsonCursor::Kind::kArray: {
      s.kind = Segmentation::Kind::kPolygons;
      c.begin_array();
      while (c.next_element()) {
        std::vector<double>& poly = s.polygons.emplace_back();
        if (c.peek() != JsonCursor::Kind::kArray) {
          c.fail("a polygon (an array of x, y numbers)");
        }
        c.begin_array();
        while (c.next_element()) poly.push_back(c.number());
        if (poly.size() % 2 != 0) {
          c.fail_value("a polygon needs an even number of coordinates (x, y pairs), found " +
                       std::to_string(poly.size()));
        }
      }
      return;
    }
    case JsonCursor::Kind::kObject: {
      c.begin_object();
      std::string_view key;
      bool have_size = false, have_counts = false;
      while (c.next_key(key)) {
        if (key == "size") {
          c.begin_array();
          size_t n = 0;
          uint32_t dims[2] = {0, 0};
          while (c.next_element()) {
            if (n == 2) c.fail("']' after the 2 numbers of an RLE size [height, width]");
            dims[n++] = read_dim(c);
          }
          if (n != 2) c.fail_value("expected an RLE size of 2 integers [height, width]");
          s.height = dims[0];
          s.width = dims[1];
          have_size = true;
        } else if (key == "counts") {
          if (c.peek() == JsonCursor::Kind::kString) {
            s.kind = Segmentation::Kind::kCompressedRle;
            s.compressed = c.string(scratch);
          } else if (c.peek() == JsonCursor::Kind::kArray) {
            s.kind = Segmentation::Kind::kRle;
            c.begin_array();
            while (c.next_element()) {
              const uint64_t v = c.uint64();
              if (v > 0xFFFFFFFFull) c.fail_value("RLE count out of range (at most 2^32-1)");
              s.counts.push_back(static_cast<uint32_t>(v));
            }
          } else {
            c.fail("RLE counts (a string or an array of integers)");
          }
          have_counts = true;
        } else {
          c.skip();
        }
      }
      if (!have_size || !have_counts) {
        c.fail_value(std::string("an RLE segmentation needs both \"size\" and \"counts\", ") +
                     (have_size ? "\"counts\"" : "\"size\"") + " is missing");
      }
      return;
    }
    default:
      c.fail("a segmentation (polygons, an RLE object or null)");
  }
}

}  // namespace mrcnn::eval::detail
