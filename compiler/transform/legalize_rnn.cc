// Recurrent networks (rnn, gru, lstm) as interp/reduce_rnn.cc defines them: for each direction
// and batch row, a loop over the time steps; each step computes every gate's W x + Wb and
// R h + Rb into scratch rows, then the cell equations element by element. Results are
// (Y, Y_h) and for lstm (Y, Y_h, Y_c); Y is zero past a row's sequence length.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_kernels.h"
#include "compiler/transform/legalize_tensor_util.h"

namespace kiln::transform {
namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

PrimExpr I(int64_t v) { return arith::IntImm(v); }

struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

absl::StatusOr<PrimExpr> Activate(const ir::ExprNode& call, const Activation& a, PrimExpr x) {
  DataType t = x->dtype;
  auto c = [&](double v) { return arith::FloatImm(v, t); };
  auto math = [&](const char* fn, PrimExpr v) { return arith::Call(t, fn, {v}); };
  auto ge0 = arith::Binary(ExprKind::kGE, x, c(0));
  const std::string& n = a.name;
  if (n == "sigmoid") return math("sigmoid", x);
  if (n == "tanh") return math("tanh", x);
  if (n == "relu") return arith::Max(x, c(0));
  if (n == "affine") return c(a.alpha) * x + c(a.beta);
  if (n == "leakyrelu") return arith::Select(ge0, x, c(a.alpha) * x);
  if (n == "thresholdedrelu") {
    return arith::Select(arith::Binary(ExprKind::kGT, x, c(a.alpha)), x, c(0));
  }
  if (n == "scaledtanh") return c(a.alpha) * math("tanh", c(a.beta) * x);
  if (n == "hardsigmoid") return arith::Min(arith::Max(c(a.alpha) * x + c(a.beta), c(0)), c(1));
  if (n == "elu") return arith::Select(ge0, x, c(a.alpha) * (math("exp", x) - c(1)));
  if (n == "softsign") return arith::Binary(ExprKind::kDiv, x, c(1) + math("fabs", x));
  if (n == "softplus") return math("log", c(1) + math("exp", x));
  return absl::InvalidArgumentError(
      absl::StrCat("op ", call.name, ": unknown activation '", n, "'"));
}

// A row of `n` values of type t, local to the kernel.
struct Scratch {
  Scratch(const std::string& name, DataType t, int64_t n)
      : buf(arith::MakeBuffer(name, t, {I(n)})) {}
  PrimExpr operator[](PrimExpr i) const { return arith::Load(buf, {i}); }
  Stmt Set(PrimExpr i, PrimExpr v) const { return ir::Store(buf, {i}, v); }
  Buffer buf;
};

Stmt Loop(const std::string& name, PrimExpr extent, const std::function<Stmt(PrimExpr)>& body) {
  PrimExpr v = arith::MakeVar(name);
  return ir::For(v, I(0), extent, ir::ForKind::kSerial, body(v));
}

class Recurrent {
 public:
  Recurrent(const KernelContext& k, int64_t gates)
      : k_(k),
        op_(k.call.name),
        gates_(gates),
        hidden_(op::GetIntAttr(k.call.attrs, "hidden_size", 0)),
        batch_first_(op::GetIntAttr(k.call.attrs, "layout", 0) != 0),
        t_(k.inputs[0]->dtype.bits == 16 ? DataType::Float(32) : k.inputs[0]->dtype),
        x_(k.inputs[0]),
        w_(OperandBuffer(k, 1)),
        r_(OperandBuffer(k, 2)),
        b_(OperandBuffer(k, 3)),
        lens_(OperandBuffer(k, 4)),
        init_{OperandBuffer(k, 5), OperandBuffer(k, 6)},
        p_(OperandBuffer(k, 7)),
        h_("h", t_, hidden_),
        c_("c", t_, hidden_),
        xp_("x_part", t_, gates * hidden_),
        hp_("h_part", t_, gates * hidden_),
        tmp_("r_gate", t_, hidden_) {
    if (op_ != "lstm") init_[1] = nullptr;
  }

  absl::StatusOr<Stmt> Build() {
    size_t states = op_ == "lstm" ? 2 : 1;
    if (k_.outs.size() != states + 1 || !w_ || !r_ || hidden_ <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "op ", op_, ": needs X, W, R, a positive hidden_size and ", states + 1, " results"));
    }
    std::string direction = op::GetStringAttr(k_.call.attrs, "direction", "forward");
    int64_t dirs = direction == "bidirectional" ? 2 : 1;
    seq_ = x_->shape[batch_first_ ? 1 : 0];
    std::vector<Stmt> body = {Compute(k_.outs[0], [&](const Indices&) { return Zero(t_); })};
    for (int64_t d = 0; d < dirs; ++d) {
      KILN_RETURN_IF_ERROR(ReadActivations(d));
      bool reverse = direction == "reverse" || d == 1;
      KILN_ASSIGN_OR_RETURN(Stmt dir, Direction(d, reverse));
      body.push_back(dir);
    }
    return ir::Seq(body);
  }

 private:
  absl::Status ReadActivations(int64_t d) {
    std::vector<std::string> names = op::GetStringsAttr(k_.call.attrs, "activations");
    std::vector<double> alpha = op::GetFloatsAttr(k_.call.attrs, "activation_alpha");
    std::vector<double> beta = op::GetFloatsAttr(k_.call.attrs, "activation_beta");
    size_t per_dir = gates_ == 4 ? 3 : gates_ == 3 ? 2 : 1;
    acts_.clear();
    for (size_t i = 0; i < per_dir; ++i) {
      size_t at = d * per_dir + i;
      if (at >= names.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("op ", op_, ": activation ", at, " is not given"));
      }
      acts_.push_back(
          {names[at], at < alpha.size() ? alpha[at] : 0.0, at < beta.size() ? beta[at] : 0.0});
    }
    return absl::OkStatus();
  }

  PrimExpr Read(const Buffer& b, Indices at) const {
    PrimExpr v = arith::Load(b, std::move(at));
    return v->dtype == t_ ? v : arith::Cast(t_, v);
  }
  Indices StateAt(int64_t d, PrimExpr b, PrimExpr j) const {
    return batch_first_ ? Indices{b, I(d), j} : Indices{I(d), b, j};
  }

  // Activation i of this direction on a (clipped) pre-activation.
  absl::StatusOr<PrimExpr> Apply(size_t i, PrimExpr pre) const {
    if (op::HasAttr(k_.call.attrs, "clip")) {
      double clip = op::GetFloatAttr(k_.call.attrs, "clip", 0);
      pre = arith::Min(arith::Max(pre, arith::FloatImm(-clip, t_)), arith::FloatImm(clip, t_));
    }
    return Activate(k_.call, acts_[i], pre);
  }

  // row := bias[row] + sum_k m[d, row, k] * v(k), for every row of every gate.
  Stmt Affine(const Scratch& out, const Buffer& m, int64_t d, int64_t bias_offset, PrimExpr cols,
              const std::function<PrimExpr(PrimExpr)>& v, int64_t first_row, int64_t rows) const {
    return Loop("row", I(rows), [&](PrimExpr r) {
      PrimExpr row = r + I(first_row);
      PrimExpr bias = b_ ? Read(b_, {I(d), row + I(bias_offset)}) : Zero(t_);
      return ir::Seq({out.Set(row, bias), Loop("k", cols, [&](PrimExpr c) {
                        return out.Set(row, out[row] + Read(m, {I(d), row, c}) * v(c));
                      })});
    });
  }

  absl::StatusOr<Stmt> Direction(int64_t d, bool reverse) {
    const std::vector<PrimExpr>& xs = x_->shape;
    PrimExpr batch = xs[batch_first_ ? 0 : 1];
    int64_t rows = gates_ * hidden_;
    return Loop("b", batch, [&](PrimExpr b) -> Stmt {
      PrimExpr len = arith::MakeVar("len");
      std::vector<Stmt> row;
      for (size_t s = 0; s < 2; ++s) {
        if (s == 1 && op_ != "lstm") break;
        const Scratch& state = s == 0 ? h_ : c_;
        row.push_back(Loop("j", I(hidden_), [&](PrimExpr j) {
          return state.Set(j, init_[s] ? Read(init_[s], StateAt(d, b, j)) : Zero(t_));
        }));
      }
      Stmt steps = Loop("step", seq_, [&](PrimExpr step) {
        PrimExpr t = reverse ? len - I(1) - step : step;
        auto x_at = [&](PrimExpr c) {
          return Read(x_, batch_first_ ? Indices{b, t, c} : Indices{t, b, c});
        };
        Stmt x_part = Affine(xp_, w_, d, 0, x_->shape[2], x_at, 0, rows);
        Stmt h_part = Affine(
            hp_, r_, d, rows, I(hidden_), [&](PrimExpr c) { return h_[c]; }, 0, rows);
        auto cell = Cell(d);
        Stmt cell_stmt = cell.ok() ? *cell : ir::Seq({});
        status_.Update(cell.status());
        Stmt write_y = Loop("j", I(hidden_), [&](PrimExpr j) {
          Indices at = batch_first_ ? Indices{b, t, I(d), j} : Indices{t, I(d), b, j};
          return ir::Store(k_.outs[0], at, h_[j]);
        });
        return ir::IfThenElse(arith::Binary(ExprKind::kLT, step, len),
                              ir::Seq({x_part, h_part, cell_stmt, write_y}));
      });
      row.push_back(steps);
      for (size_t s = 0; s + 1 < k_.outs.size(); ++s) {
        const Scratch& state = s == 0 ? h_ : c_;
        row.push_back(Loop("j", I(hidden_), [&](PrimExpr j) {
          return ir::Store(k_.outs[s + 1], StateAt(d, b, j), state[j]);
        }));
      }
      PrimExpr len_value =
          lens_ ? CheckedSequenceLength(k_, 4, arith::Load(lens_, {b}), seq_) : seq_;
      // Scratch rows are per batch row, so that rows are independent (and may run in
      // parallel).
      Stmt per_row = ir::Let(len, len_value, ir::Seq(row));
      for (const Scratch* r : {&h_, &c_, &xp_, &hp_, &tmp_})
        per_row = ir::Allocate(r->buf, per_row);
      return per_row;
    });
  }

  // The cell equations of one step, given x_part and h_part; updates h (and c).
  absl::StatusOr<Stmt> Cell(int64_t d) {
    PrimExpr j = arith::MakeVar("j");
    PrimExpr H = I(hidden_);
    auto pre = [&](int64_t g) { return xp_[j + I(g * hidden_)] + hp_[j + I(g * hidden_)]; };
    auto loop = [&](Stmt body) { return ir::For(j, I(0), H, ir::ForKind::kSerial, body); };
    if (op_ == "rnn") {
      KILN_ASSIGN_OR_RETURN(PrimExpr h, Apply(0, pre(0)));
      return loop(h_.Set(j, h));
    }
    if (op_ == "gru") return GruCell(d, j, pre, loop);
    return LstmCell(d, j, pre, loop);
  }

  template <typename Pre, typename LoopFn>
  absl::StatusOr<Stmt> GruCell(int64_t d, PrimExpr j, Pre pre, LoopFn loop) {
    bool linear_before_reset = op::GetIntAttr(k_.call.attrs, "linear_before_reset", 0) != 0;
    KILN_ASSIGN_OR_RETURN(PrimExpr reset, Apply(0, pre(1)));
    KILN_ASSIGN_OR_RETURN(PrimExpr z, Apply(0, pre(0)));
    PrimExpr h2 = I(2 * hidden_);
    std::vector<Stmt> s = {loop(tmp_.Set(j, reset))};
    PrimExpr recur = tmp_[j] * hp_[j + h2];
    if (!linear_before_reset) {  // R_h (r * h) + Rb_h replaces gate h's h_part
      s.push_back(Affine(
          hp_, r_, d, gates_ * hidden_, I(hidden_), [&](PrimExpr c) { return tmp_[c] * h_[c]; },
          2 * hidden_, hidden_));
      recur = hp_[j + h2];
    }
    KILN_ASSIGN_OR_RETURN(PrimExpr cand, Apply(1, xp_[j + h2] + recur));
    PrimExpr one = arith::FloatImm(1, t_);
    s.push_back(loop(h_.Set(j, (one - z) * cand + z * h_[j])));
    return ir::Seq(s);
  }

  // Gates i, o, f, c; peepholes i, o, f.
  template <typename Pre, typename LoopFn>
  absl::StatusOr<Stmt> LstmCell(int64_t d, PrimExpr j, Pre pre, LoopFn loop) {
    auto peep = [&](int64_t g, PrimExpr c) {
      return p_ ? Read(p_, {I(d), j + I(g * hidden_)}) * c : Zero(t_);
    };
    KILN_ASSIGN_OR_RETURN(PrimExpr i, Apply(0, pre(0) + peep(0, c_[j])));
    KILN_ASSIGN_OR_RETURN(PrimExpr f, Apply(0, pre(2) + peep(2, c_[j])));
    if (op::GetIntAttr(k_.call.attrs, "input_forget", 0) != 0) f = arith::FloatImm(1, t_) - i;
    KILN_ASSIGN_OR_RETURN(PrimExpr g, Apply(1, pre(3)));
    // i is needed after c changes: keep it in the scratch row first.
    Stmt keep_i = tmp_.Set(j, i);
    Stmt new_c = c_.Set(j, f * c_[j] + tmp_[j] * g);
    KILN_ASSIGN_OR_RETURN(PrimExpr o, Apply(0, pre(1) + peep(1, c_[j])));
    KILN_ASSIGN_OR_RETURN(PrimExpr hc, Apply(2, c_[j]));
    return loop(ir::Seq({keep_i, new_c, h_.Set(j, o * hc)}));
  }

 public:
  absl::Status status() const { return status_; }

 private:
  const KernelContext& k_;
  std::string op_;
  int64_t gates_, hidden_;
  bool batch_first_;
  DataType t_;
  Buffer x_, w_, r_, b_, lens_, init_[2], p_;
  Scratch h_, c_, xp_, hp_, tmp_;
  PrimExpr seq_;
  std::vector<Activation> acts_;
  absl::Status status_;
};

absl::StatusOr<Stmt> RecurrentBody(const KernelContext& k, int64_t gates) {
  if (!k.inputs[0]->dtype.is_float() || k.inputs[0]->shape.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("op ", k.call.name, ": X must be 3-D float"));
  }
  Recurrent r(k, gates);
  KILN_ASSIGN_OR_RETURN(Stmt body, r.Build());
  KILN_RETURN_IF_ERROR(r.status());
  return body;
}

}  // namespace

void RegisterRecurrentKernelBuilders(KernelBuilderTable& table) {
  table["rnn"] = [](const KernelContext& k) { return RecurrentBody(k, 1); };
  table["gru"] = [](const KernelContext& k) { return RecurrentBody(k, 3); };
  table["lstm"] = [](const KernelContext& k) { return RecurrentBody(k, 4); };
}

}  // namespace kiln::transform
