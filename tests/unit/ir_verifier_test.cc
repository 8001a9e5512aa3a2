// The verifier: a well-formed module passes, and each kind of malformation is reported with
// where it is.
#include "compiler/ir/parser.h"
#include "compiler/ir/verifier.h"
#include "gtest/gtest.h"

namespace kiln::ir {
namespace {

using arith::IntImm;

constexpr char kGood[] = R"(
def @main(%x: Tensor([n, 4], f32), %c: Tensor([], bool)) {
  dataflow {
    %t: Tuple(Tensor([n, 4], f32), Tensor([n, 4], f32)) = (%x, %x)
    %a: Tensor([n, 4], f32) = %t[1]
    %y: Tensor([n, 4], f32) = call_tir(@add_0, %a, %x)
    %s: Shape([n, 4]) = shape([n, 4])
  }
  block {
    %r: Tensor([n, 4], f32) = if(%c, fn @then() {
      return %y
    }, fn @else() {
      return %a
    })
    %m: Tensor(ndim=2, f32) = relu(%r)
    %mc: Tensor([n, k], f32) = match_cast(%m)
    %z: Tensor([n, k], f32) = relu(%mc)
  }
  return %z
}
prim_func @add_0(A: f32[n, 4], B: f32[n, 4], C: f32[n, 4], n: i64) {
  for i in range(0, n) parallel {
    for j in range(0, 4) serial {
      C[i, j] = A[i, j] + B[i, j]
      kiln.prefetch(A[i, 3])
    }
  }
  alloc tmp: f32[1]
  tmp[0] = 0.0
}
host_func @run() {
  let n: i64 = kiln.input_shape(0:i32, 0:i32)
  assert n >= 0 else kiln.shape_error(0:i32, 0:i32, 0:i32, 0, n)
  let h: handle = kiln.constant(0:i32)
  add_0(h, h, h, n)
}
constants {
  host const[0]: f32[] = [1.0]
}
)";

// Verifies kGood with `from` replaced by `to`.
std::string VerifyEdited(const std::string& from, const std::string& to) {
  std::string text = kGood;
  size_t at = text.find(from);
  if (at == std::string::npos) return "test error: no " + from;
  text.replace(at, from.size(), to);
  absl::StatusOr<IRModule> m = ParseModule(text);
  if (!m.ok()) return "parse error: " + std::string(m.status().message());
  absl::Status s = VerifyModule(*m);
  if (!s.ok()) EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  return s.ok() ? "ok" : std::string(s.message());
}

TEST(IrVerifierTest, WellFormedModulePasses) { EXPECT_EQ(VerifyEdited("", ""), "ok"); }

TEST(IrVerifierTest, GraphLevelMalformations) {
  EXPECT_EQ(VerifyEdited("call_tir(@add_0", "call_tir(@sub_0"),
            "function @main: block 0 binding 2 (%y): call_tir to unknown kernel @sub_0");
  EXPECT_EQ(VerifyEdited("call_tir(@add_0, %a, %x)", "call_tir(@add_0, %a)"),
            "function @main: block 0 binding 2 (%y): call_tir passes 1 arguments and 1 outputs "
            "to @add_0, which has 3 buffers");
  EXPECT_EQ(VerifyEdited("call_tir(@add_0", "call_tir(@run"),
            "function @main: block 0 binding 2 (%y): call_tir to host function @run");
  EXPECT_EQ(VerifyEdited("%t[1]", "%t[2]"),
            "function @main: block 0 binding 1 (%a): tuple index 2 out of range for "
            "Tuple(Tensor([n, 4], f32), Tensor([n, 4], f32))");
  EXPECT_EQ(VerifyEdited("= match_cast(%m)", "= relu(%m)"),
            "function @main: block 1 binding 2 (%mc): symbolic variable k is used before a "
            "parameter or match_cast binds it");
  EXPECT_EQ(VerifyEdited("if(%c,", "if(%x,"),
            "function @main: block 1 binding 0 (%r): if needs one condition, a scalar bool");
  EXPECT_EQ(VerifyEdited("fn @then()", "fn @then(%q: Object)"),
            "function @main: block 1 binding 0 (%r): subgraph 0: if branch with params");
  EXPECT_EQ(VerifyEdited("%z: Tensor([n, k], f32) = relu(%mc)", "%z: Object = relu(%mc)"),
            "function @main: block 1 binding 3 (%z): has no struct info (Object)");
  EXPECT_EQ(VerifyEdited("relu(%mc)", "relu(%mc) -> Tensor(f32)"),
            "function @main: block 1 binding 3 (%z): struct info Tensor([n, k], f32) differs "
            "from its value's Tensor(f32)");
  EXPECT_EQ(VerifyEdited("Shape([n, 4]) = shape([n, 4])", "Shape([m]) = shape([m])"),
            "function @main: block 0 binding 3 (%s): symbolic variable m is used before a "
            "parameter or match_cast binds it");
}

TEST(IrVerifierTest, LoopLevelMalformations) {
  EXPECT_EQ(VerifyEdited("C[i, j] = A[i, j]", "C[i] = A[i, j]"),
            "prim_func @add_0: store to C with 1 indices; it has 2 dimensions");
  EXPECT_EQ(VerifyEdited("A[i, j] + B", "A[j] + B"),
            "prim_func @add_0: load of A with 1 indices; it has 2 dimensions");
  EXPECT_EQ(VerifyEdited("tmp[0] = 0.0", "tmp[0] = 0.0:f64"),
            "prim_func @add_0: store of f64 to f32 buffer tmp");
  EXPECT_EQ(VerifyEdited("tmp[0] = 0.0", "tmp[0] = cast<f32>(kiln.input_shape(0:i32, 0:i32))"),
            "prim_func @add_0: kiln.input_shape outside a host function");
  EXPECT_EQ(VerifyEdited("kiln.prefetch(A[i, 3])", "kiln.prefetch(i)"),
            "prim_func @add_0: kiln.prefetch takes one load of the element to prefetch");
  EXPECT_EQ(VerifyEdited("kiln.prefetch(A[i, 3])", "kiln.prefetch(A[i])"),
            "prim_func @add_0: load of A with 1 indices; it has 2 dimensions");
  EXPECT_EQ(VerifyEdited("add_0(h, h, h, n)", "kiln.prefetch(n)"),
            "host_func @run: kiln.prefetch outside a kernel");
  const std::string prefetch = "kiln.prefetch(A[i, 3])";
  EXPECT_EQ(VerifyEdited(prefetch, "kiln.transpose(C[i, 0], A[0, 0], 4, 4, 4)"), "ok");
  EXPECT_EQ(VerifyEdited(prefetch, "kiln.transpose(C[i, 0], A[0, 0], 3, 4, 4)"),
            "prim_func @add_0: kiln.transpose: n = 3 is not a power of two from 2 to 16");
  EXPECT_EQ(VerifyEdited(prefetch, "kiln.transpose(C[i, 0], A[0, 0], 4, 2, 4)"),
            "prim_func @add_0: kiln.transpose: rows 2 and 4 apart overlap rows of 4");
  EXPECT_EQ(VerifyEdited(prefetch, "kiln.transpose(C[i, 0], C[0, 0], 4, 4, 4)"),
            "prim_func @add_0: kiln.transpose within one buffer");
  EXPECT_EQ(VerifyEdited(prefetch, "kiln.transpose(C[i, 0], A[0, 0], 4, 4, n)"), "ok");
  EXPECT_EQ(VerifyEdited(prefetch, "kiln.transpose(C[i, 0], A[0, 0], 4, 4, m)"),
            "prim_func @add_0: variable m is not a scalar parameter, loop or let variable");
  EXPECT_EQ(VerifyEdited(prefetch, "kiln.transpose(C[i, 0], A[0, 0], n, 4, 4)"),
            "prim_func @add_0: kiln.transpose takes (dst f32 load, src f32 load, constant n, "
            "integer dst_row and src_row)");
  EXPECT_EQ(VerifyEdited(prefetch, "kiln.transpose(C[i, 0], A[0, 0], 4, 4.0, 4)"),
            "prim_func @add_0: kiln.transpose takes (dst f32 load, src f32 load, constant n, "
            "integer dst_row and src_row)");
  EXPECT_EQ(VerifyEdited("add_0(h, h, h, n)", "kiln.transpose(n)"),
            "host_func @run: kiln.transpose outside a kernel");
  EXPECT_EQ(VerifyEdited("tmp[0] = 0.0", "tmp[0] = cast<f32>(i)"),
            "prim_func @add_0: variable i is not a scalar parameter, loop or let variable");
  EXPECT_EQ(VerifyEdited("A: f32[n, 4]", "A: f32[m, 4]"),
            "prim_func @add_0: buffer A: shape uses m, not a scalar parameter");
  EXPECT_EQ(VerifyEdited("alloc tmp: f32[1]", "alloc tmp: f32[n]"),
            "prim_func @add_0: alloc tmp needs a constant shape");
  EXPECT_EQ(VerifyEdited("kiln.constant(0:i32)", "kiln.constant(3:i32)"),
            "host_func @run: kiln.constant needs a constant index below 1, the number of module "
            "constants");
  EXPECT_EQ(VerifyEdited("add_0(h, h, h, n)", "add_0(h, h, n)"),
            "host_func @run: call to @add_0 passes 3 arguments; it takes 4");
  EXPECT_EQ(VerifyEdited("assert n >= 0", "assert n"), "host_func @run: condition n is not a bool");
  EXPECT_EQ(VerifyEdited("let n: i64 = kiln", "let n: i32 = kiln"),
            "host_func @run: let n: i32 bound to a i64");
  EXPECT_EQ(VerifyEdited("host_func @run() {", "host_func @run(A: f32[4]) {"),
            "host_func @run: a host function takes no buffers or scalars");
}

// What the parser cannot express (it resolves names in scope) is built by hand.
TEST(IrVerifierTest, ScopesBuiltByHand) {
  IRModule m;
  Expr x = MakeVar("x", StructInfo::Tensor({IntImm(2)}, DataType::Float()));
  Expr y = MakeVar("y", x->struct_info);
  Function f{.name = "g", .params = {x}};
  f.blocks.push_back({.bindings = {{y, MakeCall("relu", {y})}}});
  f.blocks[0].bindings.push_back({y, x});
  f.result = y;
  m.functions["f"] = f;
  PrimExpr i = arith::MakeVar("i");
  Buffer a = arith::MakeBuffer("A", DataType::Float(), {IntImm(4)});
  Buffer tmp = arith::MakeBuffer("tmp", DataType::Float(), {IntImm(4)});
  Stmt loop = For(i, IntImm(0), IntImm(4), ForKind::kSerial, Store(a, {i}, arith::FloatImm(0)));
  m.prim_funcs["k"] = PrimFunc{
      .name = "k",
      .buffers = {a},
      .body = Seq({loop, Store(a, {i}, arith::FloatImm(1)), Allocate(tmp, Evaluate(IntImm(0))),
                   Store(tmp, {IntImm(0)}, arith::FloatImm(1)),
                   For(i, IntImm(0), IntImm(4), ForKind::kSerial, loop)})};
  absl::Status s = VerifyModule(m);
  EXPECT_EQ(std::string(s.message()),
            "function @f: is named @g\n"
            "function @f: block 0 binding 0 (%y): %y is used before it is defined\n"
            "function @f: block 0 binding 0 (%y): struct info Tensor([2], f32) differs from its "
            "value's Object\n"
            "function @f: block 0 binding 1 (%y): %y is bound twice\n"
            "prim_func @k: variable i is used outside its loop or let\n"
            "prim_func @k: store to buffer tmp, which is neither a parameter nor allocated here\n"
            "prim_func @k: variable i is bound again inside its scope");
}

}  // namespace
}  // namespace kiln::ir
