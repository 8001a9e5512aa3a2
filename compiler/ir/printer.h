// The IR's text format. ToString(IRModule) (graph.h) prints a module that ParseModule
// (parser.h) reads back structurally equal, and printing the parsed module gives the same
// text again. An example:
//
//   def @main(%x: Tensor([batch, 784], f32)) attrs(input_names=["x"], output_names=["y"]) {
//     dataflow {
//       %h: Tensor([batch, 128], f32) = matmul(%x, const[0])
//       %y: Tensor([batch, 128], f32) = call_tir(@relu_0, %h)
//       %p: Tuple(Tensor(ndim=2, f32), Shape([batch])) = split(%y, axis=1, sizes=[]:i64)
//       %q: Tensor(ndim=2, f32) = %p[0]
//     }
//     return %y
//   }
//   prim_func @relu_0(A: f32[batch, 128], B: f32[batch, 128], batch: i64) {
//     for i0 in range(0, batch) parallel {
//       for i1 in range(0, 128) serial {
//         B[i0, i1] = select(A[i0, i1] < 0.0, 0.0, A[i0, i1])
//       }
//     }
//   }
//   constants {
//     const[0]: f32[784, 128] = 0x0000803f...
//   }
//
// Graph level: `def @name(params) attrs(input_names=[...], output_names=[...]) { blocks
// return expr }`; blocks are `dataflow { ... }` or `block { ... }` (bare bindings outside a
// block form a non-dataflow block when parsing); bindings are `%v: StructInfo = expr` or
// `%v: StructInfo = match_cast(expr)`. Expressions: `%v`, `const[k]`, tuples `()`, `(a,)`,
// `(a, b)`, `e[i]` (TupleGetItem), `shape([n, 4])`, calls `op(@callee, args..., subgraphs...,
// key=attr...)` with subgraphs written `fn @name(params) attrs(...) { ... }` (`fn(...)` when
// unnamed), and If as `if(cond, fn @then() { ... }, fn @else() { ... })`; an op whose name
// is not an identifier or is reserved prints quoted, `"if"(...)`. A call's own struct info is
// that of the variable it is bound to; where it differs (or the call is not bound directly)
// it is printed after it: `op(%x) -> Tensor(f32)`.
// Struct info: Object, Prim(i64), Shape([n]) / Shape(ndim=2) / Shape(), Tensor([n, 4], f32) /
// Tensor(ndim=2, f32) / Tensor(f32), Tuple(...). Attributes: 3, 1.5 (floats always have a '.'
// or an exponent, or are nan/inf), "text", [1, 2], [1.0], ["a"], and typed empty lists
// []:i64, []:f64, []:str.
//
// Loop level: `prim_func @k(A: f32[n, 4], n: i64) { stmts }` (`host_func` for the host
// function); statements `for i in range(min, extent) serial { }`, `A[i, j] = v`,
// `let x: i64 = v` (its body is the rest of the block, or `{ }` when more follows), `if c {
// } else { }`, `alloc B: f32[4]` (body as for let), `assert c else call(...)`, and bare
// expressions (Evaluate). PrimExprs are written as arith::ToString prints them; a call whose
// dtype differs from the default below is written `name:dtype(args)`.
//
// Names: symbolic variables are identified by name within a def (and its subgraphs) or a
// PrimFunc, graph variables by %name within a def. The printer renames where two different
// variables share a name or a name is not an identifier, so names need not survive a round
// trip; everything else does. Constants print as raw bytes in hex in the `constants` section;
// `host` marks the entries of IRModule::constants, which come first so that their index is
// the one `kiln.constant(k)` uses.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/arith/expr.h"

namespace kiln::ir::text {

// The dtype a call to intrinsic or kernel `name` has unless the text says otherwise: the
// kiln.* intrinsics have fixed types, math intrinsics take their first operand's float type,
// kernel calls return an i32 status.
arith::DataType DefaultCallType(const std::string& name, const std::vector<arith::PrimExpr>& args);

// Words the loop-level syntax reserves; a variable or buffer with such a name is renamed.
bool IsReservedWord(std::string_view word);

// Attribute floats: the shortest text that reads back as the same double, with a '.' or an
// exponent so that it reads back as a float.
std::string FloatAttrText(double v);

// `"..."` with \" \\ and \xHH escapes for anything that is not printable ASCII.
std::string QuoteString(std::string_view s);

}  // namespace kiln::ir::text
