// eval_rle_probe CASES.json OUT.json: runs the RLE codec on the cases that test_rle_parity.py
// generates and writes the answers, which that script compares with pycocotools' mask API.
//   encode:   {"h", "w", "mask": [row-major 0/1 ...]}         -> compressed string
//   polygons: {"h", "w", "polys": [[x0, y0, ...], ...]}        -> compressed string of the union
//   boxes:    {"h", "w", "box": [x, y, w, h]}                  -> compressed string
//   pairs:    {"h", "w", "a": string, "b": string}             -> union, intersection, areas,
//                                                                 boxes, IoU (crowd 0 / 1),
//                                                                 row-major decode of a
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "eval/rle.h"

using nlohmann::json;
using namespace mrcnn::eval;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: eval_rle_probe CASES.json OUT.json\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  const json cases = json::parse(in);
  json out;
  for (const json& c : cases.at("encode")) {
    const uint32_t h = c.at("h"), w = c.at("w");
    const std::vector<uint8_t> m = c.at("mask").get<std::vector<uint8_t>>();
    out["encode"].push_back(to_string(encode_row_major(m.data(), h, w)));
  }
  for (const json& c : cases.at("polygons")) {
    const uint32_t h = c.at("h"), w = c.at("w");
    const auto polys = c.at("polys").get<std::vector<std::vector<double>>>();
    json item;
    item["union"] = to_string(from_polygons(polys, h, w));
    for (const auto& p : polys) item["each"].push_back(to_string(from_polygon(p.data(), p.size() / 2, h, w)));
    out["polygons"].push_back(item);
  }
  for (const json& c : cases.at("boxes")) {
    const uint32_t h = c.at("h"), w = c.at("w");
    out["boxes"].push_back(to_string(from_box(c.at("box").get<std::array<double, 4>>(), h, w)));
  }
  for (const json& c : cases.at("pairs")) {
    const uint32_t h = c.at("h"), w = c.at("w");
    const Rle a = from_string(c.at("a").get<std::string>(), h, w);
    const Rle b = from_string(c.at("b").get<std::string>(), h, w);
    json item;
    item["union"] = to_string(merge(a, b, false));
    item["intersection"] = to_string(merge(a, b, true));
    item["area_a"] = area(a);
    item["bbox_a"] = to_bbox(a);
    item["iou"] = iou(a, b, false);
    item["iou_crowd"] = iou(a, b, true);
    std::vector<uint8_t> dec(static_cast<size_t>(h) * w);
    decode_row_major(a, dec.data());
    item["decode_a"] = dec;
    out["pairs"].push_back(item);
  }
  std::ofstream(argv[2]) << out.dump();
  return 0;
}
