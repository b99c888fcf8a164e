#include "model/flop_count.h"

#include <ATen/core/ivalue.h>
#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace mrcnn::model {

namespace {

using Clock = std::chrono::steady_clock;

struct Label {
  const char* stage = "other";
  const char* phase = nullptr;  // nullptr: outside a phase (not attributed)
  bool counted = false;         // inside a scope counted as a whole: the operators in it are not
};

// Per thread: the scopes it is inside and when its attributed time was last charged.
struct ThreadStack {
  std::vector<Label> labels;
  Clock::time_point last{};
};
thread_local ThreadStack t_stack;

const char* stage_of_scope(const char* name) {
  for (const auto& [scope, stage] : kStageScopes)
    if (std::strcmp(name, scope) == 0) return stage;
  return nullptr;
}

const char* phase_of_scope(const char* name) {
  for (const auto& [scope, phase] : kPhaseScopes)
    if (std::strcmp(name, scope) == 0) return phase;
  return nullptr;
}

std::vector<int64_t> sizes_of(const c10::IValue& v) {
  if (!v.isTensor()) return {};
  const at::Tensor& t = v.toTensor();
  if (!t.defined()) return {};
  return t.sizes().vec();
}

std::array<int64_t, 2> pair_of(const c10::IValue& v, int64_t fallback) {
  std::array<int64_t, 2> out{fallback, fallback};
  if (!v.isIntList()) return out;
  const auto list = v.toIntVector();
  if (list.size() == 1) out = {list[0], list[0]};
  if (list.size() >= 2) out = {list[0], list[1]};
  return out;
}

double product(const std::vector<int64_t>& v, size_t from = 0) {
  double p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= static_cast<double>(v[i]);
  return p;
}

// 2 * N * prod(weight) * prod(spatial size the kernel slides over).
double conv_flops(const OpShape& s, const std::vector<int64_t>& out_spatial) {
  if (s.input.size() < 3 || s.weight.size() < 3) return 0;
  const double over = s.transposed ? product(s.input, 2) : product(out_spatial);
  return 2.0 * static_cast<double>(s.input[0]) * product(s.weight) * over;
}

// One gradient (input or weight) of a convolution whose output gradient is `grad_output`: the
// forward's count, over the output gradient's spatial size.
double conv_gradient_flops(const OpShape& s, const c10::IValue& grad_output) {
  const std::vector<int64_t> grad_out = sizes_of(grad_output);
  const std::vector<int64_t> out_spatial(grad_out.size() > 2 ? grad_out.begin() + 2 : grad_out.end(),
                                         grad_out.end());
  return conv_flops(s, out_spatial);
}

std::vector<int64_t> conv_output_spatial(const OpShape& s) {
  std::vector<int64_t> out;
  for (size_t d = 2; d < s.input.size() && d < s.weight.size(); ++d) {
    const size_t i = std::min<size_t>(d - 2, 1);
    out.push_back((s.input[d] + 2 * s.padding[i] - s.dilation[i] * (s.weight[d] - 1) - 1) / s.stride[i] + 1);
  }
  return out;
}

// aten::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
// aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
//                            transposed, output_padding, groups, output_mask)
OpShape conv_shape(c10::ArrayRef<const c10::IValue> in, size_t offset) {
  OpShape s;
  s.kind = OpShape::Kind::kConvolution;
  s.input = sizes_of(in[offset]);
  s.weight = sizes_of(in[offset + 1]);
  s.stride = pair_of(in[offset + 3], 1);
  s.padding = pair_of(in[offset + 4], 0);
  s.dilation = pair_of(in[offset + 5], 1);
  s.transposed = in[offset + 6].isBool() && in[offset + 6].toBool();
  s.groups = in[offset + 8].isInt() ? in[offset + 8].toInt() : 1;
  if (in[offset].isTensor() && in[offset].toTensor().defined() && in[offset].toTensor().dim() == 4)
    s.channels_last = in[offset].toTensor().is_contiguous(at::MemoryFormat::ChannelsLast) &&
                      !in[offset].toTensor().is_contiguous();
  return s;
}

OpShape matmul_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  OpShape s;
  s.kind = OpShape::Kind::kMatmul;
  if (a.size() == 2 && b.size() == 2) {
    s.input = {1, a[0], a[1]};
    s.weight = {1, b[0], b[1]};
  } else if (a.size() == 3 && b.size() == 3) {
    s.input = a;
    s.weight = b;
  }
  return s;
}

double matmul_flops(const OpShape& s) {
  if (s.input.size() != 3 || s.weight.size() != 3) return 0;
  return 2.0 * static_cast<double>(s.input[0]) * static_cast<double>(s.input[1]) *
         static_cast<double>(s.input[2]) * static_cast<double>(s.weight[2]);
}

std::string shape_key(const OpShape& s) {
  std::ostringstream k;
  k << static_cast<int>(s.kind) << '|';
  for (int64_t v : s.input) k << v << ',';
  k << '|';
  for (int64_t v : s.weight) k << v << ',';
  k << '|' << s.stride[0] << ',' << s.stride[1] << ',' << s.padding[0] << ',' << s.padding[1] << ','
    << s.dilation[0] << ',' << s.dilation[1] << ',' << s.groups << ',' << s.transposed << ','
    << s.channels_last;
  return k.str();
}

// Whether the end callback has a label to pop.
struct Pushed : public at::ObserverContext {};

}  // namespace

std::string OpShape::describe() const {
  std::ostringstream o;
  if (kind == Kind::kMatmul) {
    if (input.size() == 3 && weight.size() == 3) {
      o << (input[0] > 1 ? "bmm " : "mm ");
      if (input[0] > 1) o << input[0] << "x";
      o << input[1] << "x" << input[2] << "x" << weight[2] << " (MxKxN)";
    }
    return o.str();
  }
  if (weight.size() == 4 && input.size() == 4) {
    o << (transposed ? "deconv " : "conv ") << weight[2] << "x" << weight[3] << "/" << stride[0] << " ["
      << input[0] << "," << input[1] << "," << input[2] << "," << input[3] << "] -> "
      << (transposed ? weight[1] * groups : weight[0]);
    if (groups != 1) o << " groups " << groups;
    o << (channels_last ? " (channels-last)" : " (NCHW)");
  }
  return o.str();
}

struct FlopCounter::State {
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, FlopCell> cells;
  std::map<std::string, OpShape> shapes;
  // Which stage made autograd node n: the last forward operator whose sequence number is n (the
  // operator that made the node, or the composite around it). A custom autograd function's node
  // is numbered before its forward runs, by no operator: its stage is that of the first operator
  // that sees n + 1 as the next number (the first one inside its forward).
  std::map<int64_t, const char*> made_by;
  std::map<int64_t, const char*> first_seeing;

  void charge_time(ThreadStack& t, Clock::time_point now) {
    if (!t.labels.empty() && t.labels.back().phase != nullptr) {
      const Label& l = t.labels.back();
      std::lock_guard<std::mutex> lock(mu);
      cells[{l.stage, l.phase}].seconds += std::chrono::duration<double>(now - t.last).count();
    }
    t.last = now;
  }

  void add_flops(const Label* l, double flops, const OpShape* shape) {
    std::lock_guard<std::mutex> lock(mu);
    FlopCell& c = cells[{l ? l->stage : "other", (l && l->phase) ? l->phase : "outside"}];
    c.flops += flops;
    ++c.ops;
    if (shape) {
      OpShape& s = shapes[shape_key(*shape)];
      if (s.calls == 0) {
        s = *shape;
        s.stage = l ? l->stage : "other";
      }
      ++s.calls;
      s.flops += flops;
    }
  }

  const char* stage_of_node(int64_t seq, bool custom_function) {
    std::lock_guard<std::mutex> lock(mu);
    if (!custom_function) {
      const auto it = made_by.find(seq);
      if (it != made_by.end()) return it->second;
    }
    const auto it = first_seeing.find(seq + 1);
    return it == first_seeing.end() ? "other" : it->second;
  }
};

namespace {

std::atomic<FlopCounter::State*> g_state{nullptr};

bool in_forward(const Label* l) { return l && l->phase && std::strcmp(l->phase, "forward") == 0; }

void count_op(FlopCounter::State& st, const at::RecordFunction& fn, const Label* label) {
  const char* name = fn.name();
  if (std::strncmp(name, "aten::", 6) != 0) return;
  const char* op = name + 6;
  const auto in = fn.inputs();
  if (std::strcmp(op, "convolution") == 0 && in.size() >= 9) {
    const OpShape s = conv_shape(in, 0);
    st.add_flops(label, conv_flops(s, conv_output_spatial(s)), in_forward(label) ? &s : nullptr);
  } else if (std::strcmp(op, "convolution_backward") == 0 && in.size() >= 11) {
    const OpShape s = conv_shape(in, 1);
    const double one = conv_gradient_flops(s, in[0]);
    std::vector<bool> mask{true, true, false};
    if (in[10].isBoolList()) {
      const auto l = in[10].toBoolList();
      for (size_t i = 0; i < std::min<size_t>(3, l.size()); ++i) mask[i] = l.get(i);
    }
    st.add_flops(label, (mask[0] ? one : 0.0) + (mask[1] ? one : 0.0), nullptr);
  } else if ((std::strcmp(op, "mm") == 0 || std::strcmp(op, "bmm") == 0) && in.size() >= 2) {
    const OpShape s = matmul_shape(sizes_of(in[0]), sizes_of(in[1]));
    st.add_flops(label, matmul_flops(s), in_forward(label) ? &s : nullptr);
  } else if ((std::strcmp(op, "addmm") == 0 || std::strcmp(op, "baddbmm") == 0) && in.size() >= 3) {
    const OpShape s = matmul_shape(sizes_of(in[1]), sizes_of(in[2]));
    st.add_flops(label, matmul_flops(s), in_forward(label) ? &s : nullptr);
  }
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  FlopCounter::State* st = g_state.load();
  if (!st) return nullptr;
  ThreadStack& t = t_stack;
  const Label* top = t.labels.empty() ? nullptr : &t.labels.back();
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    const auto now = Clock::now();
    st->charge_time(t, now);
    Label l;
    l.phase = top && top->phase ? top->phase : "backward";
    l.stage = fn.seqNr() >= 0 ? st->stage_of_node(fn.seqNr(), std::strstr(fn.name(), "CppNode<") != nullptr)
                              : "other";
    t.labels.push_back(l);
    return std::make_unique<Pushed>();
  }
  const char* name = fn.name();
  if (top && top->counted) return nullptr;
  if (std::strcmp(name, kConvWeightGradScope) == 0) {
    // A convolution's weight gradient computed by the network itself, inputs (grad_output,
    // input, weight): the forward's count, as convolution_backward's weight gradient.
    const auto in = fn.inputs();
    if (in.size() >= 3) {
      OpShape s;
      s.input = sizes_of(in[1]);
      s.weight = sizes_of(in[2]);
      st->add_flops(top, conv_gradient_flops(s, in[0]), nullptr);
    }
    st->charge_time(t, Clock::now());
    Label l = top ? *top : Label{};
    l.counted = true;
    t.labels.push_back(l);
    return std::make_unique<Pushed>();
  }
  if (std::strncmp(name, "mrcnn::", 7) == 0) {
    const char* phase = phase_of_scope(name);
    const char* stage = phase ? nullptr : stage_of_scope(name);
    if (phase || stage) {
      st->charge_time(t, Clock::now());
      Label l = top ? *top : Label{};
      if (phase) {
        l.phase = phase;
        l.stage = "other";
      } else {
        l.stage = stage;
      }
      t.labels.push_back(l);
      return std::make_unique<Pushed>();
    }
  }
  if (in_forward(top)) {
    const int64_t next = static_cast<int64_t>(at::sequence_number::peek());
    std::lock_guard<std::mutex> lock(st->mu);
    if (fn.seqNr() >= 0) st->made_by[fn.seqNr()] = top->stage;
    st->first_seeing.emplace(next, top->stage);
  }
  count_op(*st, fn, top);
  return nullptr;
}

void on_end(const at::RecordFunction& /*fn*/, at::ObserverContext* ctx) {
  FlopCounter::State* st = g_state.load();
  if (!st || !ctx) return;
  ThreadStack& t = t_stack;
  st->charge_time(t, Clock::now());
  if (!t.labels.empty()) t.labels.pop_back();
}

}  // namespace

FlopCounter::FlopCounter() : state_(std::make_unique<State>()) {}

FlopCounter::~FlopCounter() {
  if (active_) stop();
}

void FlopCounter::start() {
  State* expected = nullptr;
  if (!g_state.compare_exchange_strong(expected, state_.get()))
    throw std::logic_error("FlopCounter: another counter is active");
  t_stack = ThreadStack{};
  t_stack.last = Clock::now();
  at::RecordFunctionCallback cb(&on_start, &on_end);
  cb.needsInputs(true).scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                               at::RecordScope::USER_SCOPE});
  handle_ = at::addGlobalCallback(cb);
  active_ = true;
}

void FlopCounter::stop() {
  if (!active_) return;
  at::removeCallback(handle_);
  g_state.store(nullptr);
  t_stack = ThreadStack{};
  active_ = false;
}

std::map<std::pair<std::string, std::string>, FlopCell> FlopCounter::cells() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->cells;
}

double FlopCounter::total_flops() const {
  double total = 0;
  for (const auto& [key, cell] : cells()) total += cell.flops;
  return total;
}

std::vector<OpShape> FlopCounter::shapes() const {
  std::vector<OpShape> out;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    for (const auto& [key, s] : state_->shapes) out.push_back(s);
  }
  std::stable_sort(out.begin(), out.end(), [](const OpShape& a, const OpShape& b) { return a.flops > b.flops; });
  return out;
}

}  // namespace mrcnn::model
