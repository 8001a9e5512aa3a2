// Losses: negative_log_likelihood_loss and softmax_cross_entropy_loss, following the
// reference kernels in interp/reduce_loss.cc: per target element, -input[n, t, d...] * w[t]
// (0 where t is the ignored index), then "none" keeps the elements, "sum" adds them and
// "mean" divides the sum by the total weight. Everything accumulates in double.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_tensor_util.h"

namespace kiln::transform {

void RegisterLossKernelBuilders(KernelBuilderTable& table);

namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

const DataType kF64 = DataType::Float(64);

PrimExpr ToF64(PrimExpr v) { return v->dtype == kF64 ? v : arith::Cast(kF64, v); }
PrimExpr Div(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kDiv, a, b); }

// A 1-element double scratch buffer holding one running value.
struct Scalar {
  explicit Scalar(const std::string& name)
      : buf(arith::MakeBuffer(name, kF64, {arith::IntImm(1)})) {}
  PrimExpr get() const { return arith::Load(buf, {arith::IntImm(0)}); }
  Stmt set(PrimExpr v) const { return ir::Store(buf, {arith::IntImm(0)}, v); }
  Buffer buf;
};

// input [N, C, d...] at target position tidx = [n, d...] and class c.
Indices ClassIndex(const Indices& tidx, PrimExpr c) {
  Indices at = {tidx[0], c};
  at.insert(at.end(), tidx.begin() + 1, tidx.end());
  return at;
}

// The parts of one loss call: its operands and how one target element weighs and scores.
struct Loss {
  const KernelContext& k;
  Buffer input, target;
  const Buffer* weight;
  std::string reduction;
  bool has_ignore;
  int64_t ignore;

  PrimExpr Class(const Indices& tidx) const {
    return arith::Cast(DataType::Int(), arith::Load(target, tidx));
  }
  // The class a target element picks, checked against the class count (the reference's
  // error; targets do not wrap). An ignored target is not checked: it reads class 0, which
  // its weight of 0 cancels.
  PrimExpr SafeClass(const Indices& tidx) const {
    PrimExpr c = Class(tidx);
    PrimExpr ignored = Ignored(tidx);
    if (ignored) c = arith::Select(ignored, arith::IntImm(0), c);
    return CheckedIndex(k, 1, c, input->shape[1], 1, false);
  }
  PrimExpr Ignored(const Indices& tidx) const {
    if (!has_ignore) return nullptr;
    return arith::Binary(ExprKind::kEQ, Class(tidx), arith::IntImm(ignore));
  }
  PrimExpr Weight(const Indices& tidx) const {
    PrimExpr w = weight ? ToF64(arith::Load(*weight, {SafeClass(tidx)})) : DoubleImm(1);
    PrimExpr ignored = Ignored(tidx);
    return ignored ? arith::Select(ignored, DoubleImm(0), w) : w;
  }
};

absl::StatusOr<Loss> ReadLoss(const KernelContext& k) {
  Loss loss{k, k.inputs[0], k.inputs[1], OptionalInput(k, 2)};
  if (loss.input->shape.size() < 2 || loss.target->shape.size() + 1 != loss.input->shape.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("op ", k.call.name, ": input of rank ", loss.input->shape.size(),
                     " needs a target of rank ", loss.input->shape.size() - 1));
  }
  loss.reduction = op::GetStringAttr(k.call.attrs, "reduction", "mean");
  loss.has_ignore = op::HasAttr(k.call.attrs, "ignore_index");
  loss.ignore = op::GetIntAttr(k.call.attrs, "ignore_index", 0);
  return loss;
}

// Writes the loss into `out`, where score(tidx, class) is the log-probability the target
// element picks (a load for nll, a log-softmax for sce).
using Score = std::function<PrimExpr(const Indices&, PrimExpr)>;
Stmt ReduceLoss(const Loss& l, const Buffer& out, const Score& score) {
  auto element = [&](const Indices& tidx) {
    return DoubleImm(0) - score(tidx, l.SafeClass(tidx)) * l.Weight(tidx);
  };
  if (l.reduction == "none") {
    return LoopNest(l.target->shape, "i", [&](const Indices& tidx) {
      return ir::Store(out, tidx, CastIfNeeded(out->dtype, element(tidx)));
    });
  }
  Scalar sum("loss_sum"), weights("weight_sum");
  Stmt accumulate = LoopNest(l.target->shape, "r", [&](const Indices& tidx) {
    return ir::Seq(
        {sum.set(sum.get() + element(tidx)), weights.set(weights.get() + l.Weight(tidx))});
  });
  PrimExpr result = l.reduction == "sum" ? sum.get() : Div(sum.get(), weights.get());
  Stmt body = ir::Seq({sum.set(DoubleImm(0)), weights.set(DoubleImm(0)), accumulate,
                       ir::Store(out, {}, CastIfNeeded(out->dtype, result))});
  return ir::Allocate(sum.buf, ir::Allocate(weights.buf, body));
}

absl::StatusOr<Stmt> NLLLossBody(const KernelContext& k) {
  KILN_ASSIGN_OR_RETURN(Loss l, ReadLoss(k));
  return ReduceLoss(l, k.out, [&](const Indices& tidx, PrimExpr c) {
    return ToF64(arith::Load(l.input, ClassIndex(tidx, c)));
  });
}

// log_prob[n, c, d...] = x - max_c x - log(sum_c exp(x - max_c x)) in double, one
// [n, d...] line at a time.
Stmt LogSoftmaxAxis1(const Buffer& x, const Buffer& log_prob) {
  std::vector<PrimExpr> lines = {x->shape[0]};
  lines.insert(lines.end(), x->shape.begin() + 2, x->shape.end());
  Scalar max("max"), sum("sum");
  return LoopNest(lines, "o", [&](const Indices& line) {
    PrimExpr c = arith::MakeVar("c");
    auto over_classes = [&](Stmt body) {
      return ir::For(c, arith::IntImm(0), x->shape[1], ir::ForKind::kSerial, body);
    };
    PrimExpr v = ToF64(arith::Load(x, ClassIndex(line, c)));
    PrimExpr shifted = v - max.get();
    Stmt body = ir::Seq({
        max.set(DoubleImm(-INFINITY)),
        over_classes(max.set(arith::Max(max.get(), v))),
        sum.set(DoubleImm(0)),
        over_classes(sum.set(sum.get() + arith::Call(kF64, "exp", {shifted}))),
        over_classes(ir::Store(
            log_prob, ClassIndex(line, c),
            CastIfNeeded(log_prob->dtype, shifted - arith::Call(kF64, "log", {sum.get()})))),
    });
    return ir::Allocate(max.buf, ir::Allocate(sum.buf, body));
  });
}

// (loss, log_prob): the log-probabilities go to the second output, and the loss reads them
// back (rounded to the output type, where the reference keeps them in double).
absl::StatusOr<Stmt> SoftmaxCrossEntropyBody(const KernelContext& k) {
  if (k.outs.size() != 2) {
    return absl::UnimplementedError(
        "op softmax_cross_entropy_loss: expects two results (loss, log_prob)");
  }
  KILN_ASSIGN_OR_RETURN(Loss l, ReadLoss(k));
  const Buffer& log_prob = k.outs[1];
  Stmt loss = ReduceLoss(l, k.outs[0], [&](const Indices& tidx, PrimExpr c) {
    return ToF64(arith::Load(log_prob, ClassIndex(tidx, c)));
  });
  return ir::Seq({LogSoftmaxAxis1(l.input, log_prob), loss});
}

}  // namespace

void RegisterLossKernelBuilders(KernelBuilderTable& table) {
  table["negative_log_likelihood_loss"] = NLLLossBody;
  table["softmax_cross_entropy_loss"] = SoftmaxCrossEntropyBody;
}

}  // namespace kiln::transform
