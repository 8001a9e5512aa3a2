// Reference kernels for pooling: max (values and indices), average, Lp, the global forms,
// and max_unpool.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/nn_kernels.h"
#include "compiler/op/nn_window.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

// One output position's window: the in-range input offsets (within one [N, C] plane) and
// how many window positions lie inside the padded input.
struct PoolWindow {
  std::vector<int64_t> offsets;
  int64_t padded_count = 0;
};

using PoolFn = std::function<double(const NDArray& x, int64_t plane_base, const PoolWindow&)>;

// Runs fn over every window of x ([N, C, spatial...]) with the call's window attrs.
absl::StatusOr<NDArray> Pool(const ir::ExprNode& call, const NDArray& x, DataType out_dtype,
                             const PoolFn& fn) {
  if (x.shape.size() < 3) return KernelError(call, "input must have rank >= 3");
  Shape in(x.shape.begin() + 2, x.shape.end());
  KILN_ASSIGN_OR_RETURN(op::Window win, op::ReadWindow(call, in.size()));
  arith::Analyzer analyzer;
  Shape out_sp, pad_begin, pad_end;
  for (size_t d = 0; d < in.size(); ++d) {
    op::WindowDim dim = op::ConvWindowDim(win, d, arith::IntImm(in[d]), analyzer);
    out_sp.push_back(op::EvaluateDim(dim.out));
    pad_begin.push_back(op::EvaluateDim(dim.pad_begin));
    pad_end.push_back(op::EvaluateDim(dim.pad_end));
    if (out_sp.back() < 0) return KernelError(call, "window larger than the padded input");
  }
  Shape shape = {x.shape[0], x.shape[1]};
  shape.insert(shape.end(), out_sp.begin(), out_sp.end());
  NDArray out = NDArray::Zeros(out_dtype, shape);
  Shape in_strides = Strides(in);
  int64_t in_plane = ir::ShapeProduct(in), o = 0;
  PoolWindow w;
  for (int64_t plane = 0; plane < x.shape[0] * x.shape[1]; ++plane) {
    ForEachIndex(out_sp, [&](const Index& pos) {
      w.offsets.clear();
      w.padded_count = 0;
      ForEachIndex(win.kernel, [&](const Index& tap) {
        int64_t off = 0;
        bool inside = true, padded = true;
        for (size_t d = 0; d < in.size(); ++d) {
          int64_t i = pos[d] * win.strides[d] - pad_begin[d] + tap[d] * win.dilations[d];
          inside &= i >= 0 && i < in[d];
          padded &= i >= -pad_begin[d] && i < in[d] + pad_end[d];
          off += i * in_strides[d];
        }
        if (padded) ++w.padded_count;
        if (inside) w.offsets.push_back(off);
      });
      out.SetDouble(o++, fn(x, plane * in_plane, w));
    });
  }
  return out;
}

double MaxValue(const NDArray& x, int64_t base, const PoolWindow& w) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t off : w.offsets) max = std::max(max, x.GetDouble(base + off));
  return max;
}

absl::StatusOr<Value> MaxPool(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(NDArray out, Pool(call, *x, x->dtype, MaxValue));
  return Value(std::move(out));
}

// The flat index of the (first) maximum in the whole input; storage_order 1 counts the
// spatial dims column-major.
absl::StatusOr<Value> MaxPoolIndices(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  bool column_major = op::GetIntAttr(call.attrs, "storage_order", 0) != 0;
  Shape in(x->shape.begin() + 2, x->shape.end());
  Shape strides = Strides(in), reversed_strides(in.size(), 1);
  for (size_t d = 1; d < in.size(); ++d) reversed_strides[d] = reversed_strides[d - 1] * in[d - 1];
  auto fn = [&](const NDArray& t, int64_t base, const PoolWindow& w) -> double {
    int64_t best = -1;
    for (int64_t off : w.offsets) {
      if (best < 0 || t.GetDouble(base + off) > t.GetDouble(base + best)) best = off;
    }
    if (!column_major || best < 0) return static_cast<double>(base + best);
    int64_t flat = 0;
    for (size_t d = 0; d < in.size(); ++d)
      flat += (best / strides[d]) % in[d] * reversed_strides[d];
    return static_cast<double>(base + flat);
  };
  KILN_ASSIGN_OR_RETURN(NDArray out, Pool(call, *x, DataType::Int(64), fn));
  return Value(std::move(out));
}

// count_include_pad counts the padding positions a window covers; otherwise only real
// elements count.
absl::StatusOr<Value> AveragePool(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  bool include_pad = op::GetIntAttr(call.attrs, "count_include_pad", 0) != 0;
  auto fn = [&](const NDArray& t, int64_t base, const PoolWindow& w) {
    double sum = 0;
    for (int64_t off : w.offsets) sum += t.GetDouble(base + off);
    int64_t count = include_pad ? w.padded_count : static_cast<int64_t>(w.offsets.size());
    return sum / static_cast<double>(count);
  };
  KILN_ASSIGN_OR_RETURN(NDArray out, Pool(call, *x, x->dtype, fn));
  return Value(std::move(out));
}

absl::StatusOr<Value> LpPool(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  double p = static_cast<double>(op::GetIntAttr(call.attrs, "p", 2));
  auto fn = [&](const NDArray& t, int64_t base, const PoolWindow& w) {
    double sum = 0;
    for (int64_t off : w.offsets) sum += std::pow(std::fabs(t.GetDouble(base + off)), p);
    return std::pow(sum, 1.0 / p);
  };
  KILN_ASSIGN_OR_RETURN(NDArray out, Pool(call, *x, x->dtype, fn));
  return Value(std::move(out));
}

// global_average_pool and global_max_pool reduce each [N, C] plane to one value.
absl::StatusOr<Value> GlobalPool(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  if (x->shape.size() < 3) return KernelError(call, "input must have rank >= 3");
  bool max = call.name == "global_max_pool";
  Shape shape = x->shape;
  for (size_t d = 2; d < shape.size(); ++d) shape[d] = 1;
  NDArray out = NDArray::Zeros(x->dtype, shape);
  int64_t plane = x->num_elements() / std::max<int64_t>(1, out.num_elements());
  for (int64_t p = 0; p < out.num_elements(); ++p) {
    double acc = max ? -std::numeric_limits<double>::infinity() : 0;
    for (int64_t i = 0; i < plane; ++i) {
      double v = x->GetDouble(p * plane + i);
      acc = max ? std::max(acc, v) : acc + v;
    }
    out.SetDouble(p, max ? acc : acc / static_cast<double>(plane));
  }
  return Value(std::move(out));
}

// Scatters x into the shape max_pool's input had (indices are flat in that shape), then
// places that at the start of the requested output shape, as ONNX's reference does.
absl::StatusOr<Value> MaxUnpool(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* indices, TensorArg(call, args, 1));
  if (x->shape.size() < 3 || indices->shape != x->shape) {
    return KernelError(call, "x must have rank >= 3 and indices its shape");
  }
  KILN_ASSIGN_OR_RETURN(op::Window win, op::ReadWindow(call, x->shape.size() - 2));
  Shape inferred = {x->shape[0], x->shape[1]};
  for (size_t d = 0; d < win.rank(); ++d) {
    inferred.push_back((x->shape[d + 2] - 1) * win.strides[d] + win.kernel[d] - win.pads[d] -
                       win.pads[d + win.rank()]);
  }
  Shape shape = args[2].is_none() ? inferred : ToInt64s(args[2].tensor());
  if (shape.size() != inferred.size()) return KernelError(call, "output_shape has the wrong rank");
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < inferred[d]) {
      return KernelError(call, absl::StrCat("output_shape dim ", d, " is ", shape[d],
                                            ", smaller than the unpooled extent ", inferred[d]));
    }
  }
  NDArray out = NDArray::Zeros(x->dtype, shape);
  Shape inferred_strides = Strides(inferred), out_strides = Strides(shape);
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    int64_t flat = indices->GetInt(i), off = 0;
    if (flat < 0 || flat >= ir::ShapeProduct(inferred)) {
      return KernelError(call, absl::StrCat("index ", flat, " out of range"));
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      off += (flat / inferred_strides[d]) % inferred[d] * out_strides[d];
    }
    out.SetDouble(off, x->GetDouble(i));
  }
  return Value(std::move(out));
}

}  // namespace

void RegisterNNPoolKernels(KernelTable& table) {
  table["max_pool"] = MaxPool;
  table["max_pool_indices"] = MaxPoolIndices;
  table["average_pool"] = AveragePool;
  table["lp_pool"] = LpPool;
  table["global_average_pool"] = GlobalPool;
  table["global_max_pool"] = GlobalPool;
  table["max_unpool"] = MaxUnpool;
}

}  // namespace kiln::interp
