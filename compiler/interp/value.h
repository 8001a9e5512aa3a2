// Values of the reference interpreter: a tensor, or a tuple of values. An omitted optional
// operand (ir::MakeNone) is the empty tuple; a ShapeExpr evaluates to a 1-D i64 tensor.
#pragma once

#include <variant>
#include <vector>

#include "compiler/ir/tensor.h"

namespace kiln::interp {

struct Value {
  std::variant<ir::NDArray, std::vector<Value>> v;

  Value() : v(std::vector<Value>{}) {}
  Value(ir::NDArray tensor) : v(std::move(tensor)) {}  // NOLINT: a tensor is a value
  static Value Tuple(std::vector<Value> fields) {
    Value out;
    out.v = std::move(fields);
    return out;
  }

  bool is_tensor() const { return std::holds_alternative<ir::NDArray>(v); }
  bool is_none() const {
    const auto* t = std::get_if<std::vector<Value>>(&v);
    return t && t->empty();
  }
  const ir::NDArray& tensor() const { return std::get<ir::NDArray>(v); }
  ir::NDArray& tensor() { return std::get<ir::NDArray>(v); }
  const std::vector<Value>& fields() const { return std::get<std::vector<Value>>(v); }
};

}  // namespace kiln::interp
