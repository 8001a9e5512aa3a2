#include "compiler/frontend/onnx_importer.h"

#include <climits>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/import_context.h"
#include "compiler/frontend/onnx_tensor.h"
#include "compiler/interp/interpreter.h"
#include "compiler/op/op_def.h"
#include "compiler/op/registry.h"

namespace kiln::frontend {

using arith::PrimExpr;
using ir::Expr;
using ir::StructInfo;

namespace {

const ConverterTable& Converters() {
  static const ConverterTable* table = [] {
    auto* t = new ConverterTable;
    RegisterElementwiseConverters(*t);
    RegisterTensorConverters(*t);
    RegisterNNConverters(*t);
    RegisterReduceConverters(*t);
    RegisterImageConverters(*t);
    RegisterControlConverters(*t);
    return t;
  }();
  return *table;
}

std::string SanitizeName(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "v" + out;
  return out;
}

// Builds `main` binding by binding, as Relax's BlockBuilder does: each emitted call is
// normalized (struct info inferred) on the spot, and folded when its operands are constants.
class GraphImporter : public ImportContext {
 public:
  explicit GraphImporter(int64_t opset, GraphImporter* parent = nullptr)
      : opset_(opset), parent_(parent) {}

  absl::Status ImportInitializers(const onnx::GraphProto& graph);
  absl::Status ImportInputs(const onnx::GraphProto& graph);
  absl::Status ImportNode(const onnx::NodeProto& node);
  absl::StatusOr<ir::Function> Finish(const onnx::GraphProto& graph);

  // ImportContext
  const onnx::NodeProto& node() const override { return *node_; }
  int64_t opset() const override { return opset_; }
  const arith::Analyzer& analyzer() const override { return analyzer_; }
  absl::StatusOr<Expr> Input(int i) override;
  bool HasInput(int i) const override {
    return i < node_->input_size() && !node_->input(i).empty();
  }
  absl::StatusOr<Expr> OptionalInput(int i) override {
    return HasInput(i) ? Input(i) : absl::StatusOr<Expr>(ir::MakeNone());
  }
  absl::StatusOr<const ir::NDArray*> ConstantInput(int i) override;
  const ir::NDArray* ConstantValue(const Expr& value) const override {
    return value->kind == ir::ExprKind::kConstant ? value->data.get() : nullptr;
  }
  std::optional<std::vector<PrimExpr>> SymbolicValue(const Expr& value) const override;
  void SetSymbolicValue(const Expr& value, std::vector<PrimExpr> elements) override {
    symbolic_values_[value.get()] = std::move(elements);
  }
  const onnx::AttributeProto* Attr(const std::string& name) const override;
  absl::StatusOr<Expr> Emit(const std::string& op, std::vector<Expr> args, ir::Attrs attrs,
                            const std::string& name_hint) override;
  absl::StatusOr<Expr> EmitCall(Expr call, const std::string& name_hint) override;
  absl::StatusOr<std::shared_ptr<const ir::Function>> ImportSubgraph(
      const onnx::GraphProto& graph, const std::vector<StructInfo>& param_infos) override;
  absl::StatusOr<Expr> Bind(Expr value, const std::string& name_hint) override {
    Expr var = ir::MakeVar(FreshName(name_hint), value->struct_info);
    bindings_.push_back({var, value});
    return var;
  }
  absl::StatusOr<std::vector<PrimExpr>> BindRuntimeValues(const Expr& value,
                                                          const std::string& name_hint) override {
    return BindValues(ir::MakeCall("tensor_to_shape", {value}), name_hint);
  }
  absl::StatusOr<std::vector<PrimExpr>> BindScaledExtents(const Expr& scales,
                                                          const std::vector<PrimExpr>& dims,
                                                          const std::string& name_hint) override {
    return BindValues(ir::MakeCall("tensor_to_shape", {scales, ir::MakeShapeExpr(dims)}),
                      name_hint);
  }
  void CheckAtRunTime(const PrimExpr& actual, const PrimExpr& expected,
                      const std::string& name_hint) override {
    StructInfo info = StructInfo::Shape({expected});
    bindings_.push_back({ir::MakeVar(FreshName(name_hint), info), ir::MakeShapeExpr({actual}),
                         /*match_cast=*/true});
  }
  void SetOutput(int i, Expr value) override {
    if (i < node_->output_size() && !node_->output(i).empty()) values_[node_->output(i)] = value;
  }

 private:
  std::string FreshName(const std::string& base);
  // The value an ONNX name refers to here or, for a subgraph, in an enclosing graph.
  const Expr* Lookup(const std::string& name) const;
  std::string BindingName(const std::string& name_hint, const std::string& fallback) const;
  absl::StatusOr<ir::Function> FinishSubgraph(const onnx::GraphProto& graph);
  absl::StatusOr<Expr> Fold(const ir::ExprNode& call);
  Expr ForgetRuntimeDims(const Expr& call);
  absl::StatusOr<std::vector<PrimExpr>> BindValues(const Expr& to_shape,
                                                   const std::string& name_hint);

  int64_t opset_;
  GraphImporter* parent_;  // the enclosing graph's importer, for subgraphs
  const onnx::NodeProto* node_ = nullptr;
  arith::Analyzer analyzer_;
  std::map<std::string, Expr> values_;        // ONNX value name -> IR value
  std::map<std::string, PrimExpr> dim_vars_;  // dim_param -> symbolic variable
  std::map<const ir::ExprNode*, std::vector<PrimExpr>> symbolic_values_;
  std::set<std::string> used_names_;
  std::vector<Expr> params_;
  std::vector<std::string> input_names_;
  std::vector<ir::Binding> bindings_;
};

// Names are unique across the whole model, subgraphs included, so that a subgraph's
// bindings never shadow the variables it uses from enclosing scopes.
std::string GraphImporter::FreshName(const std::string& base) {
  if (parent_) return parent_->FreshName(base);
  std::string name = SanitizeName(base);
  std::string candidate = name;
  for (int i = 1; used_names_.count(candidate); ++i) candidate = absl::StrCat(name, "_", i);
  used_names_.insert(candidate);
  return candidate;
}

const Expr* GraphImporter::Lookup(const std::string& name) const {
  auto it = values_.find(name);
  if (it != values_.end()) return &it->second;
  return parent_ ? parent_->Lookup(name) : nullptr;
}

absl::Status GraphImporter::ImportInitializers(const onnx::GraphProto& graph) {
  for (const auto& init : graph.initializer()) {
    auto array = NDArrayFromTensorProto(init);
    if (!array.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("initializer '", init.name(), "': ", std::string(array.status().message())));
    }
    values_[init.name()] = ir::MakeConstant(*std::move(array));
  }
  return absl::OkStatus();
}

absl::Status GraphImporter::ImportInputs(const onnx::GraphProto& graph) {
  for (const auto& input : graph.input()) {
    if (values_.count(input.name())) continue;  // an initializer: a weight with a default
    if (!input.type().has_tensor_type()) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph input '", input.name(), "' is not a tensor"));
    }
    const auto& tensor_type = input.type().tensor_type();
    auto dtype = DataTypeFromOnnx(tensor_type.elem_type());
    if (!dtype.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("graph input '", input.name(),
                                                     "': ", std::string(dtype.status().message())));
    }
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
    Expr param = ir::MakeVar(FreshName(input.name()), StructInfo::Tensor(shape, *dtype));
    params_.push_back(param);
    values_[input.name()] = param;
    input_names_.push_back(input.name());
  }
  return absl::OkStatus();
}

absl::Status GraphImporter::ImportNode(const onnx::NodeProto& node) {
  node_ = &node;
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported operator domain '", node.domain(), "'"));
  }
  auto it = Converters().find(node.op_type());
  if (it == Converters().end()) return absl::InvalidArgumentError("unsupported operator");
  return it->second(*this);
}

absl::StatusOr<Expr> GraphImporter::Input(int i) {
  if (!HasInput(i)) return absl::InvalidArgumentError(absl::StrCat("missing input ", i));
  const Expr* value = Lookup(node_->input(i));
  if (!value) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", i, " '", node_->input(i), "' is not defined before use"));
  }
  return *value;
}

absl::StatusOr<const ir::NDArray*> GraphImporter::ConstantInput(int i) {
  KILN_ASSIGN_OR_RETURN(Expr value, Input(i));
  if (const ir::NDArray* data = ConstantValue(value)) return data;
  return absl::InvalidArgumentError(absl::StrCat(
      "input ", i, " '", node_->input(i),
      "' must be known at compile time; values computed at run time are not supported here"));
}

std::optional<std::vector<PrimExpr>> GraphImporter::SymbolicValue(const Expr& value) const {
  auto it = symbolic_values_.find(value.get());
  if (it != symbolic_values_.end()) return it->second;
  if (parent_) return parent_->SymbolicValue(value);
  const ir::NDArray* data = ConstantValue(value);
  if (!data || !data->dtype.is_int() || data->shape.size() > 1) return std::nullopt;
  std::vector<PrimExpr> out;
  for (int64_t i = 0; i < data->num_elements(); ++i) out.push_back(arith::IntImm(data->GetInt(i)));
  return out;
}

const onnx::AttributeProto* GraphImporter::Attr(const std::string& name) const {
  for (const auto& attr : node_->attribute()) {
    if (attr.name() == name) return &attr;
  }
  return nullptr;
}

// Evaluates a call whose operands are all constants. Ops the interpreter cannot run yet
// stay as calls: folding is an optimization, never a requirement.
absl::StatusOr<Expr> GraphImporter::Fold(const ir::ExprNode& call) {
  std::vector<interp::Value> args;
  for (const Expr& arg : call.args) {
    if (ir::IsNone(arg)) {
      args.emplace_back();
      continue;
    }
    const ir::NDArray* data = ConstantValue(arg);
    if (!data) return nullptr;
    args.emplace_back(*data);
  }
  if (call.struct_info.kind != ir::StructInfo::Kind::kTensor) return nullptr;
  auto value = interp::EvaluateCall(call, args);
  if (!value.ok()) {
    if (value.status().code() == absl::StatusCode::kUnimplemented) return nullptr;
    return value.status();
  }
  if (!value->is_tensor()) return nullptr;
  return ir::MakeConstant(std::move(value->tensor()));
}

absl::StatusOr<Expr> GraphImporter::Emit(const std::string& op, std::vector<Expr> args,
                                         ir::Attrs attrs, const std::string& name_hint) {
  return EmitCall(ir::MakeCall(op, std::move(args), std::move(attrs)), name_hint);
}

std::string GraphImporter::BindingName(const std::string& name_hint,
                                       const std::string& fallback) const {
  if (!name_hint.empty()) return name_hint;
  if (node_ && node_->output_size() > 0 && !node_->output(0).empty()) return node_->output(0);
  return fallback;
}

absl::StatusOr<Expr> GraphImporter::EmitCall(Expr call, const std::string& name_hint) {
  KILN_CHECK(op::IsRegistered(call->name)) << "converter emits unregistered op " << call->name;
  absl::StatusOr<StructInfo> inferred = op::InferStructInfo(*call, analyzer_);
  if (!inferred.ok()) {
    if (Expr relaxed = ForgetRuntimeDims(call)) {
      call = relaxed;
      inferred = op::InferStructInfo(*call, analyzer_);
    }
  }
  KILN_ASSIGN_OR_RETURN(StructInfo info, std::move(inferred));
  ir::ExprNode normalized = *call;
  normalized.struct_info = info;
  if (normalized.subgraphs.empty()) {
    KILN_ASSIGN_OR_RETURN(Expr folded, Fold(normalized));
    if (folded) return folded;
  }
  Expr value = std::make_shared<const ir::ExprNode>(std::move(normalized));
  Expr var = ir::MakeVar(FreshName(BindingName(name_hint, call->name)), info);
  bindings_.push_back({var, value});
  return var;
}

// Dims computed from run-time values (BindRuntimeValues) are selects that inference cannot
// prove anything about (a matmul's inner dims, a broadcast). Where that makes inference fail,
// the call is retried on operands that keep only their rank, as before those values were
// followed: the kernel checks them at run time. nullptr when no operand has such dims.
Expr GraphImporter::ForgetRuntimeDims(const Expr& call) {
  ir::ExprNode relaxed = *call;
  bool changed = false;
  for (Expr& arg : relaxed.args) {
    const StructInfo& info = arg->struct_info;
    if (!info.is_tensor() || !info.shape || !op::DependsOnRuntimeValues(*info.shape)) continue;
    Expr alias =
        ir::MakeVar(FreshName(arg->name + "_rank"), StructInfo::TensorRank(info.ndim, info.dtype));
    bindings_.push_back({alias, arg});
    arg = alias;
    changed = true;
  }
  return changed ? std::make_shared<const ir::ExprNode>(std::move(relaxed)) : nullptr;
}

// `%name: Shape([name_0, ...]) = match_cast(to_shape, ...)` with fresh variables.
absl::StatusOr<std::vector<PrimExpr>> GraphImporter::BindValues(const Expr& to_shape,
                                                                const std::string& name_hint) {
  ir::ExprNode call = *to_shape;
  KILN_ASSIGN_OR_RETURN(call.struct_info, op::InferStructInfo(call, analyzer_));
  std::string name = FreshName(name_hint);
  std::vector<PrimExpr> vars;
  for (int i = 0; i < call.struct_info.ndim; ++i) {
    vars.push_back(arith::MakeVar(absl::StrCat(name, "_", i)));
  }
  Expr var = ir::MakeVar(name, StructInfo::Shape(vars));
  bindings_.push_back(
      {var, std::make_shared<const ir::ExprNode>(std::move(call)), /*match_cast=*/true});
  return vars;
}

// A subgraph becomes a Function whose params are the graph's inputs (struct info given by
// the converter, which knows what the op passes in) and whose result is the tuple of its
// outputs. It may use enclosing values directly.
absl::StatusOr<std::shared_ptr<const ir::Function>> GraphImporter::ImportSubgraph(
    const onnx::GraphProto& graph, const std::vector<StructInfo>& param_infos) {
  if (graph.input_size() != static_cast<int>(param_infos.size())) {
    return absl::InvalidArgumentError(absl::StrCat("subgraph '", graph.name(), "' has ",
                                                   graph.input_size(), " inputs, expected ",
                                                   param_infos.size()));
  }
  GraphImporter sub(opset_, this);
  KILN_RETURN_IF_ERROR(sub.ImportInitializers(graph));
  for (int i = 0; i < graph.input_size(); ++i) {
    Expr param = ir::MakeVar(FreshName(graph.input(i).name()), param_infos[i]);
    sub.params_.push_back(param);
    sub.values_[graph.input(i).name()] = param;
    sub.input_names_.push_back(graph.input(i).name());
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    absl::Status status = sub.ImportNode(graph.node(i));
    if (!status.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat("subgraph '", graph.name(), "' node ", i, " '", graph.node(i).name(),
                       "' (op ", graph.node(i).op_type(), "): ", std::string(status.message())));
    }
  }
  KILN_ASSIGN_OR_RETURN(ir::Function func, sub.FinishSubgraph(graph));
  return std::make_shared<const ir::Function>(std::move(func));
}

absl::StatusOr<ir::Function> GraphImporter::FinishSubgraph(const onnx::GraphProto& graph) {
  std::vector<Expr> results;
  for (const auto& output : graph.output()) {
    const Expr* value = Lookup(output.name());
    if (!value) {
      return absl::InvalidArgumentError(
          absl::StrCat("subgraph output '", output.name(), "' is never computed"));
    }
    results.push_back(*value);
  }
  ir::Function func;
  func.name = graph.name().empty() ? "subgraph" : SanitizeName(graph.name());
  func.params = params_;
  func.input_names = input_names_;
  for (const auto& output : graph.output()) func.output_names.push_back(output.name());
  func.blocks.push_back({.dataflow = true, .bindings = std::move(bindings_)});
  func.result = ir::MakeTuple(results);
  return func;
}

absl::StatusOr<ir::Function> GraphImporter::Finish(const onnx::GraphProto& graph) {
  if (graph.output_size() == 0) return absl::InvalidArgumentError("the graph has no outputs");
  node_ = nullptr;
  std::vector<Expr> results;
  std::set<const ir::ExprNode*> produced;
  std::set<const ir::ExprNode*> bound;
  for (const ir::Binding& b : bindings_) bound.insert(b.var.get());
  for (const auto& output : graph.output()) {
    auto it = values_.find(output.name());
    if (it == values_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output '", output.name(), "' is never computed"));
    }
    Expr value = it->second;
    // Every output gets its own freshly computed buffer: a graph input, a constant or a value
    // already returned is copied, so an artifact can write each output in place.
    if (!bound.count(value.get()) || produced.count(value.get())) {
      Expr call = ir::MakeCall("copy", {value});
      ir::ExprNode normalized = *call;
      normalized.struct_info = value->struct_info;
      Expr var = ir::MakeVar(FreshName(output.name()), value->struct_info);
      bindings_.push_back({var, std::make_shared<const ir::ExprNode>(std::move(normalized))});
      value = var;
    }
    produced.insert(value.get());
    results.push_back(value);
  }
  ir::Function func;
  func.name = "main";
  func.params = params_;
  func.input_names = input_names_;
  for (const auto& output : graph.output()) func.output_names.push_back(output.name());
  func.blocks.push_back({.dataflow = true, .bindings = std::move(bindings_)});
  func.result = results.size() == 1 ? results[0] : ir::MakeTuple(results);
  return func;
}

absl::Status NodeError(int index, const onnx::NodeProto& node, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("node ", index, " '", node.name(), "' (op ", node.op_type(),
                                   "): ", std::string(status.message())));
}

}  // namespace

absl::StatusOr<ir::IRModule> ImportOnnx(std::string_view model_bytes) {
  onnx::ModelProto model;
  if (model_bytes.size() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("not an ONNX model: ", model_bytes.size(),
                                                   " bytes, past protobuf's 2 GiB limit"));
  }
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
  if (opset < 1) {
    return absl::InvalidArgumentError("the model imports no version of the default ONNX domain");
  }
  const onnx::GraphProto& graph = model.graph();
  GraphImporter importer(opset);
  KILN_RETURN_IF_ERROR(importer.ImportInitializers(graph));
  KILN_RETURN_IF_ERROR(importer.ImportInputs(graph));
  for (int i = 0; i < graph.node_size(); ++i) {
    absl::Status status = importer.ImportNode(graph.node(i));
    if (!status.ok()) return NodeError(i, graph.node(i), status);
  }
  KILN_ASSIGN_OR_RETURN(ir::Function main, importer.Finish(graph));
  ir::IRModule module;
  module.functions.emplace(main.name, std::move(main));
  return module;
}

}  // namespace kiln::frontend
