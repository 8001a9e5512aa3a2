#include "compiler/frontend/onnx_importer.h"

#include <functional>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "compiler/arith/analyzer.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/onnx_tensor.h"
#include "compiler/op/registry.h"
#include "onnx/onnx_pb.h"

namespace kiln::frontend {

using arith::PrimExpr;
using ir::Expr;
using ir::StructInfo;

namespace {

// Builds `main` binding by binding: each emitted call is normalized (struct info inferred)
// on the spot, as Relax's BlockBuilder does, so shape errors surface at the node that causes
// them.
class GraphImporter {
 public:
  explicit GraphImporter(int64_t opset) : opset_(opset) {}

  absl::Status ImportInputs(const onnx::GraphProto& graph);
  absl::Status ImportInitializers(const onnx::GraphProto& graph);
  absl::Status ImportNode(const onnx::NodeProto& node);
  absl::StatusOr<ir::Function> Finish(const onnx::GraphProto& graph);

 private:
  using Converter = absl::Status (GraphImporter::*)(const onnx::NodeProto&);
  static const std::map<std::string, Converter>& Converters();

  absl::StatusOr<Expr> Emit(const std::string& name, Expr call);
  absl::StatusOr<Expr> EmitOp(const std::string& name, const std::string& op,
                              std::vector<Expr> args, ir::Attrs attrs = {});
  absl::StatusOr<Expr> Input(const onnx::NodeProto& node, int index);
  bool HasInput(const onnx::NodeProto& node, int index) const;
  absl::StatusOr<const ir::NDArray*> ConstantInput(const onnx::NodeProto& node, int index);
  void Define(const std::string& name, Expr value) { values_[name] = std::move(value); }
  Expr ScalarConstant(double value, arith::DataType dtype);
  absl::StatusOr<Expr> Reshape(const std::string& name, Expr data, std::vector<PrimExpr> shape);
  std::string FreshName(const std::string& base);

  absl::Status ConvertBinary(const onnx::NodeProto& node);
  absl::Status ConvertUnary(const onnx::NodeProto& node);
  absl::Status ConvertMatMul(const onnx::NodeProto& node);
  absl::Status ConvertGemm(const onnx::NodeProto& node);
  absl::Status ConvertSoftmax(const onnx::NodeProto& node);
  absl::Status ConvertReshape(const onnx::NodeProto& node);
  absl::Status ConvertFlatten(const onnx::NodeProto& node);
  absl::Status ConvertTranspose(const onnx::NodeProto& node);
  absl::Status ConvertConstant(const onnx::NodeProto& node);
  absl::Status ConvertIdentity(const onnx::NodeProto& node);

  int64_t opset_;
  arith::Analyzer analyzer_;
  std::map<std::string, Expr> values_;        // ONNX value name -> IR value
  std::map<std::string, PrimExpr> dim_vars_;  // dim_param -> symbolic variable
  std::set<std::string> used_names_;
  std::vector<Expr> params_;
  std::vector<std::string> input_names_;
  std::vector<ir::Binding> bindings_;
};

absl::Status NodeError(int index, const onnx::NodeProto& node, const std::string& reason) {
  return absl::InvalidArgumentError(
      absl::StrCat("node ", index, " '", node.name(), "' (op ", node.op_type(), "): ", reason));
}

std::string SanitizeName(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "v" + out;
  return out;
}

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& attr : node.attribute()) {
    if (attr.name() == name) return &attr;
  }
  return nullptr;
}

int64_t IntAttr(const onnx::NodeProto& node, const std::string& name, int64_t fallback) {
  const onnx::AttributeProto* attr = FindAttr(node, name);
  return attr ? attr->i() : fallback;
}

float FloatAttr(const onnx::NodeProto& node, const std::string& name, float fallback) {
  const onnx::AttributeProto* attr = FindAttr(node, name);
  return attr ? attr->f() : fallback;
}

std::string GraphFunctionName() { return "main"; }

}  // namespace

std::string GraphImporter::FreshName(const std::string& base) {
  std::string name = SanitizeName(base);
  std::string candidate = name;
  for (int i = 1; used_names_.count(candidate); ++i) candidate = absl::StrCat(name, "_", i);
  used_names_.insert(candidate);
  return candidate;
}

absl::Status GraphImporter::ImportInputs(const onnx::GraphProto& graph) {
  std::set<std::string> initializers;
  for (const auto& init : graph.initializer()) initializers.insert(init.name());
  for (const auto& input : graph.input()) {
    if (initializers.count(input.name())) continue;  // a weight with a default value
    if (!input.type().has_tensor_type()) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph input '", input.name(), "' is not a tensor"));
    }
    const auto& tensor_type = input.type().tensor_type();
    KILN_ASSIGN_OR_RETURN(arith::DataType dtype, DataTypeFromOnnx(tensor_type.elem_type()));
    if (!tensor_type.has_shape()) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph input '", input.name(), "' has no shape; its rank must be known"));
    }
    std::vector<PrimExpr> shape;
    for (int d = 0; d < tensor_type.shape().dim_size(); ++d) {
      const auto& dim = tensor_type.shape().dim(d);
      if (dim.has_dim_value()) {
        shape.push_back(arith::IntImm(dim.dim_value()));
        continue;
      }
      std::string param = dim.has_dim_param() && !dim.dim_param().empty()
                              ? dim.dim_param()
                              : absl::StrCat(input.name(), "_dim", d);
      auto [it, inserted] = dim_vars_.try_emplace(param);
      if (inserted) it->second = arith::MakeVar(SanitizeName(param));
      shape.push_back(it->second);
    }
    Expr param = ir::MakeVar(FreshName(input.name()), StructInfo::Tensor(shape, dtype));
    params_.push_back(param);
    Define(input.name(), param);
    input_names_.push_back(input.name());
  }
  return absl::OkStatus();
}

absl::Status GraphImporter::ImportInitializers(const onnx::GraphProto& graph) {
  for (const auto& init : graph.initializer()) {
    auto array = NDArrayFromTensorProto(init);
    if (!array.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("initializer '", init.name(), "': ", std::string(array.status().message())));
    }
    Define(init.name(), ir::MakeConstant(*std::move(array)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Expr> GraphImporter::Emit(const std::string& name, Expr call) {
  auto info = op::InferStructInfo(*call, analyzer_);
  if (!info.ok()) return info.status();
  ir::ExprNode normalized = *call;
  normalized.struct_info = *info;
  Expr value = std::make_shared<const ir::ExprNode>(std::move(normalized));
  Expr var = ir::MakeVar(FreshName(name), *info);
  bindings_.push_back({var, value});
  return var;
}

absl::StatusOr<Expr> GraphImporter::EmitOp(const std::string& name, const std::string& op,
                                           std::vector<Expr> args, ir::Attrs attrs) {
  return Emit(name, ir::MakeCall(op, std::move(args), std::move(attrs)));
}

bool GraphImporter::HasInput(const onnx::NodeProto& node, int index) const {
  return index < node.input_size() && !node.input(index).empty();
}

absl::StatusOr<Expr> GraphImporter::Input(const onnx::NodeProto& node, int index) {
  if (!HasInput(node, index)) {
    return absl::InvalidArgumentError(absl::StrCat("missing input ", index));
  }
  auto it = values_.find(node.input(index));
  if (it == values_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", index, " '", node.input(index), "' is not defined before use"));
  }
  return it->second;
}

absl::StatusOr<const ir::NDArray*> GraphImporter::ConstantInput(const onnx::NodeProto& node,
                                                                int index) {
  KILN_ASSIGN_OR_RETURN(Expr value, Input(node, index));
  if (value->kind != ir::ExprKind::kConstant) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input ", index, " '", node.input(index),
        "' must be a constant (values computed at run time are not supported here yet)"));
  }
  return value->data.get();
}

Expr GraphImporter::ScalarConstant(double value, arith::DataType dtype) {
  ir::NDArray a = ir::NDArray::Zeros(dtype, {});
  a.SetDouble(0, value);
  return ir::MakeConstant(std::move(a));
}

absl::StatusOr<Expr> GraphImporter::Reshape(const std::string& name, Expr data,
                                            std::vector<PrimExpr> shape) {
  return EmitOp(name, "reshape", {std::move(data), ir::MakeShapeExpr(std::move(shape))});
}

const std::map<std::string, GraphImporter::Converter>& GraphImporter::Converters() {
  static const auto* converters = new std::map<std::string, Converter>{
      {"Add", &GraphImporter::ConvertBinary},
      {"Sub", &GraphImporter::ConvertBinary},
      {"Mul", &GraphImporter::ConvertBinary},
      {"Div", &GraphImporter::ConvertBinary},
      {"Relu", &GraphImporter::ConvertUnary},
      {"Sigmoid", &GraphImporter::ConvertUnary},
      {"Tanh", &GraphImporter::ConvertUnary},
      {"Exp", &GraphImporter::ConvertUnary},
      {"MatMul", &GraphImporter::ConvertMatMul},
      {"Gemm", &GraphImporter::ConvertGemm},
      {"Softmax", &GraphImporter::ConvertSoftmax},
      {"Reshape", &GraphImporter::ConvertReshape},
      {"Flatten", &GraphImporter::ConvertFlatten},
      {"Transpose", &GraphImporter::ConvertTranspose},
      {"Constant", &GraphImporter::ConvertConstant},
      {"Identity", &GraphImporter::ConvertIdentity},
  };
  return *converters;
}

absl::Status GraphImporter::ImportNode(const onnx::NodeProto& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported operator domain '", node.domain(), "'"));
  }
  auto it = Converters().find(node.op_type());
  if (it == Converters().end()) return absl::InvalidArgumentError("unsupported operator");
  if (node.output_size() < 1 || node.output(0).empty()) {
    return absl::InvalidArgumentError("node has no output");
  }
  return (this->*(it->second))(node);
}

absl::Status GraphImporter::ConvertBinary(const onnx::NodeProto& node) {
  static const std::map<std::string, std::string> ops = {
      {"Add", "add"}, {"Sub", "subtract"}, {"Mul", "multiply"}, {"Div", "divide"}};
  KILN_ASSIGN_OR_RETURN(Expr a, Input(node, 0));
  KILN_ASSIGN_OR_RETURN(Expr b, Input(node, 1));
  KILN_ASSIGN_OR_RETURN(Expr out, EmitOp(node.output(0), ops.at(node.op_type()), {a, b}));
  Define(node.output(0), out);
  return absl::OkStatus();
}

absl::Status GraphImporter::ConvertUnary(const onnx::NodeProto& node) {
  static const std::map<std::string, std::string> ops = {
      {"Relu", "relu"}, {"Sigmoid", "sigmoid"}, {"Tanh", "tanh"}, {"Exp", "exp"}};
  KILN_ASSIGN_OR_RETURN(Expr x, Input(node, 0));
  KILN_ASSIGN_OR_RETURN(Expr out, EmitOp(node.output(0), ops.at(node.op_type()), {x}));
  Define(node.output(0), out);
  return absl::OkStatus();
}

absl::Status GraphImporter::ConvertMatMul(const onnx::NodeProto& node) {
  KILN_ASSIGN_OR_RETURN(Expr a, Input(node, 0));
  KILN_ASSIGN_OR_RETURN(Expr b, Input(node, 1));
  KILN_ASSIGN_OR_RETURN(Expr out, EmitOp(node.output(0), "matmul", {a, b}));
  Define(node.output(0), out);
  return absl::OkStatus();
}

// Gemm: Y = alpha * op(A) @ op(B) + beta * C, op being an optional transpose.
absl::Status GraphImporter::ConvertGemm(const onnx::NodeProto& node) {
  const std::string& name = node.output(0);
  KILN_ASSIGN_OR_RETURN(Expr a, Input(node, 0));
  KILN_ASSIGN_OR_RETURN(Expr b, Input(node, 1));
  ir::Attrs swap = {{"perm", std::vector<int64_t>{1, 0}}};
  if (IntAttr(node, "transA", 0)) {
    KILN_ASSIGN_OR_RETURN(a, EmitOp(name + "_a_t", "transpose", {a}, swap));
  }
  if (IntAttr(node, "transB", 0)) {
    KILN_ASSIGN_OR_RETURN(b, EmitOp(name + "_b_t", "transpose", {b}, swap));
  }
  arith::DataType dtype = a->struct_info.dtype;
  float alpha = FloatAttr(node, "alpha", 1.0f), beta = FloatAttr(node, "beta", 1.0f);
  bool has_c = HasInput(node, 2) && beta != 0.0f;
  bool scaled = alpha != 1.0f;
  KILN_ASSIGN_OR_RETURN(Expr y, EmitOp(scaled || has_c ? name + "_mm" : name, "matmul", {a, b}));
  if (scaled) {
    KILN_ASSIGN_OR_RETURN(
        y, EmitOp(has_c ? name + "_scaled" : name, "multiply", {y, ScalarConstant(alpha, dtype)}));
  }
  if (has_c) {
    KILN_ASSIGN_OR_RETURN(Expr c, Input(node, 2));
    if (beta != 1.0f) {
      KILN_ASSIGN_OR_RETURN(c, EmitOp(name + "_c", "multiply", {c, ScalarConstant(beta, dtype)}));
    }
    KILN_ASSIGN_OR_RETURN(y, EmitOp(name, "add", {y, c}));
  }
  Define(name, y);
  return absl::OkStatus();
}

static PrimExpr Product(const std::vector<PrimExpr>& dims, size_t begin, size_t end) {
  PrimExpr p = arith::IntImm(1);
  for (size_t i = begin; i < end; ++i) p = p * dims[i];
  return p;
}

// Opset 13 made Softmax act on one axis; before, it flattened [axis, rank) into one.
absl::Status GraphImporter::ConvertSoftmax(const onnx::NodeProto& node) {
  const std::string& name = node.output(0);
  KILN_ASSIGN_OR_RETURN(Expr x, Input(node, 0));
  int64_t rank = x->struct_info.ndim;
  int64_t axis = IntAttr(node, "axis", opset_ >= 13 ? -1 : 1);
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " out of range for rank ", rank));
  }
  if (axis < 0) axis += rank;
  if (opset_ >= 13 || axis == rank - 1) {
    KILN_ASSIGN_OR_RETURN(Expr y, EmitOp(name, "softmax", {x}, {{"axis", axis}}));
    Define(name, y);
    return absl::OkStatus();
  }
  const std::vector<PrimExpr>& dims = *x->struct_info.shape;
  PrimExpr outer = analyzer_.Simplify(Product(dims, 0, axis));
  PrimExpr inner = analyzer_.Simplify(Product(dims, axis, dims.size()));
  KILN_ASSIGN_OR_RETURN(Expr flat, Reshape(name + "_2d", x, {outer, inner}));
  KILN_ASSIGN_OR_RETURN(Expr soft,
                        EmitOp(name + "_softmax", "softmax", {flat}, {{"axis", int64_t{1}}}));
  KILN_ASSIGN_OR_RETURN(Expr y, Reshape(name, soft, dims));
  Define(name, y);
  return absl::OkStatus();
}

absl::Status GraphImporter::ConvertReshape(const onnx::NodeProto& node) {
  KILN_ASSIGN_OR_RETURN(Expr x, Input(node, 0));
  KILN_ASSIGN_OR_RETURN(const ir::NDArray* target, ConstantInput(node, 1));
  if (!target->dtype.is_int() || target->shape.size() != 1) {
    return absl::InvalidArgumentError("shape input must be a 1-D integer tensor");
  }
  const std::vector<PrimExpr>& in = *x->struct_info.shape;
  bool allow_zero = IntAttr(node, "allowzero", 0) != 0;
  std::vector<PrimExpr> out;
  int infer_at = -1;
  PrimExpr known = arith::IntImm(1);
  for (int64_t i = 0; i < target->num_elements(); ++i) {
    int64_t v = target->GetInt(i);
    if (v == -1) {
      if (infer_at >= 0) return absl::InvalidArgumentError("shape has more than one -1");
      infer_at = static_cast<int>(i);
      out.push_back(nullptr);
      continue;
    }
    if (v == 0 && !allow_zero) {
      if (i >= static_cast<int64_t>(in.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("shape entry ", i, " is 0 but the input has rank ", in.size()));
      }
      out.push_back(in[i]);
    } else if (v < 0) {
      return absl::InvalidArgumentError(absl::StrCat("shape entry ", i, " is ", v));
    } else {
      out.push_back(arith::IntImm(v));
    }
    known = known * out.back();
  }
  if (infer_at >= 0) {
    PrimExpr total = Product(in, 0, in.size());
    out[infer_at] = analyzer_.Simplify(arith::FloorDiv(total, analyzer_.Simplify(known)));
  }
  KILN_ASSIGN_OR_RETURN(Expr y, Reshape(node.output(0), x, out));
  Define(node.output(0), y);
  return absl::OkStatus();
}

absl::Status GraphImporter::ConvertFlatten(const onnx::NodeProto& node) {
  KILN_ASSIGN_OR_RETURN(Expr x, Input(node, 0));
  const std::vector<PrimExpr>& dims = *x->struct_info.shape;
  int64_t rank = dims.size();
  int64_t axis = IntAttr(node, "axis", 1);
  if (axis < -rank || axis > rank) {
    return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " out of range for rank ", rank));
  }
  if (axis < 0) axis += rank;
  std::vector<PrimExpr> shape = {analyzer_.Simplify(Product(dims, 0, axis)),
                                 analyzer_.Simplify(Product(dims, axis, rank))};
  KILN_ASSIGN_OR_RETURN(Expr y, Reshape(node.output(0), x, shape));
  Define(node.output(0), y);
  return absl::OkStatus();
}

absl::Status GraphImporter::ConvertTranspose(const onnx::NodeProto& node) {
  KILN_ASSIGN_OR_RETURN(Expr x, Input(node, 0));
  std::vector<int64_t> perm;
  if (const onnx::AttributeProto* attr = FindAttr(node, "perm")) {
    perm.assign(attr->ints().begin(), attr->ints().end());
  } else {
    for (int64_t i = x->struct_info.ndim - 1; i >= 0; --i) perm.push_back(i);
  }
  KILN_ASSIGN_OR_RETURN(Expr y, EmitOp(node.output(0), "transpose", {x}, {{"perm", perm}}));
  Define(node.output(0), y);
  return absl::OkStatus();
}

absl::Status GraphImporter::ConvertConstant(const onnx::NodeProto& node) {
  if (node.attribute_size() != 1) {
    return absl::InvalidArgumentError("Constant needs exactly one value attribute");
  }
  KILN_ASSIGN_OR_RETURN(ir::NDArray value, NDArrayFromConstantAttr(node.attribute(0)));
  Define(node.output(0), ir::MakeConstant(std::move(value)));
  return absl::OkStatus();
}

absl::Status GraphImporter::ConvertIdentity(const onnx::NodeProto& node) {
  KILN_ASSIGN_OR_RETURN(Expr x, Input(node, 0));
  Define(node.output(0), x);
  return absl::OkStatus();
}

absl::StatusOr<ir::Function> GraphImporter::Finish(const onnx::GraphProto& graph) {
  if (graph.output_size() == 0) return absl::InvalidArgumentError("the graph has no outputs");
  std::vector<Expr> results;
  std::set<const ir::ExprNode*> produced;
  for (const auto& output : graph.output()) {
    auto it = values_.find(output.name());
    if (it == values_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output '", output.name(), "' is never computed"));
    }
    Expr value = it->second;
    // Every output gets its own freshly computed buffer: a graph input, a constant or a value
    // already returned is copied, so the artifact can write outputs in place.
    bool computed = false;
    for (const ir::Binding& b : bindings_) computed |= b.var == value;
    if (!computed || produced.count(value.get())) {
      KILN_ASSIGN_OR_RETURN(value, EmitOp(output.name(), "copy", {value}));
    }
    produced.insert(value.get());
    results.push_back(value);
  }
  ir::Function func;
  func.name = GraphFunctionName();
  func.params = params_;
  func.input_names = input_names_;
  for (const auto& output : graph.output()) func.output_names.push_back(output.name());
  func.blocks.push_back({.dataflow = true, .bindings = std::move(bindings_)});
  func.result = results.size() == 1 ? results[0] : ir::MakeTuple(results);
  return func;
}

absl::StatusOr<ir::IRModule> ImportOnnx(std::string_view model_bytes) {
  onnx::ModelProto model;
  if (model_bytes.empty() ||
      !model.ParseFromArray(model_bytes.data(), static_cast<int>(model_bytes.size()))) {
    return absl::InvalidArgumentError(absl::StrCat("not an ONNX model: ", model_bytes.size(),
                                                   " bytes that do not parse as a ModelProto"));
  }
  if (!model.has_graph() || model.graph().node_size() + model.graph().output_size() == 0) {
    return absl::InvalidArgumentError("not an ONNX model: it has no graph");
  }
  int64_t opset = 0;
  for (const auto& entry : model.opset_import()) {
    if (entry.domain().empty() || entry.domain() == "ai.onnx") opset = entry.version();
  }
  if (opset < 7) {
    return absl::InvalidArgumentError(
        absl::StrCat("ONNX opset ", opset, " is not supported; Kiln reads opsets 7 and later"));
  }
  const onnx::GraphProto& graph = model.graph();
  GraphImporter importer(opset);
  KILN_RETURN_IF_ERROR(importer.ImportInitializers(graph));
  KILN_RETURN_IF_ERROR(importer.ImportInputs(graph));
  for (int i = 0; i < graph.node_size(); ++i) {
    absl::Status status = importer.ImportNode(graph.node(i));
    if (!status.ok()) return NodeError(i, graph.node(i), std::string(status.message()));
  }
  KILN_ASSIGN_OR_RETURN(ir::Function main, importer.Finish(graph));
  ir::IRModule module;
  module.functions.emplace(main.name, std::move(main));
  return module;
}

}  // namespace kiln::frontend
