// LLVM code generation, end to end: PrimFuncs built by hand, compiled to a shared object,
// dlopened and run through the artifact ABI. Results are compared with values the test
// computes itself.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <thread>

#include "codegen_test_util.h"
#include "compiler/codegen/shared_object.h"
#include "compiler/ir/verifier.h"

namespace kiln::codegen::testing {
namespace {

using arith::ExprKind;
using ir::ForKind;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

PrimExpr ShapeError(int is_output, int index, int dim, PrimExpr expected, PrimExpr actual) {
  return Intrinsic(DataType::Int(32), ir::intrinsic::kShapeError,
                   {I64(is_output), I64(index), I64(dim), expected, actual});
}

// A 1-d f32 kernel `name(X[n], ..., Y[n], n)` computing Y[i] = fn(X[i], ...).
ir::PrimFunc VectorKernel(const std::string& name, int inputs,
                          const std::function<PrimExpr(std::vector<PrimExpr>)>& fn) {
  PrimExpr n = arith::MakeVar("n"), i = arith::MakeVar("i");
  ir::PrimFunc f{.name = name};
  std::vector<PrimExpr> loads;
  for (int k = 0; k < inputs; ++k) {
    f.buffers.push_back(arith::MakeBuffer("x" + std::to_string(k), DataType::Float(), {n}));
    loads.push_back(arith::Load(f.buffers.back(), {i}));
  }
  f.buffers.push_back(arith::MakeBuffer("y", DataType::Float(), {n}));
  f.scalars = {n};
  f.body = ir::For(i, I64(0), n, ForKind::kVectorized, ir::Store(f.buffers.back(), {i}, fn(loads)));
  return f;
}

// out = 2 * (a + b) through a workspace temporary, with the shape checks host lowering makes.
ir::IRModule AddScaleModule() {
  ir::IRModule m;
  m.prim_funcs["add"] = VectorKernel("add", 2, [](auto x) { return x[0] + x[1]; });
  m.prim_funcs["scale"] =
      VectorKernel("scale", 1, [](auto x) { return x[0] * arith::FloatImm(2.0); });
  PrimExpr n = arith::MakeVar("n"), tmp = arith::MakeVar("tmp", DataType::Handle());
  PrimExpr out_n = Intrinsic(DataType::Int(), ir::intrinsic::kOutputShape, {I64(0), I64(0)});
  Stmt check_b = ir::Assert(arith::Binary(ExprKind::kEQ, InputShape(1, 0), n),
                            ShapeError(0, 1, 0, n, InputShape(1, 0)));
  Stmt check_out =
      ir::Assert(arith::Binary(ExprKind::kEQ, out_n, n), ShapeError(1, 0, 0, n, out_n));
  Stmt compute =
      ir::Let(tmp, Intrinsic(DataType::Handle(), ir::intrinsic::kAlloc, {n * I64(4)}),
              ir::Seq({CallKernel("add", {InputData(0), InputData(1), tmp, n}),
                       CallKernel("scale", {tmp, OutputData(0), n}),
                       ir::Evaluate(Intrinsic(DataType::Int(32), ir::intrinsic::kFree, {tmp}))}));
  ir::PrimFunc run{.name = KILN_SYMBOL_RUN, .is_host = true};
  run.body = ir::Let(n, InputShape(0, 0), ir::Seq({check_b, check_out, compute}));
  ir::PrimFunc infer{.name = KILN_SYMBOL_INFER_SHAPES, .is_host = true};
  infer.body = ir::Let(n, InputShape(0, 0), ir::Seq({check_b, SetOutputShape(0, 0, n)}));
  m.prim_funcs[run.name] = run;
  m.prim_funcs[infer.name] = infer;
  return m;
}

struct AddScaleCase {
  Tensor<float> a, b, out;
  TestEnv env;
  std::vector<DLTensor> inputs;
  DLTensor output;

  AddScaleCase(int64_t na, int64_t nb, int64_t nout) {
    for (int64_t i = 0; i < na; ++i) a.data.push_back(0.25f * static_cast<float>(i) - 3.0f);
    for (int64_t i = 0; i < nb; ++i) b.data.push_back(1.5f * static_cast<float>(i % 7));
    out.data.assign(nout, -1.0f);
    a.shape = {na};
    b.shape = {nb};
    out.shape = {nout};
    inputs = {a.dl(kDLFloat), b.dl(kDLFloat)};
    output = out.dl(kDLFloat);
  }
};

TEST(CodegenLLVM, HostFunctionRunsKernelsThroughWorkspace) {
  auto artifact = Artifact::Build(AddScaleModule());
  ASSERT_TRUE(artifact);
  AddScaleCase c(1003, 1003, 1003);
  ASSERT_EQ(artifact->Entry(KILN_SYMBOL_RUN)(&c.env.env, c.inputs.data(), &c.output), 0);
  for (size_t i = 0; i < c.out.data.size(); ++i) {
    ASSERT_EQ(c.out.data[i], (c.a.data[i] + c.b.data[i]) * 2.0f) << "at " << i;
  }
  EXPECT_EQ(c.env.allocs, 1);
  EXPECT_EQ(c.env.frees, 1);
  EXPECT_TRUE(c.env.shape_errors.empty());
}

TEST(CodegenLLVM, InferShapesWritesOutputShapeWithoutData) {
  auto artifact = Artifact::Build(AddScaleModule());
  ASSERT_TRUE(artifact);
  AddScaleCase c(0, 0, 0);
  c.a.shape = {77};
  c.b.shape = {77};
  c.inputs = {c.a.dl(kDLFloat), c.b.dl(kDLFloat)};  // data NULL
  ASSERT_EQ(artifact->Entry(KILN_SYMBOL_INFER_SHAPES)(&c.env.env, c.inputs.data(), &c.output), 0);
  EXPECT_EQ(c.out.shape[0], 77);
  EXPECT_EQ(c.env.allocs, 0);
}

TEST(CodegenLLVM, InputShapeMismatchReportsAndFails) {
  auto artifact = Artifact::Build(AddScaleModule());
  ASSERT_TRUE(artifact);
  AddScaleCase c(10, 9, 10);
  EXPECT_NE(artifact->Entry(KILN_SYMBOL_RUN)(&c.env.env, c.inputs.data(), &c.output), 0);
  ASSERT_EQ(c.env.shape_errors.size(), 1u);
  const TestEnv::ShapeError& e = c.env.shape_errors[0];
  EXPECT_EQ(e.is_output, 0);
  EXPECT_EQ(e.index, 1);
  EXPECT_EQ(e.dim, 0);
  EXPECT_EQ(e.expected, 10);
  EXPECT_EQ(e.actual, 9);
  EXPECT_EQ(c.env.allocs, 0);
  EXPECT_EQ(c.out.data[0], -1.0f);  // nothing was computed
}

TEST(CodegenLLVM, OutputShapeMismatchReportsAndFails) {
  auto artifact = Artifact::Build(AddScaleModule());
  ASSERT_TRUE(artifact);
  AddScaleCase c(10, 10, 12);
  EXPECT_NE(artifact->Entry(KILN_SYMBOL_RUN)(&c.env.env, c.inputs.data(), &c.output), 0);
  ASSERT_EQ(c.env.shape_errors.size(), 1u);
  EXPECT_EQ(c.env.shape_errors[0].is_output, 1);
  EXPECT_EQ(c.env.shape_errors[0].index, 0);
  EXPECT_EQ(c.env.shape_errors[0].expected, 10);
  EXPECT_EQ(c.env.shape_errors[0].actual, 12);
}

TEST(CodegenLLVM, FailedWorkspaceAllocationReturnsNonzero) {
  auto artifact = Artifact::Build(AddScaleModule());
  ASSERT_TRUE(artifact);
  AddScaleCase c(8, 8, 8);
  c.env.fail_alloc = true;
  EXPECT_EQ(artifact->Entry(KILN_SYMBOL_RUN)(&c.env.env, c.inputs.data(), &c.output), 1);
  EXPECT_TRUE(c.env.shape_errors.empty());
  EXPECT_EQ(c.env.frees, 0);
  EXPECT_EQ(c.out.data[0], -1.0f);
}

TEST(CodegenLLVM, HostReadsByteOffset) {
  auto artifact = Artifact::Build(AddScaleModule());
  ASSERT_TRUE(artifact);
  AddScaleCase c(4, 4, 4);
  std::vector<float> padded = {100, 200, 1, 2, 3, 4};
  c.inputs[0].data = padded.data();
  c.inputs[0].byte_offset = 2 * sizeof(float);
  ASSERT_EQ(artifact->Entry(KILN_SYMBOL_RUN)(&c.env.env, c.inputs.data(), &c.output), 0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.out.data[i], (padded[i + 2] + c.b.data[i]) * 2.0f);
}

// C[i, j] = sum_r A[i, r] * B[r, j], with m symbolic and k, n either constants or symbolic.
ir::IRModule MatmulModule(bool symbolic_kn) {
  PrimExpr m = arith::MakeVar("m"), i = arith::MakeVar("i"), j = arith::MakeVar("j"),
           r = arith::MakeVar("r");
  PrimExpr k = symbolic_kn ? arith::MakeVar("k") : I64(19);
  PrimExpr n = symbolic_kn ? arith::MakeVar("n") : I64(23);
  Buffer a = arith::MakeBuffer("A", DataType::Float(), {m, k});
  Buffer b = arith::MakeBuffer("B", DataType::Float(), {k, n});
  Buffer c = arith::MakeBuffer("C", DataType::Float(), {m, n});
  Stmt reduce =
      ir::For(r, I64(0), k, ForKind::kSerial,
              ir::Store(c, {i, j},
                        arith::Load(c, {i, j}) + arith::Load(a, {i, r}) * arith::Load(b, {r, j})));
  ir::PrimFunc kernel{.name = "matmul", .buffers = {a, b, c}, .scalars = {m}};
  if (symbolic_kn) kernel.scalars = {m, k, n};
  kernel.body = ir::For(i, I64(0), m, ForKind::kParallel,
                        ir::For(j, I64(0), n, ForKind::kSerial,
                                ir::Seq({ir::Store(c, {i, j}, arith::FloatImm(0.0)), reduce})));

  PrimExpr hm = arith::MakeVar("m");
  std::vector<PrimExpr> args = {InputData(0), InputData(1), OutputData(0), hm};
  if (symbolic_kn)
    args = {InputData(0), InputData(1), OutputData(0), hm, InputShape(0, 1), InputShape(1, 1)};
  ir::PrimFunc host{.name = KILN_SYMBOL_RUN, .is_host = true};
  host.body = ir::Let(hm, InputShape(0, 0),
                      ir::Seq({SetOutputShape(0, 0, hm), SetOutputShape(0, 1, InputShape(1, 1)),
                               CallKernel("matmul", args)}));
  ir::IRModule module;
  module.prim_funcs["matmul"] = kernel;
  module.prim_funcs[host.name] = host;
  return module;
}

void CheckMatmul(const Artifact& artifact, int64_t m, int64_t k, int64_t n) {
  Tensor<float> a{std::vector<float>(m * k), {m, k}}, b{std::vector<float>(k * n), {k, n}};
  Tensor<float> c{std::vector<float>(m * n, -1.0f), {0, 0}};
  for (int64_t x = 0; x < m * k; ++x) a.data[x] = static_cast<float>((x * 7) % 11) - 5.0f;
  for (int64_t x = 0; x < k * n; ++x) b.data[x] = static_cast<float>((x * 3) % 13) - 6.0f;
  std::vector<DLTensor> inputs = {a.dl(kDLFloat), b.dl(kDLFloat)};
  DLTensor out = c.dl(kDLFloat);
  TestEnv env;
  ASSERT_EQ(artifact.Entry(KILN_SYMBOL_RUN)(&env.env, inputs.data(), &out), 0);
  EXPECT_EQ(c.shape, (std::vector<int64_t>{m, n}));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float expected = 0;  // small integers: exact in any summation order
      for (int64_t r = 0; r < k; ++r) expected += a.data[i * k + r] * b.data[r * n + j];
      ASSERT_EQ(c.data[i * n + j], expected) << "C[" << i << ", " << j << "], m = " << m;
    }
  }
}

TEST(CodegenLLVM, MatmulWithSymbolicRows) {
  auto artifact = Artifact::Build(MatmulModule(false));
  ASSERT_TRUE(artifact);
  for (int64_t m : {1, 5, 37}) CheckMatmul(*artifact, m, 19, 23);
}

TEST(CodegenLLVM, MatmulWithAllDimensionsSymbolic) {
  auto artifact = Artifact::Build(MatmulModule(true));
  ASSERT_TRUE(artifact);
  CheckMatmul(*artifact, 13, 7, 29);
  CheckMatmul(*artifact, 2, 64, 3);
  CheckMatmul(*artifact, 0, 4, 4);  // an empty output runs no iteration
}

int64_t FloorDivRef(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

TEST(CodegenLLVM, FloorDivAndModRoundTowardNegativeInfinity) {
  auto div = Artifact::Build(ElementwiseModule({DataType::Int(), DataType::Int()}, DataType::Int(),
                                               [](auto x) { return FloorDiv(x[0], x[1]); }));
  auto mod = Artifact::Build(ElementwiseModule({DataType::Int(), DataType::Int()}, DataType::Int(),
                                               [](auto x) { return FloorMod(x[0], x[1]); }));
  ASSERT_TRUE(div && mod);
  // Spot values first, then a grid checked against FloorDivRef.
  std::vector<int64_t> a = {-7, 7, -7, 7}, b = {2, -2, -2, 2};
  for (int64_t x = -9; x <= 9; ++x) {
    for (int64_t y : {-4, -3, -2, -1, 1, 2, 3, 4, 1000}) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  a.push_back(-1000000000000000001);
  b.push_back(7);
  auto q = RunElementwise<int64_t>(*div, kDLInt, std::pair{a, kDLInt}, std::pair{b, kDLInt});
  auto r = RunElementwise<int64_t>(*mod, kDLInt, std::pair{a, kDLInt}, std::pair{b, kDLInt});
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(q[i], FloorDivRef(a[i], b[i])) << a[i] << " floordiv " << b[i];
    ASSERT_EQ(r[i], a[i] - FloorDivRef(a[i], b[i]) * b[i]) << a[i] << " floormod " << b[i];
  }
  EXPECT_EQ(std::vector<int64_t>(q.begin(), q.begin() + 4), (std::vector<int64_t>{-4, -4, 3, 3}));
  EXPECT_EQ(std::vector<int64_t>(r.begin(), r.begin() + 4), (std::vector<int64_t>{1, -1, -1, 1}));
  EXPECT_EQ(q.back(), -142857142857142858);
  EXPECT_EQ(r.back(), 5);
}

TEST(CodegenLLVM, FloorDivOnInt32AndFloat) {
  auto i32 = Artifact::Build(ElementwiseModule(
      {DataType::Int(32), DataType::Int(32)}, DataType::Int(32),
      [](auto x) { return FloorDiv(x[0], x[1]) * I64(100) + FloorMod(x[0], x[1]); }));
  auto f32 =
      Artifact::Build(ElementwiseModule({DataType::Float(), DataType::Float()}, DataType::Float(),
                                        [](auto x) { return FloorMod(x[0], x[1]); }));
  ASSERT_TRUE(i32 && f32);
  auto q =
      RunElementwise<int32_t>(*i32, kDLInt, std::pair{std::vector<int32_t>{-7, 7, -7, 6}, kDLInt},
                              std::pair{std::vector<int32_t>{2, -2, -2, 3}, kDLInt});
  EXPECT_EQ(q, (std::vector<int32_t>{-4 * 100 + 1, -4 * 100 - 1, 3 * 100 - 1, 2 * 100}));
  auto m = RunElementwise<float>(*f32, kDLFloat,
                                 std::pair{std::vector<float>{-7.5f, 7.5f, 5.0f}, kDLFloat},
                                 std::pair{std::vector<float>{2.0f, -2.0f, 2.5f}, kDLFloat});
  EXPECT_EQ(m, (std::vector<float>{0.5f, -0.5f, 0.0f}));
}

TEST(CodegenLLVM, FloatToIntCastsSaturate) {
  auto to_i32 =
      Artifact::Build(ElementwiseModule({DataType::Float()}, DataType::Int(32), [](auto x) {
        return arith::Cast(DataType::Int(32), x[0]);
      }));
  auto to_u8 =
      Artifact::Build(ElementwiseModule({DataType::Float()}, DataType::UInt(8), [](auto x) {
        return arith::Cast(DataType::UInt(8), x[0]);
      }));
  ASSERT_TRUE(to_i32 && to_u8);
  std::vector<float> in = {1.5f, -1.5f, 2.9f, -2.9f, 1e10f, -1e10f, kNaN, kInf};
  auto i = RunElementwise<int32_t>(*to_i32, kDLInt, std::pair{in, kDLFloat});
  const int32_t max = std::numeric_limits<int32_t>::max(),
                min = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(i, (std::vector<int32_t>{1, -1, 2, -2, max, min, 0, max}));
  auto u = RunElementwise<uint8_t>(*to_u8, kDLUInt,
                                   std::pair{std::vector<float>{-1, 300, 3.7f}, kDLFloat});
  EXPECT_EQ(u, (std::vector<uint8_t>{0, 255, 3}));
}

TEST(CodegenLLVM, IntegerCastsExtendBySignedness) {
  auto from_i32 =
      Artifact::Build(ElementwiseModule({DataType::Int(32)}, DataType::Int(),
                                        [](auto x) { return arith::Cast(DataType::Int(), x[0]); }));
  auto from_u8 =
      Artifact::Build(ElementwiseModule({DataType::UInt(8)}, DataType::Int(),
                                        [](auto x) { return arith::Cast(DataType::Int(), x[0]); }));
  auto to_i8 = Artifact::Build(ElementwiseModule({DataType::Int()}, DataType::Int(8), [](auto x) {
    return arith::Cast(DataType::Int(8), x[0]);
  }));
  auto to_f32 = Artifact::Build(ElementwiseModule({DataType::Int()}, DataType::Float(), [](auto x) {
    return arith::Cast(DataType::Float(), x[0]);
  }));
  ASSERT_TRUE(from_i32 && from_u8 && to_i8 && to_f32);
  EXPECT_EQ(
      RunElementwise<int64_t>(*from_i32, kDLInt, std::pair{std::vector<int32_t>{-5, 7}, kDLInt}),
      (std::vector<int64_t>{-5, 7}));
  EXPECT_EQ(
      RunElementwise<int64_t>(*from_u8, kDLInt, std::pair{std::vector<uint8_t>{200, 1}, kDLUInt}),
      (std::vector<int64_t>{200, 1}));
  EXPECT_EQ(
      RunElementwise<int8_t>(*to_i8, kDLInt, std::pair{std::vector<int64_t>{300, -129}, kDLInt}),
      (std::vector<int8_t>{44, 127}));
  int64_t big = (int64_t{1} << 40) + 3;
  EXPECT_EQ(
      RunElementwise<float>(*to_f32, kDLFloat, std::pair{std::vector<int64_t>{-3, big}, kDLInt}),
      (std::vector<float>{-3.0f, static_cast<float>(big)}));
}

TEST(CodegenLLVM, FloatWidthCastsRound) {
  auto narrow =
      Artifact::Build(ElementwiseModule({DataType::Float(64)}, DataType::Float(), [](auto x) {
        return arith::Cast(DataType::Float(), x[0]);
      }));
  ASSERT_TRUE(narrow);
  std::vector<double> in = {0.1, 1e300, -1e-300, 3.0000001192092896};
  auto out = RunElementwise<float>(*narrow, kDLFloat, std::pair{in, kDLFloat});
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], static_cast<float>(in[i]));
}

TEST(CodegenLLVM, BoolsAreBytesInMemory) {
  auto to_bool =
      Artifact::Build(ElementwiseModule({DataType::Float()}, DataType::Bool(), [](auto x) {
        return arith::Binary(ExprKind::kGT, x[0], arith::FloatImm(0.0));
      }));
  auto from_bool =
      Artifact::Build(ElementwiseModule({DataType::Bool()}, DataType::Float(), [](auto x) {
        return arith::Cast(DataType::Float(), x[0]);
      }));
  auto int_to_bool =
      Artifact::Build(ElementwiseModule({DataType::Int()}, DataType::Int(32), [](auto x) {
        return arith::Cast(DataType::Int(32), arith::Cast(DataType::Bool(), x[0]));
      }));
  ASSERT_TRUE(to_bool && from_bool && int_to_bool);
  EXPECT_EQ(RunElementwise<uint8_t>(*to_bool, kDLUInt,
                                    std::pair{std::vector<float>{2, -1, 0, kNaN}, kDLFloat}),
            (std::vector<uint8_t>{1, 0, 0, 0}));
  EXPECT_EQ(RunElementwise<float>(*from_bool, kDLFloat,
                                  std::pair{std::vector<uint8_t>{0, 1, 2}, kDLUInt}),
            (std::vector<float>{0, 1, 1}));
  EXPECT_EQ(RunElementwise<int32_t>(*int_to_bool, kDLInt,
                                    std::pair{std::vector<int64_t>{0, -4, 9}, kDLInt}),
            (std::vector<int32_t>{0, 1, 1}));
}

TEST(CodegenLLVM, SelectCompareAndLogic) {
  // (a < b and not a == 0) or a >= 10 ? a - b : a * b
  auto artifact = Artifact::Build(
      ElementwiseModule({DataType::Int(), DataType::Int()}, DataType::Int(), [](auto x) {
        PrimExpr cond =
            arith::Binary(ExprKind::kOr,
                          arith::Binary(ExprKind::kAnd, arith::Binary(ExprKind::kLT, x[0], x[1]),
                                        arith::Not(arith::Binary(ExprKind::kEQ, x[0], I64(0)))),
                          arith::Binary(ExprKind::kGE, x[0], I64(10)));
        return arith::Select(cond, x[0] - x[1], x[0] * x[1]);
      }));
  ASSERT_TRUE(artifact);
  std::vector<int64_t> a = {1, 0, 5, 12, -3}, b = {2, 2, 3, 20, -1};
  auto out = RunElementwise<int64_t>(*artifact, kDLInt, std::pair{a, kDLInt}, std::pair{b, kDLInt});
  EXPECT_EQ(out, (std::vector<int64_t>{-1, 0, 15, -8, -2}));
}

TEST(CodegenLLVM, MinMaxPropagateNaNAndCompareSigned) {
  auto fmin =
      Artifact::Build(ElementwiseModule({DataType::Float(), DataType::Float()}, DataType::Float(),
                                        [](auto x) { return Min(x[0], x[1]); }));
  auto fmax =
      Artifact::Build(ElementwiseModule({DataType::Float(), DataType::Float()}, DataType::Float(),
                                        [](auto x) { return Max(x[0], x[1]); }));
  auto imin = Artifact::Build(
      ElementwiseModule({DataType::Int(), DataType::Int()}, DataType::Int(),
                        [](auto x) { return Min(x[0], x[1]) * I64(1000) + Max(x[0], x[1]); }));
  ASSERT_TRUE(fmin && fmax && imin);
  std::vector<float> a = {1, kNaN, 3, -kInf}, b = {kNaN, 1, -2, 5};
  auto lo = RunElementwise<float>(*fmin, kDLFloat, std::pair{a, kDLFloat}, std::pair{b, kDLFloat});
  auto hi = RunElementwise<float>(*fmax, kDLFloat, std::pair{a, kDLFloat}, std::pair{b, kDLFloat});
  EXPECT_TRUE(std::isnan(lo[0]) && std::isnan(lo[1]) && std::isnan(hi[0]) && std::isnan(hi[1]));
  EXPECT_EQ(lo[2], -2.0f);
  EXPECT_EQ(hi[2], 3.0f);
  EXPECT_EQ(lo[3], -kInf);
  EXPECT_EQ(hi[3], 5.0f);
  auto i = RunElementwise<int64_t>(*imin, kDLInt, std::pair{std::vector<int64_t>{-5, 7}, kDLInt},
                                   std::pair{std::vector<int64_t>{3, -9}, kDLInt});
  EXPECT_EQ(i, (std::vector<int64_t>{-5 * 1000 + 3, -9 * 1000 + 7}));
}

TEST(CodegenLLVM, LetAndIfThenElse) {
  PrimExpr n = arith::MakeVar("n"), i = arith::MakeVar("i"),
           t = arith::MakeVar("t", DataType::Float());
  Buffer x = arith::MakeBuffer("x", DataType::Float(), {n});
  Buffer y = arith::MakeBuffer("y", DataType::Float(), {n});
  ir::PrimFunc kernel{.name = "elementwise", .buffers = {x, y}, .scalars = {n}};
  kernel.body = ir::For(
      i, I64(0), n, ForKind::kSerial,
      ir::Let(t, arith::Load(x, {i}) * arith::FloatImm(2.0),
              ir::IfThenElse(arith::Binary(ExprKind::kGT, t, arith::FloatImm(10.0)),
                             ir::Store(y, {i}, t), ir::Store(y, {i}, arith::FloatImm(0.0) - t))));
  ir::IRModule module =
      ElementwiseModule({DataType::Float()}, DataType::Float(), [](auto x) { return x[0]; });
  module.prim_funcs["elementwise"] = kernel;
  auto artifact = Artifact::Build(module);
  ASSERT_TRUE(artifact);
  auto out =
      RunElementwise<float>(*artifact, kDLFloat, std::pair{std::vector<float>{1, 6, -2}, kDLFloat});
  EXPECT_EQ(out, (std::vector<float>{-2, 12, 4}));
}

// A prefetch is a hint: the kernel with one computes what it computes without, and the
// prefetch reaches the machine code as llvm.prefetch of the element's address. Its element
// may lie past the buffer (here every one of them does): it never faults.
TEST(CodegenLLVM, PrefetchIsAHintThatChangesNoValue) {
  PrimExpr n = arith::MakeVar("n"), i = arith::MakeVar("i");
  Buffer x = arith::MakeBuffer("x", DataType::Float(), {n});
  Buffer y = arith::MakeBuffer("y", DataType::Float(), {n});
  ir::PrimFunc kernel{.name = "elementwise", .buffers = {x, y}, .scalars = {n}};
  PrimExpr ahead = i + I64(4096);
  kernel.body =
      ir::For(i, I64(0), n, ForKind::kSerial,
              ir::Seq({ir::Evaluate(arith::Call(DataType::Int(32), ir::intrinsic::kPrefetch,
                                                {arith::Load(x, {ahead})})),
                       ir::Store(y, {i}, arith::Load(x, {i}) * arith::FloatImm(3.0))}));
  ir::IRModule module =
      ElementwiseModule({DataType::Float()}, DataType::Float(), [](auto x) { return x[0]; });
  module.prim_funcs["elementwise"] = kernel;
  auto text = EmitLLVMText(module, "", HostTarget());
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("call void @llvm.prefetch"), std::string::npos) << *text;
  auto artifact = Artifact::Build(module);
  ASSERT_TRUE(artifact);
  auto out = RunElementwise<float>(*artifact, kDLFloat,
                                   std::pair{std::vector<float>{1, -2, 0.5f}, kDLFloat});
  EXPECT_EQ(out, (std::vector<float>{3, -6, 1.5f}));
}

// kiln.transpose(y[dst], x[src], n, dst_row, src_row) moves the n x n block whose row c starts
// at x[src + c * src_row] to y, column c of it to y[dst + c * dst_row], with n loads, n
// log2(n) shuffles and n stores; nothing else of y changes. Blocks of 4 and of 16 (AVX-512's
// vectors), rows further apart than n, src's rows a constant or a run-time distance apart (an
// expression of the buffer's size, as channel planes of a symbolic plane are).
TEST(CodegenLLVM, TransposeMovesASquareBlockThroughRegisters) {
  struct Case {
    int64_t n, dst_row, src_row, dst, src;
  };
  for (const Case& c : {Case{4, 6, 5, 3, 2}, Case{16, 17, 20, 1, 5}}) {
    for (bool symbolic : {false, true}) {
      SCOPED_TRACE(std::to_string(c.n) + (symbolic ? ", symbolic src_row" : ""));
      const int64_t elements =
          std::max(c.dst + (c.n - 1) * c.dst_row, c.src + (c.n - 1) * c.src_row) + c.n;
      PrimExpr size = arith::MakeVar("n"), i = arith::MakeVar("i");
      // elements / (elements / src_row) is src_row for both cases (25 / 5, 321 / 16).
      ASSERT_EQ(elements / (elements / c.src_row), c.src_row);
      PrimExpr src_row = symbolic ? FloorDiv(size, I64(elements / c.src_row)) : I64(c.src_row);
      Buffer x = arith::MakeBuffer("x", DataType::Float(), {size});
      Buffer y = arith::MakeBuffer("y", DataType::Float(), {size});
      ir::PrimFunc kernel{.name = "elementwise", .buffers = {x, y}, .scalars = {size}};
      kernel.body = ir::Seq(
          {ir::For(i, I64(0), size, ForKind::kSerial, ir::Store(y, {i}, arith::FloatImm(-1.0))),
           ir::Evaluate(arith::Call(DataType::Int(32), ir::intrinsic::kTranspose,
                                    {arith::Load(y, {I64(c.dst)}), arith::Load(x, {I64(c.src)}),
                                     I64(c.n), I64(c.dst_row), src_row}))});
      ir::IRModule module =
          ElementwiseModule({DataType::Float()}, DataType::Float(), [](auto x) { return x[0]; });
      module.prim_funcs["elementwise"] = kernel;
      ASSERT_TRUE(ir::VerifyModule(module).ok()) << ir::VerifyModule(module);
      auto text = EmitLLVMText(module, "", HostTarget());
      ASSERT_TRUE(text.ok()) << text.status();
      EXPECT_NE(text->find("shufflevector <" + std::to_string(c.n) + " x float>"),
                std::string::npos)
          << *text;
      auto artifact = Artifact::Build(module);
      ASSERT_TRUE(artifact);
      std::vector<float> in(elements), expected(elements, -1.0f);
      for (int64_t e = 0; e < elements; ++e) in[e] = static_cast<float>(e);
      for (int64_t r = 0; r < c.n; ++r) {
        for (int64_t col = 0; col < c.n; ++col) {
          expected[c.dst + r * c.dst_row + col] = in[c.src + col * c.src_row + r];
        }
      }
      EXPECT_EQ(RunElementwise<float>(*artifact, kDLFloat, std::pair{in, kDLFloat}), expected);
    }
  }
}

TEST(CodegenLLVM, AllocateGivesKernelLocalScratch) {
  // Reverses each block of 4 through a local buffer.
  PrimExpr n = arith::MakeVar("n"), blk = arith::MakeVar("blk"), j = arith::MakeVar("j");
  Buffer x = arith::MakeBuffer("x", DataType::Float(), {n});
  Buffer y = arith::MakeBuffer("y", DataType::Float(), {n});
  Buffer tmp = arith::MakeBuffer("tmp", DataType::Float(), {I64(4)});
  ir::PrimFunc kernel{.name = "elementwise", .buffers = {x, y}, .scalars = {n}};
  PrimExpr base = blk * I64(4);
  kernel.body = ir::For(
      blk, I64(0), FloorDiv(n, I64(4)), ForKind::kSerial,
      ir::Allocate(tmp,
                   ir::Seq({ir::For(j, I64(0), I64(4), ForKind::kUnrolled,
                                    ir::Store(tmp, {j}, arith::Load(x, {base + j}))),
                            ir::For(j, I64(0), I64(4), ForKind::kSerial,
                                    ir::Store(y, {base + j}, arith::Load(tmp, {I64(3) - j})))})));
  ir::IRModule module =
      ElementwiseModule({DataType::Float()}, DataType::Float(), [](auto x) { return x[0]; });
  module.prim_funcs["elementwise"] = kernel;
  auto artifact = Artifact::Build(module);
  ASSERT_TRUE(artifact);
  auto out = RunElementwise<float>(*artifact, kDLFloat,
                                   std::pair{std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, kDLFloat});
  EXPECT_EQ(out, (std::vector<float>{4, 3, 2, 1, 8, 7, 6, 5}));
}

TEST(CodegenLLVMDeathTest, AllocateWithSymbolicSizeIsAnInternalError) {
  PrimExpr n = arith::MakeVar("n");
  Buffer tmp = arith::MakeBuffer("tmp", DataType::Float(), {n});
  ir::IRModule module =
      ElementwiseModule({DataType::Float()}, DataType::Float(), [](auto x) { return x[0]; });
  ir::PrimFunc& kernel = module.prim_funcs["elementwise"];
  kernel.body = ir::Allocate(tmp, kernel.body);
  EXPECT_DEATH((void)EmitLLVMText(module, "", HostTarget()), "tmp.*needs a constant size");
}

TEST(CodegenLLVM, ConstantsAreAlignedReadOnlyData) {
  ir::NDArray bias;
  bias.dtype = DataType::Float();
  bias.shape = {4};
  for (float v : {10.0f, 20.0f, 30.0f, 40.0f}) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bias.bytes.insert(bias.bytes.end(), p, p + 4);
  }
  ir::NDArray unused;
  unused.bytes.assign(1 << 16, 7);
  ir::IRModule module = ElementwiseModule({DataType::Float(), DataType::Float()}, DataType::Float(),
                                          [](auto x) { return x[0] + x[1]; });
  module.constants = {std::make_shared<ir::NDArray>(bias), std::make_shared<ir::NDArray>(unused)};
  // kiln_run: out = in + constant 0; address(): out_i64[0] = address of constant 0.
  PrimExpr n = arith::MakeVar("n");
  PrimExpr constant = Intrinsic(DataType::Handle(), ir::intrinsic::kConstant, {I64(0)});
  module.prim_funcs[KILN_SYMBOL_RUN].body = ir::Let(
      n, InputShape(0, 0), CallKernel("elementwise", {InputData(0), constant, OutputData(0), n}));
  PrimExpr p = arith::MakeVar("p");
  Buffer out = arith::MakeBuffer("out", DataType::Int(), {I64(1)});
  module.prim_funcs["store_address"] = {.name = "store_address",
                                        .buffers = {out},
                                        .scalars = {p},
                                        .body = ir::Store(out, {I64(0)}, p)};
  module.prim_funcs["address"] = {
      .name = "address",
      .body = CallKernel("store_address", {OutputData(0), arith::Cast(DataType::Int(), constant)}),
      .is_host = true};
  auto artifact = Artifact::Build(module);
  ASSERT_TRUE(artifact);
  auto sum = RunElementwise<float>(*artifact, kDLFloat,
                                   std::pair{std::vector<float>{1, 2, 3, 4}, kDLFloat});
  EXPECT_EQ(sum, (std::vector<float>{11, 22, 33, 44}));
  Tensor<int64_t> address{{0}, {1}};
  DLTensor address_dl = address.dl(kDLInt);
  TestEnv env;
  ASSERT_EQ(artifact->Entry("address")(&env.env, nullptr, &address_dl), 0);
  EXPECT_NE(address.data[0], 0);
  EXPECT_EQ(address.data[0] % 64, 0);
  EXPECT_LT(artifact->bytes.size(), size_t{1} << 16) << "an unused constant was embedded";
}

ir::IRModule IdiomAndMathModule() {
  ir::IRModule module = ElementwiseModule({DataType::Float()}, DataType::Float(), [](auto x) {
    PrimExpr v = x[0];
    for (const char* f : {"exp", "log", "tanh", "sigmoid", "erf", "floor", "ceil", "round", "trunc",
                          "sqrt", "fabs"}) {
      v = v + arith::Call(DataType::Float(), f, {x[0]});
    }
    PrimExpr d = arith::Cast(DataType::Float(64), x[0]);
    PrimExpr dv = arith::Call(DataType::Float(64), "pow", {d, d}) +
                  arith::Call(DataType::Float(64), "exp", {d}) +
                  arith::Call(DataType::Float(64), "erf", {d}) +
                  arith::Call(DataType::Float(64), "tanh", {d}) +
                  arith::Call(DataType::Float(64), "log", {d});
    return v + arith::Call(DataType::Float(), "pow", {x[0], x[0]}) +
           arith::Cast(DataType::Float(), dv);
  });
  // Loops LLVM would like to turn into memset and memcpy calls.
  PrimExpr n = arith::MakeVar("n"), i = arith::MakeVar("i");
  Buffer a = arith::MakeBuffer("a", DataType::Float(), {n});
  Buffer b = arith::MakeBuffer("b", DataType::Float(), {n});
  module.prim_funcs["fill_copy"] = {
      .name = "fill_copy",
      .buffers = {a, b},
      .scalars = {n},
      .body = ir::Seq(
          {ir::For(i, I64(0), n, ForKind::kSerial, ir::Store(a, {i}, arith::FloatImm(0.0))),
           ir::For(i, I64(0), n, ForKind::kSerial, ir::Store(b, {i}, arith::Load(a, {i})))})};
  PrimExpr hn = arith::MakeVar("n");
  module.prim_funcs["fill"] = {
      .name = "fill",
      .body =
          ir::Let(hn, InputShape(0, 0), CallKernel("fill_copy", {InputData(0), OutputData(0), hn})),
      .is_host = true};
  return module;
}

TEST(CodegenLLVM, SharedObjectImportsNothing) {
  auto so = BuildSharedObject(IdiomAndMathModule(), "kiln-signature 1\n", HostTarget());
  ASSERT_TRUE(so.ok()) << so.status();
  auto symbols = ListDynamicSymbols(*so);
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  std::set<std::string> exported;
  for (const DynamicSymbol& s : *symbols) {
    EXPECT_FALSE(s.undefined) << "the artifact imports " << s.name;
    exported.insert(s.name);
  }
  for (const char* name :
       {KILN_SYMBOL_RUN, KILN_SYMBOL_ABI_VERSION, KILN_SYMBOL_SIGNATURE, "fill"}) {
    EXPECT_TRUE(exported.count(name)) << name << " is not exported";
  }
  EXPECT_FALSE(exported.count("elementwise")) << "kernels stay internal";
  EXPECT_FALSE(exported.count("fill_copy"));
}

TEST(CodegenLLVM, OtherTargetsLinkSelfContainedToo) {
  ir::Target aarch64{"aarch64", "aarch64-unknown-linux-gnu", "generic", "", 128, "model.so"};
  ir::Target riscv64{"riscv64", "riscv64-unknown-linux-gnu", "generic-rv64", "+m,+a,+f,+d,+c", 128,
                     "model.so"};
  for (const ir::Target& target : {aarch64, riscv64}) {
    auto so = BuildSharedObject(IdiomAndMathModule(), "kiln-signature 1\n", target);
    ASSERT_TRUE(so.ok()) << target.triple << ": " << so.status();
    auto symbols = ListDynamicSymbols(*so);
    ASSERT_TRUE(symbols.ok()) << symbols.status();
    EXPECT_FALSE(symbols->empty());
    for (const DynamicSymbol& s : *symbols) {
      EXPECT_FALSE(s.undefined) << target.triple << " artifact imports " << s.name;
    }
  }
}

TEST(CodegenLLVM, IdiomLoopsStillRunWithoutLibc) {
  auto artifact = Artifact::Build(IdiomAndMathModule());
  ASSERT_TRUE(artifact);
  std::vector<float> a(100, 5.0f), b(100, 9.0f);
  std::vector<int64_t> shape = {100};
  DLTensor in = View(a.data(), kDLFloat, 4, shape), out = View(b.data(), kDLFloat, 4, shape);
  TestEnv env;
  ASSERT_EQ(artifact->Entry("fill")(&env.env, &in, &out), 0);
  EXPECT_EQ(a, std::vector<float>(100, 0.0f));
  EXPECT_EQ(b, std::vector<float>(100, 0.0f));
}

TEST(CodegenLLVM, ExportsAbiVersionAndSignature) {
  const std::string signature = "kiln-signature 1\ninput x f32 1 n\noutput y f32 1 n\n";
  auto artifact = Artifact::Build(AddScaleModule(), signature);
  ASSERT_TRUE(artifact);
  auto version = reinterpret_cast<KilnAbiVersionFn>(artifact->Symbol(KILN_SYMBOL_ABI_VERSION));
  auto get_signature = reinterpret_cast<KilnSignatureFn>(artifact->Symbol(KILN_SYMBOL_SIGNATURE));
  ASSERT_TRUE(version && get_signature);
  EXPECT_EQ(version(), KILN_ABI_VERSION_CPU);
  EXPECT_EQ(std::string(get_signature()), signature);
}

TEST(CodegenLLVM, LLVMTextNamesFunctionsAndVectorizes) {
  auto text = EmitLLVMText(AddScaleModule(), "sig", HostTarget());
  ASSERT_TRUE(text.ok()) << text.status();
  for (const char* needle :
       {"i32 @kiln_run(ptr", "i32 @kiln_infer_shapes(ptr", "i32 @kiln_abi_version()",
        "ptr @kiln_signature()", "void @add(ptr", "void @scale(ptr", "<4 x float>"}) {
    EXPECT_NE(text->find(needle), std::string::npos) << needle << " missing from\n" << *text;
  }
  // Only LLVM intrinsics may be declared: nothing external is called.
  for (size_t at = text->find("\ndeclare"); at != std::string::npos;
       at = text->find("\ndeclare", at + 1)) {
    std::string line = text->substr(at + 1, text->find('\n', at + 1) - at - 1);
    EXPECT_NE(line.find("@llvm."), std::string::npos) << line;
  }
}

TEST(CodegenLLVM, LinkerFailureIsInternalWithItsOutput) {
  setenv("KILN_LD_LLD", "/bin/false", 1);
  auto failed = BuildSharedObject(AddScaleModule(), "", HostTarget());
  setenv("KILN_LD_LLD", "/nonexistent/ld.lld", 1);
  auto missing = BuildSharedObject(AddScaleModule(), "", HostTarget());
  unsetenv("KILN_LD_LLD");
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(failed.status().message().find("ld.lld failed (exit 1)"), std::string::npos)
      << failed.status();
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(missing.status().message().find("cannot run the linker"), std::string::npos)
      << missing.status();
}

TEST(CodegenLLVM, UnknownTargetIsInvalidArgument) {
  ir::Target target = HostTarget();
  target.preset = "bogus";
  target.triple = "nosucharch-unknown-linux-gnu";
  auto text = EmitLLVMText(AddScaleModule(), "", target);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(text.status().message().find("bogus"), std::string::npos) << text.status();
}

TEST(CodegenLLVM, ReservedFunctionNameIsRejected) {
  ir::IRModule module = AddScaleModule();
  module.prim_funcs[KILN_SYMBOL_SIGNATURE] = {.name = KILN_SYMBOL_SIGNATURE, .is_host = true};
  auto text = EmitLLVMText(module, "", HostTarget());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInternal);
}

TEST(CodegenLLVM, ConcurrentBuildsAreIndependent) {
  const float factors[] = {2.0f, 3.0f, 5.0f, 7.0f};
  std::vector<absl::StatusOr<std::string>> results(4, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      ir::IRModule module = ElementwiseModule({DataType::Float()}, DataType::Float(), [&](auto x) {
        return arith::Call(DataType::Float(), "exp", {x[0]}) * arith::FloatImm(factors[t]);
      });
      results[t] = BuildSharedObject(module, "sig" + std::to_string(t), HostTarget());
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 4; ++t) {
    ASSERT_TRUE(results[t].ok()) << results[t].status();
    ir::IRModule module = ElementwiseModule({DataType::Float()}, DataType::Float(), [&](auto x) {
      return arith::Call(DataType::Float(), "exp", {x[0]}) * arith::FloatImm(factors[t]);
    });
    auto artifact = Artifact::Build(module, "sig" + std::to_string(t));
    ASSERT_TRUE(artifact);
    EXPECT_EQ(artifact->bytes, *results[t]) << "builds are deterministic";
    auto out =
        RunElementwise<float>(*artifact, kDLFloat, std::pair{std::vector<float>{0.0f}, kDLFloat});
    EXPECT_EQ(out[0], factors[t]);
  }
}

}  // namespace
}  // namespace kiln::codegen::testing
