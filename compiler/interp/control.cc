// Reference semantics of loop and scan.
#include "compiler/interp/control.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/kernel_util.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

NDArray Scalar(DataType dtype, int64_t v) {
  NDArray a = NDArray::Zeros(dtype, {});
  if (dtype.is_int()) {
    a.data<int64_t>()[0] = v;
  } else {
    a.data<uint8_t>()[0] = v != 0;
  }
  return a;
}

// Stacks equally shaped slices along a new axis `axis` (reversed when `reverse`).
absl::StatusOr<NDArray> Stack(const ir::ExprNode& call, const std::vector<NDArray>& slices,
                              int64_t axis, bool reverse) {
  if (slices.empty()) return KernelError(call, "no iterations ran: scan outputs have no shape");
  const NDArray& first = slices[0];
  for (const NDArray& s : slices) {
    if (s.shape != first.shape || s.dtype != first.dtype) {
      return KernelError(call, "scan output slices differ in shape or dtype across iterations");
    }
  }
  if (axis < 0) axis += first.shape.size() + 1;
  Shape out_shape = first.shape;
  out_shape.insert(out_shape.begin() + axis, static_cast<int64_t>(slices.size()));
  NDArray out = NDArray::Zeros(first.dtype, out_shape);
  int64_t bytes = first.dtype.bytes();
  Shape out_strides = Strides(out_shape);
  Shape slice_strides = Strides(first.shape);
  for (size_t t = 0; t < slices.size(); ++t) {
    const NDArray& s = slices[reverse ? slices.size() - 1 - t : t];
    ForEachIndex(first.shape, [&](const Index& idx) {
      Index full = idx;
      full.insert(full.begin() + axis, static_cast<int64_t>(t));
      std::memcpy(out.bytes.data() + Offset(full, out_strides) * bytes,
                  s.bytes.data() + Offset(idx, slice_strides) * bytes, bytes);
    });
  }
  return out;
}

// Slice t of `x` along `axis`.
NDArray SliceAt(const NDArray& x, int64_t axis, int64_t t) {
  Shape shape = x.shape;
  shape.erase(shape.begin() + axis);
  NDArray out = NDArray::Zeros(x.dtype, shape);
  int64_t bytes = x.dtype.bytes();
  Shape in_strides = Strides(x.shape), out_strides = Strides(shape);
  ForEachIndex(shape, [&](const Index& idx) {
    Index full = idx;
    full.insert(full.begin() + axis, t);
    std::memcpy(out.bytes.data() + Offset(idx, out_strides) * bytes,
                x.bytes.data() + Offset(full, in_strides) * bytes, bytes);
  });
  return out;
}

}  // namespace

absl::StatusOr<Value> RunLoop(const ir::ExprNode& call, const std::vector<Value>& args,
                              const FunctionRunner& run) {
  const ir::Function& body = *call.subgraphs[0];
  int64_t max_trips = args[0].is_none() ? std::numeric_limits<int64_t>::max()
                                        : args[0].tensor().GetInt(0);
  bool cond = args[1].is_none() ? true : args[1].tensor().GetInt(0) != 0;
  std::vector<Value> carried(args.begin() + 2, args.end());
  std::vector<std::vector<NDArray>> scans;
  int64_t trips = 0;
  for (int64_t i = 0; i < max_trips && cond; ++i, ++trips) {
    std::vector<Value> in = {Value(Scalar(DataType::Int(64), i)), Value(Scalar(DataType::Bool(), cond))};
    in.insert(in.end(), carried.begin(), carried.end());
    KILN_ASSIGN_OR_RETURN(Value out, run(body, in));
    const std::vector<Value>& r = out.fields();
    cond = r[0].tensor().GetInt(0) != 0;
    for (size_t k = 0; k < carried.size(); ++k) carried[k] = r[1 + k];
    scans.resize(r.size() - 1 - carried.size());
    for (size_t j = 0; j < scans.size(); ++j) scans[j].push_back(r[1 + carried.size() + j].tensor());
  }
  std::vector<Value> results = carried;
  for (const auto& slices : scans) {
    KILN_ASSIGN_OR_RETURN(NDArray stacked, Stack(call, slices, 0, false));
    results.push_back(Value(std::move(stacked)));
  }
  if (op::GetIntAttr(call.attrs, "count_trips", 0) != 0) {
    results.push_back(Value(Scalar(DataType::Int(64), trips)));
  }
  return Value::Tuple(std::move(results));
}

absl::StatusOr<Value> RunScan(const ir::ExprNode& call, const std::vector<Value>& args,
                              const FunctionRunner& run) {
  const ir::Function& body = *call.subgraphs[0];
  int64_t num_scan = op::GetIntAttr(call.attrs, "num_scan_inputs", 0);
  size_t num_state = args.size() - num_scan;
  std::vector<int64_t> in_axes = op::GetIntsAttr(call.attrs, "scan_input_axes");
  std::vector<int64_t> in_dirs = op::GetIntsAttr(call.attrs, "scan_input_directions");
  std::vector<int64_t> out_axes = op::GetIntsAttr(call.attrs, "scan_output_axes");
  std::vector<int64_t> out_dirs = op::GetIntsAttr(call.attrs, "scan_output_directions");
  in_axes.resize(num_scan, 0);
  in_dirs.resize(num_scan, 0);
  int64_t length = -1;
  for (int64_t j = 0; j < num_scan; ++j) {
    const NDArray& x = args[num_state + j].tensor();
    if (in_axes[j] < 0) in_axes[j] += x.shape.size();
    int64_t n = x.shape[in_axes[j]];
    if (length >= 0 && n != length) return KernelError(call, "scan inputs differ in length");
    length = n;
  }
  std::vector<Value> state(args.begin(), args.begin() + num_state);
  std::vector<std::vector<NDArray>> scans;
  for (int64_t t = 0; t < length; ++t) {
    std::vector<Value> in = state;
    for (int64_t j = 0; j < num_scan; ++j) {
      int64_t at = in_dirs[j] ? length - 1 - t : t;
      in.push_back(Value(SliceAt(args[num_state + j].tensor(), in_axes[j], at)));
    }
    KILN_ASSIGN_OR_RETURN(Value out, run(body, in));
    const std::vector<Value>& r = out.fields();
    for (size_t k = 0; k < num_state; ++k) state[k] = r[k];
    scans.resize(r.size() - num_state);
    for (size_t j = 0; j < scans.size(); ++j) scans[j].push_back(r[num_state + j].tensor());
  }
  out_axes.resize(scans.size(), 0);
  out_dirs.resize(scans.size(), 0);
  std::vector<Value> results = state;
  for (size_t j = 0; j < scans.size(); ++j) {
    KILN_ASSIGN_OR_RETURN(NDArray stacked, Stack(call, scans[j], out_axes[j], out_dirs[j] != 0));
    results.push_back(Value(std::move(stacked)));
  }
  return Value::Tuple(std::move(results));
}

void RegisterControlKernels(KernelTable& table) {}

}  // namespace kiln::interp
