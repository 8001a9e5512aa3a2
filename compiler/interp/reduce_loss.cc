// Reference kernels for negative_log_likelihood_loss and softmax_cross_entropy_loss.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/kernel_util.h"
#include "compiler/interp/reduce_internal.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

// loss[n, d] = -input[n, target[n, d], d] * weight[target[n, d]] over input [N, C, D] (the
// trailing dims flattened into D), then reduced. Ignored targets weigh 0; mean divides by
// the total weight, as the ONNX definition does.
absl::StatusOr<NDArray> NegativeLogLikelihood(const ir::ExprNode& call,
                                              const std::vector<double>& input,
                                              const Shape& input_shape, const NDArray& target,
                                              const Value& weight, arith::DataType dtype) {
  if (input_shape.size() < 2) return KernelError(call, "input must have rank >= 2");
  int64_t n_count = input_shape[0], classes = input_shape[1];
  int64_t inner = ir::ShapeProduct(Shape(input_shape.begin() + 2, input_shape.end()));
  if (target.num_elements() != n_count * inner) return KernelError(call, "target shape mismatch");
  if (weight.is_tensor() && weight.tensor().num_elements() != classes) {
    return KernelError(call, absl::StrCat("weight has ", weight.tensor().num_elements(),
                                          " elements for ", classes, " classes"));
  }
  bool has_ignore = op::HasAttr(call.attrs, "ignore_index");
  int64_t ignore = op::GetIntAttr(call.attrs, "ignore_index", 0);
  std::vector<double> loss(target.num_elements());
  double loss_sum = 0, weight_sum = 0;
  for (int64_t n = 0; n < n_count; ++n) {
    for (int64_t d = 0; d < inner; ++d) {
      int64_t i = n * inner + d;
      int64_t t = target.GetInt(i);
      if (has_ignore && t == ignore) continue;
      if (t < 0 || t >= classes) {
        return KernelError(call, absl::StrCat("target ", t, " out of range [0, ", classes, ")"));
      }
      double w = weight.is_tensor() ? weight.tensor().GetDouble(t) : 1.0;
      loss[i] = -input[(n * classes + t) * inner + d] * w;
      loss_sum += loss[i];
      weight_sum += w;
    }
  }
  std::string reduction = op::GetStringAttr(call.attrs, "reduction", "mean");
  if (reduction == "none") {
    NDArray out = NDArray::Zeros(dtype, target.shape);
    for (size_t i = 0; i < loss.size(); ++i) out.SetDouble(i, loss[i]);
    return out;
  }
  NDArray out = NDArray::Zeros(dtype, {});
  out.SetDouble(0, reduction == "sum" ? loss_sum : loss_sum / weight_sum);
  return out;
}

std::vector<double> ToDoubles(const NDArray& a) {
  std::vector<double> out(a.num_elements());
  for (int64_t i = 0; i < a.num_elements(); ++i) out[i] = a.GetDouble(i);
  return out;
}

absl::StatusOr<Value> NLLLoss(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* input, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* target, TensorArg(call, args, 1));
  KILN_ASSIGN_OR_RETURN(NDArray loss, NegativeLogLikelihood(call, ToDoubles(*input), input->shape,
                                                            *target, args[2], input->dtype));
  return Value(std::move(loss));
}

// log_softmax over axis 1 of [N, C, D...], in double.
std::vector<double> LogSoftmaxAxis1(const NDArray& x) {
  int64_t n_count = x.shape[0], classes = x.shape[1];
  int64_t inner = x.num_elements() / std::max<int64_t>(n_count * classes, 1);
  std::vector<double> v = ToDoubles(x), out(v.size());
  for (int64_t n = 0; n < n_count; ++n) {
    for (int64_t d = 0; d < inner; ++d) {
      auto at = [&](int64_t c) { return (n * classes + c) * inner + d; };
      double m = -INFINITY, s = 0;
      for (int64_t c = 0; c < classes; ++c) m = std::max(m, v[at(c)]);
      for (int64_t c = 0; c < classes; ++c) s += std::exp(v[at(c)] - m);
      for (int64_t c = 0; c < classes; ++c) out[at(c)] = v[at(c)] - m - std::log(s);
    }
  }
  return out;
}

absl::StatusOr<Value> SoftmaxCrossEntropyLoss(const ir::ExprNode& call,
                                              const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* scores, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* labels, TensorArg(call, args, 1));
  if (scores->shape.size() < 2) return KernelError(call, "scores must have rank >= 2");
  std::vector<double> log_prob = LogSoftmaxAxis1(*scores);
  KILN_ASSIGN_OR_RETURN(NDArray loss, NegativeLogLikelihood(call, log_prob, scores->shape, *labels,
                                                            args[2], scores->dtype));
  NDArray log_prob_out = NDArray::Zeros(scores->dtype, scores->shape);
  for (size_t i = 0; i < log_prob.size(); ++i) log_prob_out.SetDouble(i, log_prob[i]);
  return Value::Tuple({Value(std::move(loss)), Value(std::move(log_prob_out))});
}

}  // namespace

void RegisterLossKernels(KernelTable& table) {
  table["negative_log_likelihood_loss"] = NLLLoss;
  table["softmax_cross_entropy_loss"] = SoftmaxCrossEntropyLoss;
}

}  // namespace kiln::interp
