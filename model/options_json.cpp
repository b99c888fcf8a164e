#include "model/options_json.h"

#include <nlohmann/json.hpp>

#include <limits>
#include <set>
#include <stdexcept>
#include <type_traits>

namespace mrcnn::model {
namespace {

using nlohmann::json;

// ---- the field lists, shared by the reader and the writer ------------------------------------

template <class V>
void fields(V& v, BackboneOptions& o) {
  v("depth", o.depth);
  v("base_channels", o.base_channels);
  v("norm", o.norm);
  v("group_norm_groups", o.group_norm_groups);
  v("freeze_at", o.freeze_at);
  v("stride_in_1x1", o.stride_in_1x1);
  v("fused_conv_relu", o.fused_conv_relu);
}

template <class V>
void fields(V& v, FPNOptions& o) {
  v("out_channels", o.out_channels);
}

template <class V>
void fields(V& v, RPNOptions& o) {
  v("anchor_sizes", o.anchor_sizes);
  v("aspect_ratios", o.aspect_ratios);
  v("anchor_strides", o.anchor_strides);
  v("fg_iou_threshold", o.fg_iou_threshold);
  v("bg_iou_threshold", o.bg_iou_threshold);
  v("batch_size_per_image", o.batch_size_per_image);
  v("positive_fraction", o.positive_fraction);
  v("box_loss_beta", o.box_loss_beta);
  v("straddle_threshold", o.straddle_threshold);
  v("proposals_inside_image", o.proposals_inside_image);
  v("pre_nms_top_n_train", o.pre_nms_top_n_train);
  v("pre_nms_top_n_test", o.pre_nms_top_n_test);
  v("post_nms_top_n_train", o.post_nms_top_n_train);
  v("post_nms_top_n_test", o.post_nms_top_n_test);
  v("post_nms_per_batch_train", o.post_nms_per_batch_train);
  v("nms_threshold", o.nms_threshold);
  v("min_size", o.min_size);
}

template <class V>
void fields(V& v, BoxHeadOptions& o) {
  v("pooler_resolution", o.pooler_resolution);
  v("sampling_ratio", o.sampling_ratio);
  v("aligned", o.aligned);
  v("representation_size", o.representation_size);
  v("fg_iou_threshold", o.fg_iou_threshold);
  v("bg_iou_threshold", o.bg_iou_threshold);
  v("batch_size_per_image", o.batch_size_per_image);
  v("positive_fraction", o.positive_fraction);
  v("box_coder_weights", o.box_coder_weights);
  v("box_loss_beta", o.box_loss_beta);
  v("score_threshold", o.score_threshold);
  v("nms_threshold", o.nms_threshold);
  v("detections_per_image", o.detections_per_image);
  v("min_size", o.min_size);
}

template <class V>
void fields(V& v, MaskHeadOptions& o) {
  v("pooler_resolution", o.pooler_resolution);
  v("sampling_ratio", o.sampling_ratio);
  v("aligned", o.aligned);
  v("conv_channels", o.conv_channels);
  v("num_convs", o.num_convs);
  v("mask_threshold", o.mask_threshold);
  v("roi_bucket", o.roi_bucket);
}

template <class V>
void fields(V& v, ModelOptions& o) {
  v("num_classes", o.num_classes);
  v("backbone", o.backbone);
  v("fpn", o.fpn);
  v("rpn", o.rpn);
  v("box_head", o.box_head);
  v("mask_head", o.mask_head);
  v("sampling_streams", o.sampling_streams);
  v("mask_padding", o.mask_padding);
  v("channels_last", o.channels_last);
  v("cpu_own_weight_grad", o.cpu_own_weight_grad);
  v("precision", o.precision);
  v("cuda_graph_shapes", o.cuda_graph_shapes);
  v("head_streams", o.head_streams);
}

template <class T>
concept Struct = std::is_same_v<T, ModelOptions> || std::is_same_v<T, BackboneOptions> || std::is_same_v<T, FPNOptions> ||
                 std::is_same_v<T, RPNOptions> || std::is_same_v<T, BoxHeadOptions> ||
                 std::is_same_v<T, MaskHeadOptions>;

// ---- reading ---------------------------------------------------------------------------------

[[noreturn]] void bad(const std::string& path, const std::string& expected, const json& got) {
  throw std::invalid_argument(path + ": expected " + expected + ", got " + got.dump());
}

class Reader {
 public:
  Reader(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) bad(path_, "an object", j_);
  }

  template <class T>
  void operator()(const char* name, T& field) {
    known_.insert(name);
    const auto it = j_.find(name);
    if (it != j_.end()) read(*it, path_ + "." + name, field);
  }

  void finish() const {
    for (const auto& [key, value] : j_.items()) {
      if (known_.count(key)) continue;
      std::string allowed;
      for (const std::string& k : known_) allowed += (allowed.empty() ? "" : ", ") + k;
      throw std::invalid_argument(path_ + "." + key + ": unknown key (known: " + allowed + ")");
    }
  }

 private:
  static void read(const json& v, const std::string& path, int& out) {
    if (!v.is_number_integer() || v.get<int64_t>() < std::numeric_limits<int>::min() ||
        v.get<int64_t>() > std::numeric_limits<int>::max())
      bad(path, "an integer", v);
    out = v.get<int>();
  }
  static void read(const json& v, const std::string& path, int64_t& out) {
    if (!v.is_number_integer()) bad(path, "an integer", v);
    out = v.get<int64_t>();
  }
  static void read(const json& v, const std::string& path, double& out) {
    if (!v.is_number()) bad(path, "a number", v);
    out = v.get<double>();
  }
  static void read(const json& v, const std::string& path, bool& out) {
    if (!v.is_boolean()) bad(path, "true or false", v);
    out = v.get<bool>();
  }
  template <class T>
  static void read(const json& v, const std::string& path, std::vector<T>& out) {
    if (!v.is_array()) bad(path, "an array", v);
    out.assign(v.size(), T{});
    for (size_t i = 0; i < v.size(); ++i) read(v[i], path + "[" + std::to_string(i) + "]", out[i]);
  }
  static void read(const json& v, const std::string& path, std::array<double, 4>& out) {
    if (!v.is_array() || v.size() != 4) bad(path, "an array of 4 numbers", v);
    for (size_t i = 0; i < 4; ++i) read(v[i], path + "[" + std::to_string(i) + "]", out[i]);
  }
  static void read(const json& v, const std::string& path, NormKind& out) {
    if (!v.is_string()) bad(path, "\"frozen_bn\" or \"group_norm\"", v);
    try {
      out = parse_norm_kind(v.get<std::string>());
    } catch (const std::invalid_argument&) {
      bad(path, "\"frozen_bn\" or \"group_norm\"", v);
    }
  }
  static void read(const json& v, const std::string& path, SamplingStreams& out) {
    if (!v.is_string()) bad(path, "\"per_image\" or \"shared\"", v);
    try {
      out = parse_sampling_streams(v.get<std::string>());
    } catch (const std::invalid_argument&) {
      bad(path, "\"per_image\" or \"shared\"", v);
    }
  }
  static void read(const json& v, const std::string& path, Precision& out) {
    if (!v.is_string()) bad(path, "\"fp32\", \"bf16\" or \"fp16\"", v);
    try {
      out = parse_precision(v.get<std::string>());
    } catch (const std::invalid_argument&) {
      bad(path, "\"fp32\", \"bf16\" or \"fp16\"", v);
    }
  }
  template <class T>
    requires Struct<T>
  static void read(const json& v, const std::string& path, T& out) {
    Reader sub(v, path);
    fields(sub, out);
    sub.finish();
  }

  const json& j_;
  std::string path_;
  std::set<std::string> known_;
};

// ---- writing ---------------------------------------------------------------------------------

class Writer {
 public:
  template <class T>
  void operator()(const char* name, T& field) {
    out[name] = write(field);
  }
  json out = json::object();

 private:
  template <class T>
    requires(!Struct<T>)
  static json write(const T& v) {
    return json(v);
  }
  static json write(const NormKind& v) { return to_string(v); }
  static json write(const SamplingStreams& v) { return to_string(v); }
  static json write(const Precision& v) { return to_string(v); }
  template <class T>
    requires Struct<T>
  static json write(const T& v) {
    T copy = v;
    Writer sub;
    fields(sub, copy);
    return sub.out;
  }
};

}  // namespace

ModelOptions model_options_from_json(const json& j, const ModelOptions& base,
                                     const std::string& path) {
  ModelOptions out = base;
  Reader reader(j, path);
  fields(reader, out);
  reader.finish();
  try {
    out.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
  return out;
}

json to_json(const ModelOptions& options) {
  ModelOptions copy = options;
  Writer writer;
  fields(writer, copy);
  return writer.out;
}

}  // namespace mrcnn::model
