// Reference kernels for rnn, gru and lstm: the ONNX equations, one batch row and one time
// step at a time, in double.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/kernel_util.h"
#include "compiler/interp/reduce_internal.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

using Vec = std::vector<double>;

struct Activation {
  std::string name;  // lower case, as the converter writes it
  double alpha = 0, beta = 0;
};

absl::StatusOr<double> Activate(const ir::ExprNode& call, const Activation& a, double x) {
  const std::string& n = a.name;
  if (n == "sigmoid") return 1 / (1 + std::exp(-x));
  if (n == "tanh") return std::tanh(x);
  if (n == "relu") return std::max(0.0, x);
  if (n == "affine") return a.alpha * x + a.beta;
  if (n == "leakyrelu") return x >= 0 ? x : a.alpha * x;
  if (n == "thresholdedrelu") return x > a.alpha ? x : 0;
  if (n == "scaledtanh") return a.alpha * std::tanh(a.beta * x);
  if (n == "hardsigmoid") return std::clamp(a.alpha * x + a.beta, 0.0, 1.0);
  if (n == "elu") return x >= 0 ? x : a.alpha * (std::exp(x) - 1);
  if (n == "softsign") return x / (1 + std::abs(x));
  if (n == "softplus") return std::log1p(std::exp(x));
  return KernelError(call, absl::StrCat("unknown activation '", n, "'"));
}

// Everything one direction of one batch row needs, read out of the operands.
struct Cell {
  const ir::ExprNode* call;
  int64_t gates, hidden, input;
  Vec w, r, wb, rb, p;  // this direction's slices; biases and peepholes zero when omitted
  std::vector<Activation> acts;
  std::optional<double> clip;
  bool linear_before_reset = false, input_forget = false;

  // Gate g's W x + Wb and R h + Rb, row by row.
  Vec InputPart(int64_t g, const Vec& x) const { return Affine(w, wb, g, x, input); }
  Vec HiddenPart(int64_t g, const Vec& h) const { return Affine(r, rb, g, h, hidden); }
  Vec Affine(const Vec& m, const Vec& b, int64_t g, const Vec& v, int64_t cols) const {
    Vec out(hidden);
    for (int64_t j = 0; j < hidden; ++j) {
      int64_t row = g * hidden + j;
      double s = b[row];
      for (int64_t k = 0; k < cols; ++k) s += m[row * cols + k] * v[k];
      out[j] = s;
    }
    return out;
  }
  // Activation `i` of this direction applied to (clipped) pre-activations.
  absl::StatusOr<Vec> Apply(int i, const Vec& pre) const {
    Vec out(pre.size());
    for (size_t j = 0; j < pre.size(); ++j) {
      double x = clip ? std::clamp(pre[j], -*clip, *clip) : pre[j];
      KILN_ASSIGN_OR_RETURN(out[j], Activate(*call, acts[i], x));
    }
    return out;
  }
};

Vec Add(Vec a, const Vec& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}
Vec Mul(Vec a, const Vec& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] *= b[i];
  return a;
}

// One step; `state` is (h) or (h, c) and is updated in place.
absl::Status Step(const std::string& op, const Cell& c, const Vec& x, std::vector<Vec>& state) {
  Vec& h = state[0];
  if (op == "rnn") {
    KILN_ASSIGN_OR_RETURN(h, c.Apply(0, Add(c.InputPart(0, x), c.HiddenPart(0, h))));
    return absl::OkStatus();
  }
  if (op == "gru") {  // gates z, r, h
    KILN_ASSIGN_OR_RETURN(Vec z, c.Apply(0, Add(c.InputPart(0, x), c.HiddenPart(0, h))));
    KILN_ASSIGN_OR_RETURN(Vec r, c.Apply(0, Add(c.InputPart(1, x), c.HiddenPart(1, h))));
    Vec recur = c.linear_before_reset ? Mul(r, c.HiddenPart(2, h)) : c.HiddenPart(2, Mul(r, h));
    KILN_ASSIGN_OR_RETURN(Vec cand, c.Apply(1, Add(c.InputPart(2, x), recur)));
    for (int64_t j = 0; j < c.hidden; ++j) h[j] = (1 - z[j]) * cand[j] + z[j] * h[j];
    return absl::OkStatus();
  }
  // lstm: gates i, o, f, c; peepholes i, o, f.
  Vec& cell = state[1];
  auto peep = [&](int64_t k, const Vec& cv) {
    Vec out(c.hidden);
    for (int64_t j = 0; j < c.hidden; ++j) out[j] = c.p[k * c.hidden + j] * cv[j];
    return out;
  };
  auto pre = [&](int64_t g) { return Add(c.InputPart(g, x), c.HiddenPart(g, h)); };
  KILN_ASSIGN_OR_RETURN(Vec i, c.Apply(0, Add(pre(0), peep(0, cell))));
  KILN_ASSIGN_OR_RETURN(Vec f, c.Apply(0, Add(pre(2), peep(2, cell))));
  if (c.input_forget) {  // coupled input and forget gates
    for (int64_t j = 0; j < c.hidden; ++j) f[j] = 1 - i[j];
  }
  KILN_ASSIGN_OR_RETURN(Vec g, c.Apply(1, pre(3)));
  for (int64_t j = 0; j < c.hidden; ++j) cell[j] = f[j] * cell[j] + i[j] * g[j];
  KILN_ASSIGN_OR_RETURN(Vec o, c.Apply(0, Add(pre(1), peep(1, cell))));
  KILN_ASSIGN_OR_RETURN(Vec hc, c.Apply(2, cell));
  h = Mul(o, hc);
  return absl::OkStatus();
}

// Elements [offset, offset + n) of a tensor operand as doubles, or zeros when omitted.
Vec Slice(const NDArray* a, int64_t offset, int64_t n) {
  Vec out(n, 0.0);
  if (!a) return out;
  for (int64_t i = 0; i < n; ++i) out[i] = a->GetDouble(offset + i);
  return out;
}
Vec Slice(const Value& v, int64_t offset, int64_t n) {
  return Slice(v.is_tensor() ? &v.tensor() : nullptr, offset, n);
}

// Reads direction `dir`'s weights, biases, peepholes and activations.
Cell MakeCell(const ir::ExprNode& call, const std::vector<Value>& args, int64_t gates, int64_t dir,
              int64_t input) {
  Cell c;
  c.call = &call;
  c.gates = gates;
  c.hidden = op::GetIntAttr(call.attrs, "hidden_size", 0);
  c.input = input;
  int64_t rows = gates * c.hidden;
  c.w = Slice(args[1], dir * rows * input, rows * input);
  c.r = Slice(args[2], dir * rows * c.hidden, rows * c.hidden);
  c.wb = Slice(args[3], dir * 2 * rows, rows);
  c.rb = Slice(args[3], dir * 2 * rows + rows, rows);
  if (args.size() == 8) c.p = Slice(args[7], dir * 3 * c.hidden, 3 * c.hidden);
  std::vector<std::string> names = op::GetStringsAttr(call.attrs, "activations");
  std::vector<double> alpha = op::GetFloatsAttr(call.attrs, "activation_alpha");
  std::vector<double> beta = op::GetFloatsAttr(call.attrs, "activation_beta");
  int per_dir = gates == 4 ? 3 : gates == 3 ? 2 : 1;
  for (int k = 0; k < per_dir; ++k) {
    size_t at = dir * per_dir + k;
    c.acts.push_back({at < names.size() ? names[at] : "", at < alpha.size() ? alpha[at] : 0.0,
                      at < beta.size() ? beta[at] : 0.0});
  }
  if (op::HasAttr(call.attrs, "clip")) c.clip = op::GetFloatAttr(call.attrs, "clip", 0);
  c.linear_before_reset = op::GetIntAttr(call.attrs, "linear_before_reset", 0) != 0;
  c.input_forget = op::GetIntAttr(call.attrs, "input_forget", 0) != 0;
  return c;
}

// Operand sizes, checked here because shapes unknown at import were not checked there.
absl::Status CheckSizes(const ir::ExprNode& call, const std::vector<Value>& args, int64_t dirs,
                        int64_t rows, int64_t input, int64_t hidden, int64_t batch) {
  const char* names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  int64_t expected[] = {0,     dirs * rows * input,   dirs * rows * hidden,  dirs * 2 * rows,
                        batch, dirs * batch * hidden, dirs * batch * hidden, dirs * 3 * hidden};
  for (size_t i = 1; i < args.size(); ++i) {
    if (!args[i].is_tensor()) {
      if (i < 3) return KernelError(call, absl::StrCat(names[i], " must be a tensor"));
      continue;
    }
    int64_t n = args[i].tensor().num_elements();
    if (n != expected[i]) {
      return KernelError(call,
                         absl::StrCat(names[i], " has ", n, " elements, expected ", expected[i]));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> Recurrent(const std::string& op, int64_t gates, const ir::ExprNode& call,
                                const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  if (x->shape.size() != 3) return KernelError(call, "X must be 3-D");
  bool batch_first = op::GetIntAttr(call.attrs, "layout", 0) != 0;
  int64_t seq = x->shape[batch_first ? 1 : 0], batch = x->shape[batch_first ? 0 : 1];
  int64_t input = x->shape[2], hidden = op::GetIntAttr(call.attrs, "hidden_size", 0);
  std::string direction = op::GetStringAttr(call.attrs, "direction", "forward");
  int64_t dirs = direction == "bidirectional" ? 2 : 1;
  int num_states = op == "lstm" ? 2 : 1;
  KILN_RETURN_IF_ERROR(CheckSizes(call, args, dirs, gates * hidden, input, hidden, batch));
  // Offsets of Y's and the final states' rows in either layout.
  auto y_at = [&](int64_t t, int64_t d, int64_t b) {
    return batch_first ? ((b * seq + t) * dirs + d) * hidden
                       : ((t * dirs + d) * batch + b) * hidden;
  };
  auto state_at = [&](int64_t d, int64_t b) {
    return batch_first ? (b * dirs + d) * hidden : (d * batch + b) * hidden;
  };
  Shape y_shape = batch_first ? Shape{batch, seq, dirs, hidden} : Shape{seq, dirs, batch, hidden};
  Shape s_shape = batch_first ? Shape{batch, dirs, hidden} : Shape{dirs, batch, hidden};
  NDArray y = NDArray::Zeros(x->dtype, y_shape);
  std::vector<NDArray> finals(num_states, NDArray::Zeros(x->dtype, s_shape));
  for (int64_t d = 0; d < dirs; ++d) {
    Cell cell = MakeCell(call, args, gates, d, input);
    bool reverse = direction == "reverse" || d == 1;
    for (int64_t b = 0; b < batch; ++b) {
      int64_t len = args[4].is_tensor() ? args[4].tensor().GetInt(b) : seq;
      if (len < 0 || len > seq) {
        return KernelError(call, absl::StrCat("sequence length ", len, " out of range"));
      }
      std::vector<Vec> state;
      for (int s = 0; s < num_states; ++s) {
        state.push_back(Slice(args[5 + s], state_at(d, b), hidden));
      }
      for (int64_t step = 0; step < len; ++step) {
        int64_t t = reverse ? len - 1 - step : step;
        int64_t x_at = (batch_first ? b * seq + t : t * batch + b) * input;
        KILN_RETURN_IF_ERROR(Step(op, cell, Slice(x, x_at, input), state));
        for (int64_t j = 0; j < hidden; ++j) y.SetDouble(y_at(t, d, b) + j, state[0][j]);
      }
      for (int s = 0; s < num_states; ++s) {
        for (int64_t j = 0; j < hidden; ++j) finals[s].SetDouble(state_at(d, b) + j, state[s][j]);
      }
    }
  }
  std::vector<Value> fields = {Value(std::move(y))};
  for (NDArray& f : finals) fields.push_back(Value(std::move(f)));
  return Value::Tuple(std::move(fields));
}

}  // namespace

void RegisterRecurrentKernels(KernelTable& table) {
  for (auto [name, gates] : {std::pair<const char*, int64_t>{"rnn", 1}, {"gru", 3}, {"lstm", 4}}) {
    table[name] = [name = std::string(name), gates = gates](const ir::ExprNode& call,
                                                            const std::vector<Value>& args) {
      return Recurrent(name, gates, call, args);
    };
  }
}

}  // namespace kiln::interp
