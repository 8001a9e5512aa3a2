// ONNX elementwise operators: math, activations, comparisons, logic, casts.
#include "compiler/arith/check.h"
#include "compiler/frontend/import_context.h"

namespace kiln::frontend {
namespace {

Converter Binary(std::string op) {
  return [op](ImportContext& ctx) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(ir::Expr a, ctx.Input(0));
    KILN_ASSIGN_OR_RETURN(ir::Expr b, ctx.Input(1));
    return ctx.EmitOutput(op, {a, b});
  };
}

Converter Unary(std::string op) {
  return [op](ImportContext& ctx) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
    return ctx.EmitOutput(op, {x});
  };
}

}  // namespace

void RegisterElementwiseConverters(ConverterTable& table) {
  table["Add"] = Binary("add");
  table["Sub"] = Binary("subtract");
  table["Mul"] = Binary("multiply");
  table["Div"] = Binary("divide");
  table["Relu"] = Unary("relu");
  table["Sigmoid"] = Unary("sigmoid");
  table["Tanh"] = Unary("tanh");
  table["Exp"] = Unary("exp");
}

}  // namespace kiln::frontend
