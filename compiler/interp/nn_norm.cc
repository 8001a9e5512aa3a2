// Reference kernels for normalizations. Statistics are computed in double: mean, then the
// population variance E[(x - mean)^2].
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/nn_kernels.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

struct Moments {
  double mean = 0, var = 0;
};

Moments MomentsOf(const NDArray& x, const std::vector<int64_t>& offsets) {
  Moments m;
  if (offsets.empty()) return m;
  for (int64_t off : offsets) m.mean += x.GetDouble(off);
  m.mean /= static_cast<double>(offsets.size());
  for (int64_t off : offsets) m.var += std::pow(x.GetDouble(off) - m.mean, 2);
  m.var /= static_cast<double>(offsets.size());
  return m;
}

// True for every axis except 1: the axes batch statistics reduce over.
std::vector<bool> AllButChannel(size_t rank) {
  std::vector<bool> reduced(rank, true);
  reduced[1] = false;
  return reduced;
}

// y = scale[c] * (x - mean[c]) / sqrt(var[c] + epsilon) + bias[c], with c the channel (dim 1).
NDArray NormalizeChannels(const NDArray& x, const NDArray& scale, const NDArray& bias,
                          const std::vector<double>& mean, const std::vector<double>& var,
                          double epsilon) {
  NDArray out = NDArray::Zeros(x.dtype, x.shape);
  int64_t channels = x.shape[1];
  int64_t plane = x.num_elements() / std::max<int64_t>(1, x.shape[0] * channels);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    int64_t c = (i / plane) % channels;
    double y = (x.GetDouble(i) - mean[c]) / std::sqrt(var[c] + epsilon);
    out.SetDouble(i, y * scale.GetDouble(c) + bias.GetDouble(c));
  }
  return out;
}

absl::StatusOr<std::vector<const NDArray*>> Tensors(const ir::ExprNode& call,
                                                    const std::vector<Value>& args, size_t count) {
  std::vector<const NDArray*> out;
  for (size_t i = 0; i < count; ++i) {
    KILN_ASSIGN_OR_RETURN(const NDArray* t, TensorArg(call, args, i));
    out.push_back(t);
  }
  if (out[0]->shape.size() < 2) return KernelError(call, "input must have rank >= 2");
  for (size_t i = 1; i < count; ++i) {
    if (out[i]->num_elements() != out[0]->shape[1]) {
      return KernelError(call, absl::StrCat("argument ", i, " has ", out[i]->num_elements(),
                                            " entries for ", out[0]->shape[1], " channels"));
    }
  }
  return out;
}

// batch_normalization(x, scale, bias, mean, var): the inference form, with given statistics.
absl::StatusOr<Value> BatchNorm(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(auto t, Tensors(call, args, 5));
  double epsilon = op::GetFloatAttr(call.attrs, "epsilon", 1e-5);
  return Value(NormalizeChannels(*t[0], *t[1], *t[2], ToDoubles(*t[3]), ToDoubles(*t[4]), epsilon));
}

// The training form normalizes with the batch's own statistics and returns the running
// statistics updated with them: running = running * momentum + batch * (1 - momentum).
absl::StatusOr<Value> BatchNormTraining(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(auto t, Tensors(call, args, 5));
  double epsilon = op::GetFloatAttr(call.attrs, "epsilon", 1e-5);
  double momentum = op::GetFloatAttr(call.attrs, "momentum", 0.9);
  std::vector<double> mean, var;
  ForEachGroup(t[0]->shape, AllButChannel(t[0]->shape.size()), [&](const auto& offsets) {
    Moments m = MomentsOf(*t[0], offsets);
    mean.push_back(m.mean);
    var.push_back(m.var);
  });
  NDArray running_mean = *t[3], running_var = *t[4];
  for (size_t c = 0; c < mean.size(); ++c) {
    running_mean.SetDouble(c, t[3]->GetDouble(c) * momentum + mean[c] * (1 - momentum));
    running_var.SetDouble(c, t[4]->GetDouble(c) * momentum + var[c] * (1 - momentum));
  }
  NDArray y = NormalizeChannels(*t[0], *t[1], *t[2], mean, var, epsilon);
  return Value::Tuple(
      {Value(std::move(y)), Value(std::move(running_mean)), Value(std::move(running_var))});
}

// instance_normalization(x, scale, bias): statistics per [n, c] over the spatial dims.
absl::StatusOr<Value> InstanceNorm(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(auto t, Tensors(call, args, 3));
  const NDArray& x = *t[0];
  double epsilon = op::GetFloatAttr(call.attrs, "epsilon", 1e-5);
  std::vector<bool> reduced(x.shape.size(), true);
  reduced[0] = reduced[1] = false;
  NDArray out = NDArray::Zeros(x.dtype, x.shape);
  int64_t group = 0;
  ForEachGroup(x.shape, reduced, [&](const std::vector<int64_t>& offsets) {
    int64_t c = group++ % x.shape[1];
    Moments m = MomentsOf(x, offsets);
    double inv_std = 1.0 / std::sqrt(m.var + epsilon);
    for (int64_t off : offsets) {
      double y = (x.GetDouble(off) - m.mean) * inv_std;
      out.SetDouble(off, y * t[1]->GetDouble(c) + t[2]->GetDouble(c));
    }
  });
  return Value(std::move(out));
}

// The dims [axis, rank) that layer normalization reduces.
absl::StatusOr<std::vector<bool>> LayerAxes(const ir::ExprNode& call, size_t rank) {
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        op::NormalizeAxis(call, op::GetIntAttr(call.attrs, "axis", -1), rank));
  std::vector<bool> reduced(rank, false);
  for (size_t d = axis; d < rank; ++d) reduced[d] = true;
  return reduced;
}

// y = (x - mean) / sqrt(var + epsilon) * scale + bias, scale and bias broadcast to x.
absl::StatusOr<Value> LayerNorm(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* scale, TensorArg(call, args, 1));
  const NDArray* bias = args[2].is_none() ? nullptr : &args[2].tensor();
  KILN_ASSIGN_OR_RETURN(std::vector<bool> reduced, LayerAxes(call, x->shape.size()));
  for (const NDArray* p : {scale, bias}) {
    if (!p) continue;
    auto shape = BroadcastShape(x->shape, p->shape);
    if (!shape.ok() || *shape != x->shape) {
      return KernelError(call, "scale and bias must broadcast to the input");
    }
  }
  double epsilon = op::GetFloatAttr(call.attrs, "epsilon", 1e-5);
  NDArray out = NDArray::Zeros(x->dtype, x->shape);
  Shape strides = Strides(x->shape);
  Shape scale_strides = Strides(scale->shape);
  Shape bias_strides = bias ? Strides(bias->shape) : Shape{};
  ForEachGroup(x->shape, reduced, [&](const std::vector<int64_t>& offsets) {
    Moments m = MomentsOf(*x, offsets);
    double inv_std = 1.0 / std::sqrt(m.var + epsilon);
    for (int64_t off : offsets) {
      Index idx(x->shape.size());
      for (size_t d = 0; d < idx.size(); ++d) idx[d] = off / strides[d] % x->shape[d];
      double y = (x->GetDouble(off) - m.mean) * inv_std *
                 scale->GetDouble(BroadcastOffset(idx, scale->shape, scale_strides));
      if (bias) y += bias->GetDouble(BroadcastOffset(idx, bias->shape, bias_strides));
      out.SetDouble(off, y);
    }
  });
  return Value(std::move(out));
}

// (mean, 1 / sqrt(var + epsilon)) per group, shaped as the op's struct info says.
absl::StatusOr<Value> LayerNormStats(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(std::vector<bool> reduced, LayerAxes(call, x->shape.size()));
  // stash_type is an ONNX TensorProto type: 1 is float, 11 double.
  int64_t stash = op::GetIntAttr(call.attrs, "stash_type", 1);
  DataType dtype = stash == 1 ? DataType::Float(32) : stash == 11 ? DataType::Float(64) : x->dtype;
  double epsilon = op::GetFloatAttr(call.attrs, "epsilon", 1e-5);
  Shape shape = x->shape;
  for (size_t d = 0; d < shape.size(); ++d) shape[d] = reduced[d] ? 1 : shape[d];
  NDArray mean = NDArray::Zeros(dtype, shape), inv_std = mean;
  int64_t i = 0;
  ForEachGroup(x->shape, reduced, [&](const std::vector<int64_t>& offsets) {
    Moments m = MomentsOf(*x, offsets);
    mean.SetDouble(i, m.mean);
    inv_std.SetDouble(i++, 1.0 / std::sqrt(m.var + epsilon));
  });
  return Value::Tuple({Value(std::move(mean)), Value(std::move(inv_std))});
}

// y = x / (bias + alpha / size * sum of x^2 over the `size` neighbouring channels)^beta.
absl::StatusOr<Value> Lrn(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  if (x->shape.size() < 2) return KernelError(call, "input must have rank >= 2");
  double alpha = op::GetFloatAttr(call.attrs, "alpha", 1e-4);
  double beta = op::GetFloatAttr(call.attrs, "beta", 0.75);
  double bias = op::GetFloatAttr(call.attrs, "bias", 1.0);
  int64_t size = op::GetIntAttr(call.attrs, "size", 1);
  int64_t channels = x->shape[1];
  int64_t plane = x->num_elements() / std::max<int64_t>(1, x->shape[0] * channels);
  NDArray out = NDArray::Zeros(x->dtype, x->shape);
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    int64_t c = (i / plane) % channels;
    int64_t lo = std::max<int64_t>(0, c - (size - 1) / 2);
    int64_t hi = std::min(channels - 1, c + size / 2);
    double sum = 0;
    for (int64_t k = lo; k <= hi; ++k) sum += std::pow(x->GetDouble(i + (k - c) * plane), 2);
    out.SetDouble(i, x->GetDouble(i) / std::pow(bias + alpha / size * sum, beta));
  }
  return Value(std::move(out));
}

// y = (x - mean) / (sqrt(var) + 1e-9) over `axes`, as ONNX's function body computes it.
absl::StatusOr<Value> MeanVarianceNorm(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  std::vector<bool> reduced(x->shape.size(), false);
  for (int64_t axis : op::GetIntsAttr(call.attrs, "axes")) {
    KILN_ASSIGN_OR_RETURN(int64_t a, op::NormalizeAxis(call, axis, x->shape.size()));
    reduced[a] = true;
  }
  NDArray out = NDArray::Zeros(x->dtype, x->shape);
  ForEachGroup(x->shape, reduced, [&](const std::vector<int64_t>& offsets) {
    Moments m = MomentsOf(*x, offsets);
    for (int64_t off : offsets) {
      out.SetDouble(off, (x->GetDouble(off) - m.mean) / (std::sqrt(m.var) + 1e-9));
    }
  });
  return Value(std::move(out));
}

}  // namespace

void RegisterNNNormKernels(KernelTable& table) {
  table["batch_normalization"] = BatchNorm;
  table["batch_normalization_training"] = BatchNormTraining;
  table["instance_normalization"] = InstanceNorm;
  table["layer_normalization"] = LayerNorm;
  table["layer_normalization_stats"] = LayerNormStats;
  table["lrn"] = Lrn;
  table["mean_variance_normalization"] = MeanVarianceNorm;
}

}  // namespace kiln::interp
