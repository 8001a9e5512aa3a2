// Structural equality and hashing of the IR: what pass tests compare
// (EXPECT_TRUE(StructuralEqual(Pass(Parse(before)), Parse(expected)))).
//
// Variables compare by position, not identity or name: a graph variable, symbolic variable,
// loop variable or buffer of one side matches the one of the other side at the same place of
// its definition (parameter, binding, for, let, alloc) or, for a variable used without one
// (a symbolic variable in a def, a free variable), its first use. So a module and the module
// parsed from its text are equal; so are two modules that differ only in variable names.
// Everything else compares by value: op and function names, attributes (floats by value,
// NaN equal to NaN), constants by dtype, shape and bytes, struct info field by field
// (struct info of tuples, tuple items, shapes and constants is derived and not compared).
// Nested Seqs are flattened: Seq([a, Seq([b, c])]) equals Seq([a, b, c]), and a null
// statement equals an empty Seq. Each function of a module is its own scope: symbolic
// variables shared between functions need not be shared on the other side.
#pragma once

#include <cstddef>
#include <string>

#include "compiler/ir/graph.h"

namespace kiln::ir {

bool StructuralEqual(const IRModule& a, const IRModule& b);
bool StructuralEqual(const Function& a, const Function& b);
bool StructuralEqual(const Expr& a, const Expr& b);
bool StructuralEqual(const PrimFunc& a, const PrimFunc& b);

// Where two modules first differ ("function @main: binding 2 (%y): op add vs subtract"), or
// "" if they are structurally equal. For test failure messages.
std::string StructuralMismatch(const IRModule& a, const IRModule& b);

// Consistent with StructuralEqual: equal values hash equal.
size_t StructuralHash(const IRModule& module);
size_t StructuralHash(const Function& func);
size_t StructuralHash(const Expr& expr);
size_t StructuralHash(const PrimFunc& func);

}  // namespace kiln::ir
