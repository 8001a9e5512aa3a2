#include "compiler/frontend/import_context.h"

#include "compiler/arith/check.h"

namespace kiln::frontend {

int64_t ImportContext::IntAttr(const std::string& name, int64_t fallback) const {
  const onnx::AttributeProto* attr = Attr(name);
  return attr ? attr->i() : fallback;
}

float ImportContext::FloatAttr(const std::string& name, float fallback) const {
  const onnx::AttributeProto* attr = Attr(name);
  return attr ? attr->f() : fallback;
}

std::string ImportContext::StringAttr(const std::string& name, const std::string& fallback) const {
  const onnx::AttributeProto* attr = Attr(name);
  return attr ? attr->s() : fallback;
}

std::vector<int64_t> ImportContext::IntsAttr(const std::string& name) const {
  const onnx::AttributeProto* attr = Attr(name);
  if (!attr) return {};
  return {attr->ints().begin(), attr->ints().end()};
}

std::vector<float> ImportContext::FloatsAttr(const std::string& name) const {
  const onnx::AttributeProto* attr = Attr(name);
  if (!attr) return {};
  return {attr->floats().begin(), attr->floats().end()};
}

std::vector<std::string> ImportContext::StringsAttr(const std::string& name) const {
  const onnx::AttributeProto* attr = Attr(name);
  if (!attr) return {};
  return {attr->strings().begin(), attr->strings().end()};
}

absl::Status ImportContext::EmitOutput(const std::string& op, std::vector<ir::Expr> args,
                                       ir::Attrs attrs) {
  KILN_ASSIGN_OR_RETURN(ir::Expr out, Emit(op, std::move(args), std::move(attrs)));
  SetOutput(0, out);
  return absl::OkStatus();
}

absl::Status ImportContext::EmitTupleOutputs(const std::string& op, std::vector<ir::Expr> args,
                                             ir::Attrs attrs) {
  KILN_ASSIGN_OR_RETURN(ir::Expr tuple, Emit(op, std::move(args), std::move(attrs)));
  if (tuple->struct_info.kind != ir::StructInfo::Kind::kTuple) {
    return absl::InternalError("op " + op + " does not return a tuple");
  }
  for (int i = 0; i < num_outputs() && i < static_cast<int>(tuple->struct_info.fields.size());
       ++i) {
    if (!HasOutput(i)) continue;
    KILN_ASSIGN_OR_RETURN(ir::Expr field, Bind(ir::MakeTupleGetItem(tuple, i), node().output(i)));
    SetOutput(i, field);
  }
  return absl::OkStatus();
}

ir::Expr ScalarConstant(double value, arith::DataType dtype) {
  ir::NDArray a = ir::NDArray::Zeros(dtype, {});
  a.SetDouble(0, value);
  return ir::MakeConstant(std::move(a));
}

ir::Expr Constant(ir::NDArray array) { return ir::MakeConstant(std::move(array)); }

}  // namespace kiln::frontend
