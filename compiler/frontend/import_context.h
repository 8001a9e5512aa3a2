// What an ONNX operator converter sees while the importer walks the graph: the node, its
// inputs as IR values, its attributes, and a way to emit graph-level calls (normalized on
// the spot, so shape errors surface at the node that causes them). Converters live in one
// file per operator family and register themselves in a ConverterTable.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/arith/analyzer.h"
#include "compiler/ir/graph.h"
#include "onnx/onnx_pb.h"

namespace kiln::frontend {

class ImportContext {
 public:
  virtual ~ImportContext() = default;

  virtual const onnx::NodeProto& node() const = 0;
  // The opset of the default ONNX domain this model imports.
  virtual int64_t opset() const = 0;
  virtual const arith::Analyzer& analyzer() const = 0;

  // Input i as an IR value; INVALID_ARGUMENT naming it when missing or undefined.
  virtual absl::StatusOr<ir::Expr> Input(int i) = 0;
  // True when input i is given (present and not the empty name).
  virtual bool HasInput(int i) const = 0;
  // Input i, or ir::MakeNone() when it is omitted.
  virtual absl::StatusOr<ir::Expr> OptionalInput(int i) = 0;
  // Input i's value when it is known at import time (an initializer, a Constant, or folded);
  // INVALID_ARGUMENT saying a run-time value is not supported otherwise.
  virtual absl::StatusOr<const ir::NDArray*> ConstantInput(int i) = 0;
  // The known value of an expression, if it is a constant.
  virtual const ir::NDArray* ConstantValue(const ir::Expr& value) const = 0;

  // Integer tensors whose elements are known symbolically (the output of Shape, and what
  // Gather, Concat, Slice, arithmetic... make of it). Converters that compute shapes from
  // tensors (Reshape, Expand, ConstantOfShape, Range, Tile...) use these to keep dims
  // symbolic; converters of the ops that move such values (Shape, Gather, Concat, Unsqueeze,
  // Squeeze, Slice, Cast, Add, Sub, Mul, Div) record their results with SetSymbolicValue.
  // A constant integer tensor of rank <= 1 always has a symbolic value.
  virtual std::optional<std::vector<arith::PrimExpr>> SymbolicValue(
      const ir::Expr& value) const = 0;
  virtual void SetSymbolicValue(const ir::Expr& value, std::vector<arith::PrimExpr> elements) = 0;

  // Binds the elements of `value`, a small integer tensor computed at run time (0-d, or 1-D
  // of static length; float values truncate toward zero), to fresh symbolic variables, so that
  // shapes made from it stay symbolic:
  //   %hint: Shape([hint_0, hint_1]) = match_cast(tensor_to_shape(%value), Shape([...]))
  // Host code binds them by reading the tensor once it exists. They are data, not dims, and
  // may be negative, while the analyzer takes an unbound variable to be >= 0: use them as
  // dims only where the op requires a value >= 0 (checked at run time), and otherwise only
  // under a select, whose bounds the analyzer does not derive from its branches.
  virtual absl::StatusOr<std::vector<arith::PrimExpr>> BindRuntimeValues(
      const ir::Expr& value, const std::string& name_hint) = 0;
  // For float scales computed at run time (1-D, one per dim of `dims`): binds the extents
  // they make of the dims, trunc(dims[k] * scales[k]), or -1 for a scale that is not positive
  // (tensor_to_shape(scales, dims), op/tensor_create.cc), as Resize's output shape. They may
  // be -1: check them >= 0 (run time) before using them as dims.
  virtual absl::StatusOr<std::vector<arith::PrimExpr>> BindScaledExtents(
      const ir::Expr& scales, const std::vector<arith::PrimExpr>& dims,
      const std::string& name_hint) = 0;

  // Checks at run time that `actual` equals `expected` (a constraint that shape inference
  // assumed of run-time values, such as a reshape keeping the element count), as
  //   %hint: Shape(expected) = match_cast(shape(actual), Shape(expected))
  virtual void CheckAtRunTime(const arith::PrimExpr& actual, const arith::PrimExpr& expected,
                              const std::string& name_hint) = 0;

  // Attributes, with ONNX defaults supplied by the caller.
  virtual const onnx::AttributeProto* Attr(const std::string& name) const = 0;
  int64_t IntAttr(const std::string& name, int64_t fallback) const;
  float FloatAttr(const std::string& name, float fallback) const;
  std::string StringAttr(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> IntsAttr(const std::string& name) const;  // empty when absent
  std::vector<float> FloatsAttr(const std::string& name) const;
  std::vector<std::string> StringsAttr(const std::string& name) const;

  // Emits `op(args) {attrs}` as a new binding named after `name_hint` (default: the node's
  // first output) and returns its variable. When every argument is a constant the call is
  // folded with the reference interpreter and a constant comes back instead.
  virtual absl::StatusOr<ir::Expr> Emit(const std::string& op, std::vector<ir::Expr> args,
                                        ir::Attrs attrs = {},
                                        const std::string& name_hint = "") = 0;
  // Emits a call built by the converter (one with subgraphs, say): normalized like Emit.
  virtual absl::StatusOr<ir::Expr> EmitCall(ir::Expr call, const std::string& name_hint = "") = 0;
  // Imports an ONNX subgraph (If branches, Loop and Scan bodies) as a Function whose params
  // have the given struct info and whose result is the tuple of the graph's outputs. The
  // subgraph may use values of the enclosing graphs directly.
  virtual absl::StatusOr<std::shared_ptr<const ir::Function>> ImportSubgraph(
      const onnx::GraphProto& graph, const std::vector<ir::StructInfo>& param_infos) = 0;
  // Binds any expression (a tuple field, say) to a fresh variable named after `name_hint`.
  virtual absl::StatusOr<ir::Expr> Bind(ir::Expr value, const std::string& name_hint) = 0;
  // Makes `value` the node's output i.
  virtual void SetOutput(int i, ir::Expr value) = 0;
  int num_outputs() const { return node().output_size(); }
  // True when output i is requested (present and not the empty name).
  bool HasOutput(int i) const { return i < num_outputs() && !node().output(i).empty(); }

  // Convenience: Emit, then make the result output 0.
  absl::Status EmitOutput(const std::string& op, std::vector<ir::Expr> args, ir::Attrs attrs = {});
  // For ops with several results (a Tuple struct info): Emit, then bind each field that the
  // node requests to its own variable and make it that output.
  absl::Status EmitTupleOutputs(const std::string& op, std::vector<ir::Expr> args,
                                ir::Attrs attrs = {});
};

using Converter = std::function<absl::Status(ImportContext& ctx)>;
using ConverterTable = std::map<std::string, Converter>;  // ONNX op_type -> converter

void RegisterElementwiseConverters(ConverterTable& table);  // frontend/onnx_elementwise.cc
void RegisterTensorConverters(ConverterTable& table);       // frontend/onnx_tensor_ops.cc
void RegisterNNConverters(ConverterTable& table);           // frontend/onnx_nn.cc
void RegisterReduceConverters(ConverterTable& table);       // frontend/onnx_reduce.cc
void RegisterImageConverters(ConverterTable& table);        // frontend/onnx_image.cc
void RegisterControlConverters(ConverterTable& table);      // frontend/onnx_control.cc

// A 0-d constant of `dtype` holding `value`.
ir::Expr ScalarConstant(double value, arith::DataType dtype);
// A constant holding `array`.
ir::Expr Constant(ir::NDArray array);

}  // namespace kiln::frontend
