#include "compiler/interp/interpreter.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/arith/check.h"
#include "compiler/interp/control.h"
#include "compiler/interp/kernels.h"

namespace kiln::interp {
namespace {

using arith::PrimExpr;

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

class Interpreter {
 public:
  explicit Interpreter(const ir::IRModule& module) : module_(module) {}

  absl::StatusOr<Value> Call(const ir::Function& func, const std::vector<Value>& args) {
    if (args.size() != func.params.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "function ", func.name, " takes ", func.params.size(), " inputs, got ", args.size()));
    }
    // A function's symbolic vars are its own: a loop body binds them anew on every call.
    for (const ir::Expr& param : func.params) ForgetSymbols(param->struct_info);
    for (size_t i = 0; i < args.size(); ++i) {
      std::string what = absl::StrCat(
          "input '", i < func.input_names.size() ? func.input_names[i] : func.params[i]->name, "'");
      KILN_RETURN_IF_ERROR(MatchStructInfo(func.params[i]->struct_info, args[i], what));
      env_[func.params[i].get()] = args[i];
    }
    for (const ir::BindingBlock& block : func.blocks) {
      for (const ir::Binding& binding : block.bindings) {
        KILN_ASSIGN_OR_RETURN(Value v, Eval(binding.value));
        // Values read from a tensor are new on every run of a loop body.
        if (IsTensorToShape(*binding.value)) ForgetSymbols(binding.var->struct_info);
        std::string what = absl::StrCat("value %", binding.var->name);
        absl::Status matched = MatchStructInfo(binding.var->struct_info, v, what);
        if (!matched.ok()) {
          // A match_cast checks what the model promised; elsewhere a mismatch means shape
          // inference and the kernel disagree, which is Kiln's bug, not the user's.
          if (binding.match_cast) return matched;
          return absl::InternalError(
              absl::StrCat("struct info disagrees with the reference: ", matched.message()));
        }
        env_[binding.var.get()] = std::move(v);
      }
    }
    return Eval(func.result);
  }

  absl::StatusOr<Value> Eval(const ir::Expr& e) {
    switch (e->kind) {
      case ir::ExprKind::kVar: {
        auto it = env_.find(e.get());
        KILN_CHECK(it != env_.end()) << "variable %" << e->name << " used before definition";
        return it->second;
      }
      case ir::ExprKind::kConstant:
        return Value(*e->data);
      case ir::ExprKind::kTuple: {
        std::vector<Value> fields;
        for (const ir::Expr& arg : e->args) {
          KILN_ASSIGN_OR_RETURN(Value v, Eval(arg));
          fields.push_back(std::move(v));
        }
        return Value::Tuple(std::move(fields));
      }
      case ir::ExprKind::kTupleGetItem: {
        KILN_ASSIGN_OR_RETURN(Value t, Eval(e->args[0]));
        KILN_CHECK(!t.is_tensor() && e->index < static_cast<int>(t.fields().size()))
            << "tuple index " << e->index << " out of range";
        return t.fields()[e->index];
      }
      case ir::ExprKind::kShapeExpr:
        return EvalShape(e->values);
      case ir::ExprKind::kIf: {
        KILN_ASSIGN_OR_RETURN(Value cond, Eval(e->args[0]));
        if (!cond.is_tensor() || cond.tensor().num_elements() != 1) {
          return absl::InvalidArgumentError("if: the condition must be a single boolean");
        }
        // Branches see the enclosing scope's variables: they run in this interpreter.
        return Call(*e->subgraphs[cond.tensor().GetInt(0) ? 0 : 1], {});
      }
      case ir::ExprKind::kCall:
        return EvalCall(*e);
    }
    return absl::InternalError("unknown expression kind");
  }

 private:
  static bool IsTensorToShape(const ir::ExprNode& value) {
    return value.kind == ir::ExprKind::kCall && value.name == "tensor_to_shape";
  }

  void ForgetSymbols(const ir::StructInfo& info) {
    for (const ir::StructInfo& f : info.fields) ForgetSymbols(f);
    if (!info.shape) return;
    for (const PrimExpr& d : *info.shape) {
      for (const PrimExpr& v : arith::FreeVars(d)) symbols_.erase(v.get());
    }
  }

  absl::StatusOr<Value> EvalCall(const ir::ExprNode& call) {
    std::vector<Value> args;
    for (const ir::Expr& arg : call.args) {
      KILN_ASSIGN_OR_RETURN(Value v, Eval(arg));
      args.push_back(std::move(v));
    }
    if (call.subgraphs.empty()) return EvaluateCall(call, args);
    FunctionRunner run = [this](const ir::Function& f, const std::vector<Value>& in) {
      return Call(f, in);
    };
    if (call.name == "loop") return RunLoop(call, args, run);
    if (call.name == "scan") return RunScan(call, args, run);
    return absl::UnimplementedError("op " + call.name + " with subgraphs");
  }

  absl::StatusOr<int64_t> EvalDim(const PrimExpr& dim) {
    return arith::EvaluateInt(dim, [&](const arith::ExprNode& var) -> std::optional<int64_t> {
      auto it = symbols_.find(&var);
      if (it == symbols_.end()) return std::nullopt;
      return it->second;
    });
  }

  absl::StatusOr<Value> EvalShape(const std::vector<PrimExpr>& values) {
    ir::NDArray out = ir::NDArray::Zeros(arith::DataType::Int(64), {int64_t(values.size())});
    for (size_t i = 0; i < values.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(out.data<int64_t>()[i], EvalDim(values[i]));
    }
    return Value(std::move(out));
  }

  // Checks a value against struct info, binding symbolic vars met for the first time.
  absl::Status MatchStructInfo(const ir::StructInfo& info, const Value& v,
                               const std::string& what) {
    if (info.kind == ir::StructInfo::Kind::kTuple) {
      if (v.is_tensor() || v.fields().size() != info.fields.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": expected a tuple of ", info.fields.size()));
      }
      for (size_t i = 0; i < info.fields.size(); ++i) {
        KILN_RETURN_IF_ERROR(
            MatchStructInfo(info.fields[i], v.fields()[i], absl::StrCat(what, ".", i)));
      }
      return absl::OkStatus();
    }
    if (info.kind == ir::StructInfo::Kind::kShape) return MatchShapeValues(info, v, what);
    if (!info.is_tensor()) return absl::OkStatus();
    if (!v.is_tensor())
      return absl::InvalidArgumentError(absl::StrCat(what, ": expected a tensor"));
    const ir::NDArray& t = v.tensor();
    if (t.dtype != info.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": expected dtype ", info.dtype.ToString(), ", got ", t.dtype.ToString()));
    }
    if (info.ndim >= 0 && info.ndim != static_cast<int>(t.shape.size())) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": expected rank ", info.ndim, ", got ",
                                                     t.shape.size(), " (shape ", ShapeText(t.shape),
                                                     ")"));
    }
    if (!info.shape) return absl::OkStatus();
    return MatchDims(*info.shape, t.shape, what);
  }

  // A shape travels as a 1-D i64 tensor; its values bind and check symbolic vars as dims do
  // (match_cast of tensor_to_shape binds the values of a run-time tensor this way).
  absl::Status MatchShapeValues(const ir::StructInfo& info, const Value& v,
                                const std::string& what) {
    if (!v.is_tensor() || v.tensor().shape.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": expected a shape"));
    }
    const ir::NDArray& t = v.tensor();
    if (info.ndim >= 0 && info.ndim != t.shape[0]) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": expected ", info.ndim, " values, got ", t.shape[0]));
    }
    if (!info.shape) return absl::OkStatus();
    std::vector<int64_t> values(t.shape[0]);
    for (int64_t i = 0; i < t.shape[0]; ++i) values[i] = t.GetInt(i);
    return MatchDims(*info.shape, values, what);
  }

  absl::Status MatchDims(const std::vector<PrimExpr>& dims, const std::vector<int64_t>& actual,
                         const std::string& what) {
    // Plain variables bind first, so that compound dims (n * 2) can be checked after.
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d]->kind == arith::ExprKind::kVar) symbols_.try_emplace(dims[d].get(), actual[d]);
    }
    for (size_t d = 0; d < dims.size(); ++d) {
      auto expected = EvalDim(dims[d]);
      if (!expected.ok()) continue;  // a var no input binds: nothing to check against
      if (*expected != actual[d]) {
        std::string sym = dims[d]->kind == arith::ExprKind::kIntImm
                              ? ""
                              : absl::StrCat(" (", arith::ToString(dims[d]), ")");
        return absl::InvalidArgumentError(absl::StrCat(what, " dimension ", d, sym, ": expected ",
                                                       *expected, ", got ", actual[d]));
      }
    }
    return absl::OkStatus();
  }

  const ir::IRModule& module_;
  std::map<const ir::ExprNode*, Value> env_;
  std::map<const arith::ExprNode*, int64_t> symbols_;
};

}  // namespace

absl::Status KernelError(const ir::ExprNode& call, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("op ", call.name, ": ", message));
}

const KernelFn* FindKernel(std::string_view op) {
  static const KernelTable* table = [] {
    auto* t = new KernelTable;
    RegisterElementwiseKernels(*t);
    RegisterTensorKernels(*t);
    RegisterNNKernels(*t);
    RegisterReduceKernels(*t);
    RegisterImageKernels(*t);
    RegisterControlKernels(*t);
    return t;
  }();
  auto it = table->find(op);
  return it == table->end() ? nullptr : &it->second;
}

absl::StatusOr<Value> EvaluateCall(const ir::ExprNode& call, const std::vector<Value>& args) {
  const KernelFn* kernel = FindKernel(call.name);
  if (!kernel) {
    return absl::UnimplementedError(
        absl::StrCat("the reference interpreter has no kernel for op ", call.name));
  }
  return (*kernel)(call, args);
}

absl::StatusOr<std::vector<ir::NDArray>> Run(const ir::IRModule& module,
                                             const std::vector<ir::NDArray>& inputs,
                                             const std::string& function) {
  auto it = module.functions.find(function);
  if (it == module.functions.end()) {
    return absl::InvalidArgumentError(absl::StrCat("module has no function ", function));
  }
  std::vector<Value> args(inputs.begin(), inputs.end());
  Interpreter interpreter(module);
  KILN_ASSIGN_OR_RETURN(Value result, interpreter.Call(it->second, args));
  std::vector<ir::NDArray> outputs;
  if (result.is_tensor()) {
    outputs.push_back(std::move(result.tensor()));
    return outputs;
  }
  for (const Value& field : result.fields()) {
    if (!field.is_tensor()) return absl::UnimplementedError("nested tuple outputs");
    outputs.push_back(field.tensor());
  }
  return outputs;
}

}  // namespace kiln::interp
