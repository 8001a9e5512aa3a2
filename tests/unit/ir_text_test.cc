// The IR text format: printing, parsing, round trips and structural equality.
#include <cmath>
#include <cstring>
#include <limits>

#include "compiler/ir/graph.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/structural.h"
#include "gtest/gtest.h"

namespace kiln::ir {
namespace {

using arith::ExprKind;
using arith::IntImm;

const DataType kF32 = DataType::Float(32);

template <typename T>
NDArray Array(DataType dtype, std::vector<int64_t> shape, std::vector<T> values) {
  NDArray a = NDArray::Zeros(dtype, std::move(shape));
  std::memcpy(a.bytes.data(), values.data(), values.size() * sizeof(T));
  return a;
}

std::shared_ptr<const Function> Branch(std::string name, Expr result) {
  auto f = std::make_shared<Function>();
  f->name = std::move(name);
  f->result = std::move(result);
  return f;
}

Expr Normalized(Expr call, StructInfo info) {
  ExprNode node = *call;
  node.struct_info = std::move(info);
  return std::make_shared<const ExprNode>(std::move(node));
}

Attrs EveryAttrKind() {
  return {{"i", int64_t{-3}},
          {"f", 1e-5},
          {"negzero", -0.0},
          {"big", 1e300},
          {"third", 1.0 / 3},
          {"s", std::string("quote\" back\\ nl\n \x01 \xc3\xa9")},
          {"ints", std::vector<int64_t>{1, -2, std::numeric_limits<int64_t>::min()}},
          {"floats", std::vector<double>{0.5, NAN, -INFINITY, 2.0}},
          {"strs", std::vector<std::string>{"x", "y z", ""}},
          {"no ints", std::vector<int64_t>{}},
          {"no_floats", std::vector<double>{}},
          {"no_strs", std::vector<std::string>{}}};
}

// A graph function using every expression kind, struct info kind and binding form.
Function MainFunction(const std::shared_ptr<const NDArray>& weight) {
  PrimExpr n = arith::MakeVar("batch"), m = arith::MakeVar("m");
  StructInfo h_info = StructInfo::Tensor({n, IntImm(3)}, kF32);
  Expr x = MakeVar("x", StructInfo::Tensor({n, IntImm(4)}, kF32));
  Expr c = MakeVar("cond", StructInfo::Tensor({}, DataType::Bool()));
  Expr r = MakeVar("r", StructInfo::TensorRank(2, kF32));
  Expr u = MakeVar("u", StructInfo::TensorRank(-1, DataType::Int(8)));
  Expr o = MakeVar("o", StructInfo());
  Expr p = MakeVar("p", StructInfo::Prim(DataType::Int()));
  Expr s = MakeVar("s", StructInfo::Shape({n, IntImm(2)}));
  StructInfo unknown_shape = StructInfo::Shape({});
  unknown_shape.shape.reset();
  unknown_shape.ndim = -1;
  StructInfo rank_shape = unknown_shape;
  rank_shape.ndim = 3;
  Expr s2 = MakeVar("s2", unknown_shape), s3 = MakeVar("s3", rank_shape);

  Expr w = MakeConstant(NDArray());
  ExprNode w_node = *w;
  w_node.data = weight;
  w_node.struct_info = StructInfo::Tensor({IntImm(4), IntImm(3)}, kF32);
  w = std::make_shared<const ExprNode>(std::move(w_node));
  Expr scalar = MakeConstant(Array<float>(kF32, {}, {2.5f}));

  Function f;
  f.name = "main";
  f.params = {x, c, r, u, o, p, s, s2, s3};
  f.input_names = {"x:0", "cond", "r r", "u\"", "o", "p", "s", "s2", "s3"};
  f.output_names = {"out/0", "out/1"};
  BindingBlock df;
  auto bind = [&](BindingBlock& block, std::string name, Expr value, bool match_cast = false,
                  const StructInfo* info = nullptr) {
    Expr var = MakeVar(std::move(name), info ? *info : value->struct_info);
    block.bindings.push_back({var, value, match_cast});
    return var;
  };
  Expr h = bind(df, "h", Normalized(MakeCall("matmul", {x, w}), h_info));
  Expr a = bind(df, "a", Normalized(MakeCall("add", {h, scalar}, EveryAttrKind()), h_info));
  Expr k = bind(df, "k", MakeCallTIR("kernel", {a}, h_info));
  ExprNode ext = *MakeCallTIR("cblas.sgemm v2", {x, x}, h_info);
  ext.name = "call_extern";
  Expr e = bind(df, "e", std::make_shared<const ExprNode>(std::move(ext)));
  Expr tup = bind(df, "tup", MakeTuple({h, a, MakeNone()}));
  Expr g = bind(df, "g", MakeTupleGetItem(tup, 1));
  Expr sh = bind(df, "sh", MakeShapeExpr({n, n * IntImm(2) + IntImm(1)}));
  bind(df, "un", MakeCall("if", {x}), false, &h_info);  // an op named "if", not normalized
  BindingBlock side;
  side.dataflow = false;
  StructInfo mc_info = StructInfo::Tensor({n, m}, kF32);
  Expr mc = bind(side, "mc", r, true, &mc_info);
  bind(side, "mc2", Normalized(MakeCall("relu", {mc}), mc_info), true, &h_info);
  Expr branch = MakeIf(c, Branch("then", h), Branch("", MakeTuple({a})), h_info);
  Expr iff = bind(side, "if", branch);
  auto body = std::make_shared<Function>();
  body->name = "body";
  Expr i = MakeVar("i", StructInfo::Tensor({}, DataType::Int()));
  Expr v = MakeVar("x", h_info);  // shadows the outer %x's name: the printer renames it
  body->params = {i, v};
  body->input_names = {"i", "v"};
  body->output_names = {"v_out"};
  BindingBlock inner;
  Expr v2 = bind(inner, "v2", Normalized(MakeCall("add", {v, h}), h_info));
  body->blocks.push_back(inner);
  body->result = MakeTuple({c, v2});
  Expr loop = Normalized(MakeCall("loop", {p, c, h}, {{"trip", int64_t{4}}}), h_info);
  ExprNode loop_node = *loop;
  loop_node.subgraphs = {body};
  bind(side, "loop", std::make_shared<const ExprNode>(std::move(loop_node)));
  f.blocks = {df, side, BindingBlock{}};
  f.result = MakeTuple({k, g, e, sh, iff});
  return f;
}

PrimFunc Kernel() {
  PrimExpr n = arith::MakeVar("batch");
  Buffer a = arith::MakeBuffer("A", kF32, {n, IntImm(3)});
  Buffer b = arith::MakeBuffer("B", kF32, {n, IntImm(3)});
  Buffer tmp = arith::MakeBuffer("tmp", DataType::Float(64), {IntImm(4)});
  Buffer scalar = arith::MakeBuffer("A", DataType::Int(32), {});  // same name as a param
  PrimExpr i = arith::MakeVar("i"), j = arith::MakeVar("j", DataType::Int(32));
  PrimExpr k = arith::MakeVar("for");  // a reserved word as a name
  PrimExpr x = arith::Load(a, {i, Cast(DataType::Int(), j)});
  PrimExpr value = arith::Select(arith::Binary(ExprKind::kLT, x, arith::FloatImm(0)),
                                 arith::FloatImm(-0.0), arith::Call(kF32, "exp", {x}));
  Stmt inner = For(j, IntImm(0, DataType::Int(32)), IntImm(3, DataType::Int(32)),
                   ForKind::kVectorized, Store(b, {i, Cast(DataType::Int(), j)}, value));
  PrimExpr floats = arith::FloatImm(NAN, DataType::Float(64)) +
                    arith::FloatImm(1e-38, DataType::Float(64)) *
                        arith::FloatImm(4.9406564584124654e-324, DataType::Float(64)) -
                    (arith::FloatImm(INFINITY, DataType::Float(64)) -
                     arith::FloatImm(-INFINITY, DataType::Float(64)));
  PrimExpr logic = arith::Binary(
      ExprKind::kOr, arith::Not(arith::Binary(ExprKind::kEQ, FloorDiv(n, IntImm(2)), IntImm(-1))),
      arith::Binary(ExprKind::kAnd,
                    arith::Binary(ExprKind::kGE, Min(n, Max(n, IntImm(1))), FloorMod(n, IntImm(3))),
                    arith::Binary(ExprKind::kNE, n - (n - IntImm(1)), IntImm(0))));
  PrimExpr let_var = arith::MakeVar("t", DataType::Float(64));
  Stmt scratch =
      Allocate(tmp, Seq({Store(tmp, {IntImm(0)}, floats),
                         Let(let_var, arith::Load(tmp, {IntImm(0)}),
                             Evaluate(arith::Call(DataType::Float(64), "log", {let_var})))}));
  Stmt twice = Seq({For(k, IntImm(0), IntImm(2), ForKind::kUnrolled, Evaluate(k)),
                    For(k, IntImm(0), IntImm(2), ForKind::kSerial,
                        Evaluate(arith::Call(DataType::Int(32), intrinsic::kPrefetch,
                                             {arith::Load(a, {k, IntImm(0)})})))});
  PrimFunc f;
  f.name = "kernel";
  f.buffers = {a, b};
  f.scalars = {n};
  f.body = Seq({For(i, IntImm(0), n, ForKind::kParallel, inner), scratch,
                IfThenElse(logic, Seq({twice, Seq({})}),
                           Allocate(scalar, Store(scalar, {}, IntImm(7, DataType::Int(32))))),
                IfThenElse(arith::Binary(ExprKind::kLT, n, IntImm(0)), Evaluate(IntImm(0))),
                Evaluate(arith::Call(DataType::Int(64), "exp", {IntImm(1)}))});
  return f;
}

PrimFunc Host() {
  PrimExpr n = arith::MakeVar("batch");
  PrimExpr h = arith::MakeVar("h", DataType::Handle());
  auto i32 = [](int64_t v) { return IntImm(v, DataType::Int(32)); };
  PrimExpr actual = arith::Call(DataType::Int(), intrinsic::kInputShape, {i32(0), i32(1)});
  Stmt check = Assert(arith::Binary(ExprKind::kEQ, actual, IntImm(4)),
                      arith::Call(DataType::Int(32), intrinsic::kShapeError,
                                  {i32(0), i32(0), i32(1), IntImm(4), actual}));
  PrimFunc f;
  f.name = "kiln_run";
  f.is_host = true;
  f.body = Let(n, arith::Call(DataType::Int(), intrinsic::kInputShape, {i32(0), i32(0)}),
               Seq({check,
                    Let(h, arith::Call(DataType::Handle(), intrinsic::kConstant, {i32(0)}),
                        Seq({Evaluate(arith::Call(DataType::Int(32), "kernel", {h, h, n})),
                             Evaluate(arith::Call(DataType::Int(32), intrinsic::kFree, {h}))})),
                    Evaluate(arith::Call(DataType::Int(32), intrinsic::kSetOutputShape,
                                         {i32(0), i32(0), n}))}));
  return f;
}

// Constants with values that a decimal round trip would lose.
std::vector<std::shared_ptr<const NDArray>> TrickyConstants() {
  float denormal = std::numeric_limits<float>::denorm_min();
  uint32_t payload_nan = 0x7fc01234;
  float nan_bits;
  std::memcpy(&nan_bits, &payload_nan, 4);
  return {
      std::make_shared<const NDArray>(
          Array<float>(kF32, {4, 3},
                       {NAN, -0.0f, 1e-38f, denormal, INFINITY, -INFINITY, nan_bits, 1.0f / 3, 0.1f,
                        -1e38f, 3.0f, 0.0f})),
      std::make_shared<const NDArray>(Array<double>(DataType::Float(64), {2}, {0.1, -0.0})),
      std::make_shared<const NDArray>(Array<int64_t>(DataType::Int(), {2}, {-1, INT64_MIN})),
      std::make_shared<const NDArray>(Array<uint8_t>(DataType::Bool(), {2, 1}, {1, 0})),
      std::make_shared<const NDArray>(Array<uint16_t>(DataType::Float(16), {1}, {0x3c00})),
      std::make_shared<const NDArray>(NDArray::Zeros(kF32, {0, 5})),
  };
}

IRModule FullModule() {
  IRModule m;
  m.constants = TrickyConstants();
  m.functions["main"] = MainFunction(m.constants[0]);
  Function helper;
  helper.name = "helper";
  helper.result = MakeConstant(*m.constants[1]);
  m.functions["helper"] = helper;
  m.prim_funcs["kernel"] = Kernel();
  m.prim_funcs["kiln_run"] = Host();
  return m;
}

void ExpectRoundTrip(const IRModule& m) {
  std::string text = ToString(m);
  absl::StatusOr<IRModule> parsed = ParseModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ(StructuralMismatch(m, *parsed), "") << text;
  EXPECT_TRUE(StructuralEqual(m, *parsed));
  EXPECT_EQ(StructuralHash(m), StructuralHash(*parsed));
  EXPECT_EQ(ToString(*parsed), text);
}

TEST(IrTextTest, FullModuleRoundTrips) { ExpectRoundTrip(FullModule()); }

TEST(IrTextTest, EmptyModuleRoundTrips) { ExpectRoundTrip(IRModule()); }

TEST(IrTextTest, ConstantsParseBitIdentical) {
  IRModule m = FullModule();
  absl::StatusOr<IRModule> parsed = ParseModule(ToString(m));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->constants.size(), m.constants.size());
  for (size_t k = 0; k < m.constants.size(); ++k) {
    EXPECT_EQ(parsed->constants[k]->dtype, m.constants[k]->dtype) << k;
    EXPECT_EQ(parsed->constants[k]->shape, m.constants[k]->shape) << k;
    EXPECT_EQ(parsed->constants[k]->bytes, m.constants[k]->bytes) << k;
  }
}

TEST(IrTextTest, PrintsReadableText) {
  std::string text = ToString(FullModule());
  for (const char* piece :
       {"def @main(%x: Tensor([batch, 4], f32), %cond: Tensor([], bool), "
        "%r: Tensor(ndim=2, f32), %u: Tensor(i8), %o: Object, %p: Prim(i64), "
        "%s: Shape([batch, 2]), %s2: Shape(), %s3: Shape(ndim=3)) "
        "attrs(input_names=[\"x:0\", \"cond\", \"r r\", \"u\\\"\"",
        "%h: Tensor([batch, 3], f32) = matmul(%x, const[0])\n",
        "f=1e-05",
        "negzero=-0.0",
        "big=1e+300",
        "\"no ints\"=[]:i64",
        "no_floats=[]:f64",
        "no_strs=[]:str",
        "floats=[0.5, nan, -inf, 2.0]",
        "ints=[1, -2, -9223372036854775808]",
        "s=\"quote\\\" back\\\\ nl\\x0a \\x01 \\xc3\\xa9\"",
        "= call_tir(@kernel, %a)\n",
        "= call_extern(@\"cblas.sgemm v2\", %x, %x)\n",
        "%tup: Tuple(Tensor([batch, 3], f32), Tensor([batch, 3], f32), Tuple()) = (%h, %a, ())",
        "= %tup[1]\n",
        "= shape([batch, batch * 2 + 1])\n",
        "= \"if\"(%x) -> Object\n",
        "%mc: Tensor([batch, m], f32) = match_cast(%r)\n",
        "= match_cast(relu(%mc) -> Tensor([batch, m], f32))\n",
        "= if(%cond, fn @then() {\n",
        "}, fn() {\n",
        "return (%a,)\n",
        "fn @body(%i: Tensor([], i64), %x_1: Tensor([batch, 3], f32)) "
        "attrs(input_names=[\"i\", \"v\"], output_names=[\"v_out\"]) {",
        "}, trip=4)\n",
        "  dataflow {\n  }\n",
        "def @helper() {\n  return const[6]\n}\n",
        "prim_func @kernel(A: f32[batch, 3], B: f32[batch, 3], batch: i64) {\n",
        "for i in range(0, batch) parallel {\n",
        "for j: i32 in range(0:i32, 3:i32) vectorized {\n",
        "B[i, cast<i64>(j)] = select(A[i, cast<i64>(j)] < 0.0, -0.0, exp(A[i, cast<i64>(j)]))",
        "alloc tmp: f64[4] {\n",
        "tmp[0] = nan:f64 + 9.9999999999999996e-39:f64 * "
        "4.9406564584124654e-324:f64 - (inf:f64 - -inf:f64)\n",
        "let t: f64 = tmp[0]\n",
        "log(t)\n",
        "if !(floordiv(batch, 2) == -1) || min(batch, max(batch, 1)) >= floormod(batch, 3) "
        "&& batch - (batch - 1) != 0 {\n",
        "for for_1 in range(0, 2) unrolled {\n",
        "} else {\n",
        "alloc A_1: i32[]\n",
        "A_1[] = 7:i32\n",
        "exp:i64(1)\n",
        "host_func @kiln_run() {\n  let batch: i64 = kiln.input_shape(0:i32, 0:i32)\n",
        "assert kiln.input_shape(0:i32, 1:i32) == 4 else kiln.shape_error(0:i32, 0:i32, "
        "1:i32, 4, kiln.input_shape(0:i32, 1:i32))\n",
        "let h: handle = kiln.constant(0:i32) {\n    kernel(h, h, batch)\n    kiln.free(h)\n  }\n",
        "constants {\n  host const[0]: f32[4, 3] = 0x0000c07f00000080",
        "host const[5]: f32[0, 5] = 0x\n"}) {
    EXPECT_NE(text.find(piece), std::string::npos) << "missing: " << piece << "\n" << text;
  }
}

TEST(IrTextTest, ParsedVariablesAreShared) {
  absl::StatusOr<IRModule> m = ParseModule(ToString(FullModule()));
  ASSERT_TRUE(m.ok()) << m.status();
  const Function& main = m->functions.at("main");
  const Expr& x = main.params[0];
  const Binding& h = main.blocks[0].bindings[0];
  EXPECT_EQ(h.value->args[0], x);
  EXPECT_EQ((*x->struct_info.shape)[0], (*h.var->struct_info.shape)[0]);  // batch
  EXPECT_EQ(main.blocks[0].bindings[1].value->args[0], h.var);
  const PrimFunc& kernel = m->prim_funcs.at("kernel");
  EXPECT_EQ(kernel.buffers[0]->shape[0], kernel.scalars[0]);
  const Stmt& store = kernel.body->seq[0]->body->body;
  EXPECT_EQ(kernel.body->seq[0]->var, store->indices[0]);
  EXPECT_EQ(store->buffer, kernel.buffers[1]);
}

TEST(IrTextTest, HandWrittenText) {
  absl::StatusOr<IRModule> m = ParseModule(R"(
    // Bare bindings form a non-dataflow block; constants may be written as values.
    def @f(%x: Tensor([n], f32)) {
      %y: Tensor([n], f32) = add(%x, const[0])
      %z: Tensor([n], f32) = add(%y, %y)
      dataflow {
        %w: Tensor([n], f32) = relu(%z)
      }
      return %w
    }
    def @g() {
      return (const[1], const[2])
    }
    prim_func @k(A: f32[n], n: i64) {
      for i in range(0, n) serial {
        A[i] = A[i] * 2.0
      }
    }
    constants {
      const[0]: f32[] = [1.5]
      const[1]: i64[2] = [-1, 9007199254740993]
      const[2]: f16[2] = [1.0, -2.5]
      const[3]: bool[] = [1]
    }
  )");
  ASSERT_TRUE(m.ok()) << m.status();
  const Function& f = m->functions.at("f");
  ASSERT_EQ(f.blocks.size(), 2u);
  EXPECT_FALSE(f.blocks[0].dataflow);
  EXPECT_EQ(f.blocks[0].bindings.size(), 2u);
  const Expr& c = f.blocks[0].bindings[0].value->args[1];
  ASSERT_EQ(c->kind, ir::ExprKind::kConstant);
  EXPECT_EQ(c->data->GetDouble(0), 1.5);
  EXPECT_TRUE(m->constants.empty());
  const Expr& g = m->functions.at("g").result;
  EXPECT_EQ(g->args[0]->data->GetInt(1), 9007199254740993);
  EXPECT_EQ(g->args[1]->data->GetDouble(1), -2.5);
  EXPECT_EQ(ToString(*m).find("const[3]"), std::string::npos);  // unused: not printed
  EXPECT_EQ(m->prim_funcs.at("k").buffers[0]->shape[0], m->prim_funcs.at("k").scalars[0]);
}

TEST(IrTextTest, DifferentModulesAreNotEqual) {
  const char* base = R"(
    def @f(%x: Tensor([n, m], f32)) attrs(input_names=["x"]) {
      dataflow {
        %y: Tensor([n, m], f32) = add(%x, %x, alpha=1.0)
      }
      return %y
    })";
  absl::StatusOr<IRModule> a = ParseModule(base);
  ASSERT_TRUE(a.ok()) << a.status();
  auto differs = [&](const std::string& from, const std::string& to) {
    std::string text = base;
    text.replace(text.find(from), from.size(), to);
    absl::StatusOr<IRModule> b = ParseModule(text);
    if (!b.ok()) return std::string(b.status().message());
    EXPECT_FALSE(StructuralEqual(*a, *b)) << text;
    return StructuralMismatch(*a, *b);
  };
  EXPECT_EQ(differs("add(%x, %x", "subtract(%x, %x"),
            "function @f: block 0: binding 0 (%y): op add vs subtract");
  EXPECT_EQ(differs("alpha=1.0", "alpha=1.5"),
            "function @f: block 0: binding 0 (%y): attribute alpha differs");
  EXPECT_EQ(differs("alpha=1.0", "alpha=1"),
            "function @f: block 0: binding 0 (%y): attribute alpha: float vs int");
  EXPECT_EQ(differs("%y: Tensor([n, m]", "%y: Tensor([n, n]"),
            "function @f: block 0: binding 0 (%y): m vs n");
  EXPECT_EQ(differs("[\"x\"]", "[\"x0\"]"), "function @f: input_names differ");
  EXPECT_EQ(differs("dataflow", "block"), "function @f: block 0: dataflow and non-dataflow block");
  // Renaming variables consistently changes nothing.
  std::string renamed = base;
  for (auto [from, to] : {std::pair{"%y", "%q"}, {"%y", "%q"}, {"n,", "rows,"}, {"n,", "rows,"}}) {
    renamed.replace(renamed.find(from), std::strlen(from), to);
  }
  absl::StatusOr<IRModule> b = ParseModule(renamed);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(StructuralMismatch(*a, *b), "");
  EXPECT_EQ(StructuralHash(*a), StructuralHash(*b));
}

TEST(IrTextTest, NestedSeqsCompareFlat) {
  Buffer a = arith::MakeBuffer("A", kF32, {IntImm(2)});
  auto store = [&](int i) { return Store(a, {IntImm(i)}, arith::FloatImm(i)); };
  PrimFunc f{.name = "k", .buffers = {a}, .body = Seq({store(0), Seq({store(1), store(2)})})};
  PrimFunc g{.name = "k", .buffers = {a}, .body = Seq({Seq({store(0), store(1)}), store(2)})};
  EXPECT_TRUE(StructuralEqual(f, g));
  EXPECT_EQ(StructuralHash(f), StructuralHash(g));
  g.body = Seq({store(0), store(2), store(1)});
  EXPECT_FALSE(StructuralEqual(f, g));
}

std::string ParseError(const std::string& text) {
  absl::StatusOr<IRModule> m = ParseModule(text);
  if (m.ok()) return "parsed";
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(m.status().message());
}

TEST(IrTextTest, ParseErrorsSayWhereAndWhat) {
  EXPECT_EQ(ParseError("def @f() {\n  return %x\n}"), "2:10: undefined variable %x");
  EXPECT_EQ(ParseError("def @f(%x: Tensor([n], f32) {"), "1:29: expected ',', found '{'");
  EXPECT_EQ(ParseError("def @f(%x: Tensor([n], f99)) {}"),
            "1:24: expected a dtype (i64, f32, bool, ...), found 'f99'");
  EXPECT_EQ(ParseError("def @f(%x: Blob) {}"),
            "1:12: expected struct info (Tensor, Shape, Tuple, Prim or Object), found 'Blob'");
  EXPECT_EQ(ParseError("def f() {}"), "1:5: expected a function name '@name', found 'f'");
  EXPECT_EQ(ParseError("func @f() {}"),
            "1:1: expected 'def', 'prim_func', 'host_func' or 'constants', found 'func'");
  EXPECT_EQ(ParseError("def @f() {\n  dataflow {\n    %y: Object = foo(,)\n  }\n  return %y\n}"),
            "3:22: expected an expression, found ','");
  EXPECT_EQ(ParseError("def @f() {\n  return const[0]\n}"),
            "2:10: no constant 0 in the constants section");
  EXPECT_EQ(ParseError("def @f() {\n  return \"abc\n}"), "2:10: unterminated string");
  EXPECT_EQ(ParseError("def @f() { return foo(a=[]) }"),
            "1:27: expected ':' and the type of an empty list, found ')'");
  EXPECT_EQ(ParseError("def @f() { return foo(a=[1, \"x\"]) }"),
            "1:25: a list holds numbers or strings, not both");
  EXPECT_EQ(ParseError("def @f() { return () } def @f() {}"), "1:28: function @f is defined twice");
  EXPECT_EQ(ParseError("prim_func @k(A: f32[4]) {\n  B[0] = 1.0\n}"), "2:3: undefined buffer B");
  EXPECT_EQ(ParseError("prim_func @k() {\n  for i in range(0, 4) sideways {\n  }\n}"),
            "2:24: unknown loop kind sideways");
  EXPECT_EQ(ParseError("prim_func @k() {\n  1 + = 2\n}"), "2:7: expected an expression, found '='");
  EXPECT_EQ(ParseError("prim_func @k() {\n  1 = 2\n}"),
            "2:3: expected a buffer element to store to");
  EXPECT_EQ(ParseError("def @f() { return () } $"), "1:24: unexpected character '$'");
  EXPECT_EQ(ParseError("constants {\n  const[1]: f32[] = 0x00000000\n}"),
            "2:9: expected constant index 0");
  EXPECT_EQ(ParseError("constants {\n  const[0]: f32[2] = 0x0000\n}"),
            "2:22: expected 8 bytes of data, found 2");
  EXPECT_EQ(ParseError("constants {\n  const[0]: i8[] = [1]\n  host const[1]: i8[] = [1]\n}"),
            "3:8: expected host constants before the others, found 'const'");
  EXPECT_EQ(ParseError("constants {\n  const[0]: i8[2] = [1, 2, 3]\n}"), "2:28: too many values");
  EXPECT_EQ(ParseError("constants {\n  const[0]: i8[-2] = 0x\n}"), "2:16: dimension out of range");
  EXPECT_EQ(ParseError("def @f() { return () }\ndef @g() { return"),
            "2:18: expected an expression, found end of input");
}

TEST(IrTextTest, LoneNodesPrint) {
  EXPECT_EQ(ToString(StructInfo::Tensor({arith::MakeVar("n"), IntImm(4)}, kF32)),
            "Tensor([n, 4], f32)");
  EXPECT_EQ(ToString(MakeConstant(NDArray::Zeros(kF32, {4, 3}))), "const<f32[4, 3]>");
  PrimExpr i = arith::MakeVar("i0");
  Buffer a = arith::MakeBuffer("A", kF32, {IntImm(8)});
  EXPECT_EQ(
      ToString(For(i, IntImm(0), IntImm(8), ForKind::kSerial, Store(a, {i}, arith::FloatImm(1))),
               2),
      "  for i0 in range(0, 8) serial {\n    A[i0] = 1.0\n  }\n");
}

}  // namespace
}  // namespace kiln::ir
