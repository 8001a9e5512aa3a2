#include "compiler/transform/legalize.h"

#include <map>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "compiler/arith/analyzer.h"
#include "compiler/arith/check.h"
#include "compiler/ir/stmt_functor.h"
#include "compiler/transform/legalize_kernels.h"

namespace kiln::transform {

using arith::Buffer;
using arith::PrimExpr;
using ir::Stmt;

namespace {

const KernelBuilderTable& Builders() {
  static const KernelBuilderTable* table = [] {
    auto* t = new KernelBuilderTable;
    RegisterElementwiseKernelBuilders(*t);
    RegisterTensorKernelBuilders(*t);
    RegisterNNKernelBuilders(*t);
    RegisterReduceKernelBuilders(*t);
    RegisterImageKernelBuilders(*t);
    RegisterMultiOutputKernelBuilders(*t);
    RegisterRecurrentKernelBuilders(*t);
    RegisterSignalKernelBuilders(*t);
    RegisterTextKernelBuilders(*t);
    RegisterDataDependentKernelBuilders(*t);
    return t;
  }();
  return *table;
}

absl::StatusOr<Stmt> KernelBody(const KernelContext& k) {
  auto it = Builders().find(k.call.name);
  if (it == Builders().end()) {
    return absl::UnimplementedError(absl::StrCat("no loop-level definition for op ", k.call.name));
  }
  return it->second(k);
}

absl::StatusOr<Buffer> TensorBuffer(const ir::ExprNode& call, const std::string& name,
                                    const ir::StructInfo& info) {
  if (!info.is_tensor() || !info.shape) {
    return absl::UnimplementedError(absl::StrCat(
        "op ", call.name, ": operand ", name, " is ", ir::ToString(info),
        "; only tensors with shapes known at compile time (symbolic or not) are compiled yet"));
  }
  return arith::MakeBuffer(name, info.dtype, *info.shape);
}

// One buffer per result: "out" for a tensor, out0, out1, ... for the fields of a tuple.
absl::StatusOr<std::vector<Buffer>> OutputBuffers(const ir::ExprNode& call) {
  const ir::StructInfo& info = call.struct_info;
  if (info.kind != ir::StructInfo::Kind::kTuple) {
    KILN_ASSIGN_OR_RETURN(Buffer out, TensorBuffer(call, "out", info));
    return std::vector<Buffer>{out};
  }
  if (info.fields.empty()) {
    return absl::UnimplementedError(absl::StrCat("op ", call.name, " has no results"));
  }
  std::vector<Buffer> outs;
  for (size_t i = 0; i < info.fields.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Buffer out, TensorBuffer(call, absl::StrCat("out", i), info.fields[i]));
    outs.push_back(out);
  }
  return outs;
}

// The kernel's scalar parameters, each once: the symbolic variables of its buffer shapes,
// then any other free variable of its body (a graph value used in the computation, such as
// the start of a range that begins at a cache's length).
std::vector<PrimExpr> KernelScalars(const std::vector<Buffer>& buffers, const Stmt& body) {
  std::vector<PrimExpr> vars;
  std::unordered_set<const arith::ExprNode*> seen;
  auto add = [&](const PrimExpr& v) {
    if (seen.insert(v.get()).second) vars.push_back(v);
  };
  for (const Buffer& b : buffers) {
    for (const PrimExpr& d : b->shape) {
      for (const PrimExpr& v : arith::FreeVars(d)) add(v);
    }
  }
  ir::VisitStmts(body, [&](const ir::StmtNode& s) {
    if (s.kind == ir::StmtKind::kFor || s.kind == ir::StmtKind::kLet) seen.insert(s.var.get());
  });
  ir::VisitExprs(body, [&](const PrimExpr& e) {
    if (e->kind == arith::ExprKind::kVar) add(e);
  });
  return vars;
}

class Legalizer {
 public:
  explicit Legalizer(ir::IRModule& module) : module_(module) {}

  // `name` is the function's name: only main's parameters are artifact inputs.
  absl::Status Run(const std::string& name, ir::Function& func) {
    inputs_.clear();
    if (name == "main") {
      for (size_t i = 0; i < func.params.size(); ++i) inputs_[func.params[i].get()] = i;
    }
    return LegalizeBindings(func);
  }

 private:
  absl::Status LegalizeBindings(ir::Function& func) {
    for (ir::BindingBlock& block : func.blocks) {
      for (ir::Binding& binding : block.bindings) {
        const ir::Expr& value = binding.value;
        // Control flow keeps its bodies, graph functions legalized like main; host lowering
        // (lower_host.cc) branches and loops over their kernels.
        if (!value->subgraphs.empty()) {
          absl::StatusOr<ir::Expr> legalized = LegalizeSubgraphs(*value);
          if (!legalized.ok()) {
            return absl::Status(legalized.status().code(),
                                absl::StrCat("in the body of %", binding.var->name, ": ",
                                             legalized.status().message()));
          }
          binding.value = *legalized;
          continue;
        }
        if (value->kind != ir::ExprKind::kCall || value->name == "call_tir") continue;
        // Reads shape values for the host (lower_host.cc), no kernel.
        if (value->name == "tensor_to_shape") continue;
        KILN_ASSIGN_OR_RETURN(binding.value, LegalizeCall(*value));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<ir::Expr> LegalizeSubgraphs(const ir::ExprNode& node) {
    ir::ExprNode copy = node;
    for (auto& sub : copy.subgraphs) {
      ir::Function body = *sub;
      KILN_RETURN_IF_ERROR(LegalizeBindings(body));
      sub = std::make_shared<const ir::Function>(std::move(body));
    }
    return std::make_shared<const ir::ExprNode>(std::move(copy));
  }

  absl::StatusOr<ir::Expr> LegalizeCall(const ir::ExprNode& call) {
    std::vector<ir::Expr> tensor_args;
    std::vector<Buffer> inputs;
    for (const ir::Expr& arg : call.args) {
      if (arg->kind == ir::ExprKind::kShapeExpr) continue;  // folded into the output shape
      if (ir::IsNone(arg)) continue;  // an omitted optional operand: builders read call.args
      KILN_ASSIGN_OR_RETURN(Buffer in,
                            TensorBuffer(call, absl::StrCat("A", inputs.size()), arg->struct_info));
      inputs.push_back(in);
      tensor_args.push_back(arg);
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Buffer> outs, OutputBuffers(call));
    KernelContext k{call, inputs, outs[0], analyzer_, outs, ArgInputs(call)};
    KILN_ASSIGN_OR_RETURN(Stmt body, KernelBody(k));
    ir::PrimFunc kernel;
    kernel.name = FreshKernelName(call.name);
    kernel.buffers = inputs;
    kernel.buffers.insert(kernel.buffers.end(), outs.begin(), outs.end());
    kernel.scalars = KernelScalars(kernel.buffers, body);
    kernel.body = body;
    module_.prim_funcs.emplace(kernel.name, kernel);
    return ir::MakeCallTIR(kernel.name, tensor_args, call.struct_info);
  }

  std::vector<int> ArgInputs(const ir::ExprNode& call) const {
    std::vector<int> positions;
    for (const ir::Expr& arg : call.args) {
      auto it = inputs_.find(arg.get());
      positions.push_back(it == inputs_.end() ? -1 : it->second);
    }
    return positions;
  }

  std::string FreshKernelName(const std::string& op) {
    return absl::StrCat(op, "_", counts_[op]++);
  }

  ir::IRModule& module_;
  arith::Analyzer analyzer_;
  std::map<std::string, int> counts_;
  std::unordered_map<const ir::ExprNode*, int> inputs_;  // main's parameters -> position
};

}  // namespace

absl::StatusOr<ir::IRModule> Legalize(ir::IRModule module) {
  Legalizer legalizer(module);
  for (auto& [name, func] : module.functions) KILN_RETURN_IF_ERROR(legalizer.Run(name, func));
  return module;
}

}  // namespace kiln::transform
