// The library rule: matmul and conv kernels as calls to OpenBLAS's cblas_sgemm or oneDNN's
// dnnl_sgemm for a target with libraries=openblas or libraries=dnnl, chosen the way the tuner
// chooses a trace. Artifacts are compared with the reference interpreter, on one and several
// threads; they need the library (libopenblas.so.0, libdnnl.so.2) and say so (DT_NEEDED,
// manifest). A target without the library never offers the rule.
#include <dlfcn.h>
#include <elf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/codegen/codegen.h"
#include "compiler/codegen/shared_object.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/manifest.h"
#include "compiler/driver/pipeline.h"
#include "compiler/interp/interpreter.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/verifier.h"
#include "compiler/schedule/schedule.h"
#include "compiler/tune/measure.h"
#include "tests/support/conv_case.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/schedule_check.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const char kTarget[] = "triple=x86_64-linux-gnu;libraries=openblas";

// The target that has `library`.
std::string TargetWith(const std::string& library) {
  return "triple=x86_64-linux-gnu;libraries=" + library;
}

// How the kernels call `library`'s sgemm, up to the flags: "cblas_sgemm(101, " or
// "dnnl_sgemm(".
std::string SgemmCall(const std::string& library, bool trans_a = false, bool trans_b = false) {
  if (library == "dnnl") {
    return absl::StrCat("dnnl_sgemm(", trans_a ? 84 : 78, ", ", trans_b ? 84 : 78, ", ");
  }
  return absl::StrCat("cblas_sgemm(101, ", trans_a ? 112 : 111, ", ", trans_b ? 112 : 111, ", ");
}

// Whether artifacts that call `library` can run here. OpenBLAS: when the build found it.
// oneDNN: its runtime library must be installed (libdnnl2, scripts/install-deps.sh); a test
// that needs it fails when it is missing.
bool CanRun(const std::string& library) {
  if (library == "dnnl") {
    void* handle = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(handle, nullptr) << "libdnnl.so.2 cannot be loaded (" << dlerror()
                               << "): install libdnnl2 (scripts/install-deps.sh)";
    return handle != nullptr;
  }
#ifdef KILN_HAVE_OPENBLAS
  return true;
#else
  return false;
#endif
}

// The tuner's choice of `library`'s form for every kernel that offers it.
schedule::ChooseTrace Choose(const std::string& library) {
  return [library](const schedule::TunableKernel& kernel) -> std::optional<schedule::Trace> {
    for (const schedule::SearchSpace& space : kernel.spaces) {
      if (space.rule == library) return space.Default();
    }
    return std::nullopt;
  };
}

// The pipeline's passes with the schedule pass choosing traces by `choose`, checked by the
// verifier after each.
absl::StatusOr<ir::IRModule> Lower(const std::string& onnx, const ir::Target& target,
                                   const schedule::ChooseTrace& choose,
                                   const std::string& stop_after = "") {
  KILN_ASSIGN_OR_RETURN(ir::IRModule module, driver::ImportModel(onnx));
  ir::PassContext context;
  context.target = target;
  for (const driver::Pass& pass : driver::Pipeline()) {
    if (pass.name == "schedule") {
      KILN_ASSIGN_OR_RETURN(module, schedule::Schedule(std::move(module), target, choose));
    } else {
      KILN_ASSIGN_OR_RETURN(module, pass.run(std::move(module), context));
    }
    KILN_RETURN_IF_ERROR(ir::VerifyModule(module));
    if (pass.name == stop_after) break;
  }
  return module;
}

struct LibraryArtifact {
  std::string kernels;  // the scheduled kernels, printed
  driver::Artifact artifact;
};

// `onnx` compiled for `target_text` with traces chosen by `choose`, as CompileModel builds it.
LibraryArtifact CompileWith(const std::string& onnx, const std::string& target_text,
                            const schedule::ChooseTrace& choose) {
  LibraryArtifact out;
  ir::Target target = *ir::ParseTarget(target_text);
  absl::StatusOr<ir::IRModule> imported = driver::ImportModel(onnx);
  absl::StatusOr<ir::IRModule> module = Lower(onnx, target, choose);
  EXPECT_TRUE(imported.ok() && module.ok()) << module.status();
  if (!imported.ok() || !module.ok()) return out;
  out.kernels = ir::ToString(*module);
  const ir::Function& main = imported->functions.at("main");
  absl::StatusOr<std::string> so =
      codegen::BuildSharedObject(*module, driver::SignatureText(main), target);
  EXPECT_TRUE(so.ok()) << so.status();
  if (!so.ok()) return out;
  out.artifact.file_name = "model.so";
  out.artifact.bytes = *so;
  driver::ManifestInfo info;
  info.artifact_file = "model.so";
  info.libraries = codegen::LibrariesCalled(*module);
  out.artifact.manifest_json = driver::ManifestJson(main, target, info);
  return out;
}

// The DT_NEEDED entries of an ELF64 shared object.
std::vector<std::string> NeededLibraries(const std::string& so) {
  const char* base = so.data();
  Elf64_Ehdr header;
  std::memcpy(&header, base, sizeof header);
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  std::memcpy(segments.data(), base + header.e_phoff, header.e_phnum * sizeof(Elf64_Phdr));
  // Addresses in the dynamic section are virtual; the loadable segments map them to offsets.
  auto offset_of = [&](uint64_t address) -> uint64_t {
    for (const Elf64_Phdr& s : segments) {
      if (s.p_type == PT_LOAD && address >= s.p_vaddr && address < s.p_vaddr + s.p_filesz) {
        return address - s.p_vaddr + s.p_offset;
      }
    }
    return 0;
  };
  std::vector<uint64_t> needed;
  uint64_t strtab = 0;
  for (const Elf64_Phdr& s : segments) {
    if (s.p_type != PT_DYNAMIC) continue;
    for (uint64_t at = s.p_offset; at + sizeof(Elf64_Dyn) <= s.p_offset + s.p_filesz;
         at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn entry;
      std::memcpy(&entry, base + at, sizeof entry);
      if (entry.d_tag == DT_NEEDED) needed.push_back(entry.d_un.d_val);
      if (entry.d_tag == DT_STRTAB) strtab = entry.d_un.d_ptr;
    }
  }
  std::vector<std::string> names;
  for (uint64_t name : needed) names.push_back(base + offset_of(strtab) + name);
  return names;
}

// Compiles `onnx` with `library`'s form, checks that sgemm is called as `call` says, and
// compares the artifact with the interpreter for each input set, on 1 and 3 threads.
void ExpectMatchesInterpreter(const std::string& library, const std::string& onnx,
                              const std::string& call,
                              const std::vector<std::vector<ir::NDArray>>& input_sets,
                              const std::vector<std::vector<int64_t>>& out_shapes) {
  LibraryArtifact compiled = CompileWith(onnx, TargetWith(library), Choose(library));
  EXPECT_THAT(compiled.kernels, HasSubstr(call)) << compiled.kernels;
  EXPECT_THAT(compiled.kernels, Not(HasSubstr("packed_b"))) << compiled.kernels;
  if (!CanRun(library)) GTEST_SKIP() << library << " is not installed: artifacts not run";
  std::unique_ptr<runtime::Model> model = LoadArtifact(compiled.artifact);
  ASSERT_NE(model, nullptr);
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  for (size_t s = 0; s < input_sets.size(); ++s) {
    auto expected = interp::Run(*module, input_sets[s]);
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (int threads : {1, 3}) {
      ir::NDArray out = ir::NDArray::Zeros(arith::DataType::Float(32), out_shapes[s]);
      std::string error;
      ASSERT_TRUE(model->SetNumThreads(threads, &error)) << error;
      out = RunModel(*model, input_sets[s], {out})[0];
      ExpectClose(out, (*expected)[0],
                  "set " + std::to_string(s) + " threads=" + std::to_string(threads));
    }
  }
}

// Every test runs once per library.
class LibraryRuleTest : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Libraries, LibraryRuleTest, ::testing::Values("openblas", "dnnl"),
                         [](const auto& info) { return info.param; });

std::string MatmulModel(std::vector<Dim> a, std::vector<Dim> b, std::vector<Dim> y) {
  OnnxBuilder builder;
  builder.Input("a", a);
  builder.Input("b", b);
  builder.Node("MatMul", {"a", "b"}, {"y"});
  builder.Output("y", y);
  return builder.Serialize();
}

// 150 rows are three tasks of up to 64 rows; 1100 columns three of up to 512.
TEST_P(LibraryRuleTest, StaticShapesMatchTheInterpreter) {
  ExpectMatchesInterpreter(GetParam(), MatmulModel({150, 300}, {300, 70}, {150, 70}),
                           SgemmCall(GetParam()),
                           {{RandomArray({150, 300}, 1), RandomArray({300, 70}, 2)}}, {{150, 70}});
  ExpectMatchesInterpreter(GetParam(), MatmulModel({3, 20}, {20, 1100}, {3, 1100}),
                           SgemmCall(GetParam()),
                           {{RandomArray({3, 20}, 1), RandomArray({20, 1100}, 2)}}, {{3, 1100}});
}

TEST_P(LibraryRuleTest, SymbolicRowsMatchTheInterpreter) {
  std::vector<std::vector<ir::NDArray>> inputs;
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t m : {1, 13, 64, 130}) {
    inputs.push_back({RandomArray({m, 45}, 3), RandomArray({45, 19}, 4)});
    shapes.push_back({m, 19});
  }
  ExpectMatchesInterpreter(GetParam(), MatmulModel({"m", 45}, {45, 19}, {"m", 19}),
                           SgemmCall(GetParam()), inputs, shapes);
}

TEST_P(LibraryRuleTest, BatchedMatmulsMatchTheInterpreter) {
  // Both operands batched, and a shared B broadcast over A's batch.
  ExpectMatchesInterpreter(
      GetParam(), MatmulModel({3, "m", 7}, {3, 7, 11}, {3, "m", 11}), SgemmCall(GetParam()),
      {{RandomArray({3, 70, 7}, 5), RandomArray({3, 7, 11}, 6)}}, {{3, 70, 11}});
  ExpectMatchesInterpreter(GetParam(), MatmulModel({2, "m", 5}, {5, 19}, {2, "m", 19}),
                           SgemmCall(GetParam()),
                           {{RandomArray({2, 9, 5}, 7), RandomArray({5, 19}, 8)}}, {{2, 9, 19}});
}

// No ONNX op legalizes to a matmul reading A as [k, i] or B as [j, k] in place (Gemm's
// transposes become transpose kernels first), so the kernels are written out, and the JIT
// compares the library form with the generated one on random inputs.
TEST_P(LibraryRuleTest, TransposedOperandsMatchTheGeneratedKernel) {
  if (!CanRun(GetParam())) GTEST_SKIP() << GetParam() << " is not installed";
  struct Case {
    const char* a;
    const char* b;
    const char* a_load;
    const char* b_load;
    bool trans_a, trans_b;
  };
  for (const Case& c : {Case{"f32[m, 30]", "f32[20, 30]", "A[i, k]", "B[j, k]", false, true},
                        Case{"f32[30, m]", "f32[30, 20]", "A[k, i]", "B[k, j]", true, false},
                        Case{"f32[30, m]", "f32[20, 30]", "A[k, i]", "B[j, k]", true, true}}) {
    SCOPED_TRACE(c.a_load + std::string(" ") + c.b_load);
    absl::StatusOr<ir::IRModule> module = ir::ParseModule(
        absl::StrCat("prim_func @mm(A: ", c.a, ", B: ", c.b, ", C: f32[m, 20], m: i64) {\n",
                     "  for i in range(0, m) serial {\n"
                     "    for j in range(0, 20) serial {\n"
                     "      C[i, j] = 0.0\n"
                     "      for k in range(0, 30) serial {\n"
                     "        C[i, j] = C[i, j] + ",
                     c.a_load, " * ", c.b_load,
                     "\n"
                     "      }\n"
                     "    }\n"
                     "  }\n"
                     "}\n"));
    ASSERT_TRUE(module.ok()) << module.status();
    ir::Target target = *ir::ParseTarget(TargetWith(GetParam()));
    auto library = schedule::Schedule(*module, target, Choose(GetParam()));
    auto reference = schedule::Schedule(*module, target);
    ASSERT_TRUE(library.ok() && reference.ok());
    EXPECT_THAT(ir::ToString(*library), HasSubstr(SgemmCall(GetParam(), c.trans_a, c.trans_b)));
    tune::MeasureOptions options;
    options.target = target;
    auto measured = tune::MeasureKernel(*library, *reference, "mm", {{"m", 70}}, options);
    ASSERT_TRUE(measured.ok()) << measured.status();
    EXPECT_TRUE(measured->ok) << measured->failure;
  }
}

TEST_P(LibraryRuleTest, FusedBiasAndReluMatchTheInterpreter) {
  OnnxBuilder b;
  b.Input("a", {"m", 40});
  b.Input("w", {40, 24});
  b.Input("bias", {24});
  b.Node("MatMul", {"a", "w"}, {"mm"});
  b.Node("Add", {"mm", "bias"}, {"biased"});
  b.Node("Relu", {"biased"}, {"y"});
  b.Output("y", {"m", 24});
  std::string onnx = b.Serialize();
  EXPECT_THAT(CompileWith(onnx, TargetWith(GetParam()), Choose(GetParam())).kernels,
              HasSubstr("fused_matmul_add_relu"));
  ExpectMatchesInterpreter(
      GetParam(), onnx, SgemmCall(GetParam()),
      {{RandomArray({70, 40}, 11), RandomArray({40, 24}, 12), RandomArray({24}, 13)}}, {{70, 24}});
}

// The conv, compiled with `library`'s trace, calls it and matches the interpreter at batches
// 1 and 2.
void ExpectConvMatchesInterpreter(const ConvCase& conv, const std::string& library,
                                  const std::string& call) {
  SCOPED_TRACE(conv.name);
  std::vector<std::vector<ir::NDArray>> inputs;
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t n : {1, 2}) {
    inputs.push_back({RandomArray({n, conv.c, conv.h, conv.w}, 20 + n)});
    if (conv.residual) inputs.back().push_back(RandomArray(conv.OutShape(n), 30 + n));
    shapes.push_back(conv.OutShape(n));
  }
  ExpectMatchesInterpreter(library, conv.Model(), call, inputs, shapes);
}

// A pointwise conv is a matmul over the plane: weights as A, the input plane as B, in place.
TEST_P(LibraryRuleTest, PointwiseConvsMatchTheInterpreter) {
  ExpectConvMatchesInterpreter(ConvCase{.name = "1x1", .c = 7, .m = 20, .h = 6, .w = 9, .k = 1},
                               GetParam(), SgemmCall(GetParam()));
  // 600 positions: two column blocks per image.
  ExpectConvMatchesInterpreter(
      ConvCase{
          .name = "1x1_residual", .c = 16, .m = 70, .h = 20, .w = 30, .k = 1, .residual = true},
      GetParam(), SgemmCall(GetParam()));
  LibraryArtifact compiled = CompileWith(ConvCase{"1x1", 7, 20, 6, 9, 1}.Model(),
                                         TargetWith(GetParam()), Choose(GetParam()));
  EXPECT_THAT(compiled.kernels, Not(HasSubstr("im2col")));
}

// Any other conv of one group gathers its input into im2col blocks.
TEST_P(LibraryRuleTest, ConvsThroughIm2colMatchTheInterpreter) {
  std::vector<ConvCase> cases = {
      {.name = "3x3_pad1", .c = 5, .m = 19, .h = 11, .w = 11, .k = 3, .pads = {1, 1, 1, 1}},
      {.name = "stride2_asymmetric_pads",
       .c = 4,
       .m = 13,
       .h = 10,
       .w = 15,
       .k = 3,
       .stride = 2,
       .pads = {1, 0, 0, 2}},
      {.name = "dilation2",
       .c = 3,
       .m = 17,
       .h = 9,
       .w = 13,
       .k = 3,
       .dilation = 2,
       .pads = {2, 2, 2, 2}},
      {.name = "stem_7x7_stride2",
       .c = 3,
       .m = 8,
       .h = 23,
       .w = 23,
       .k = 7,
       .stride = 2,
       .pads = {3, 3, 3, 3}},
      // 576 taps: blocks of 224 positions, two per image.
      {.name = "3x3_wide_residual",
       .c = 64,
       .m = 10,
       .h = 15,
       .w = 15,
       .k = 3,
       .pads = {1, 1, 1, 1},
       .residual = true},
      // A 1x1 conv with stride 2 is not pointwise.
      {.name = "1x1_stride2", .c = 6, .m = 9, .h = 8, .w = 8, .k = 1, .stride = 2},
  };
  for (const ConvCase& conv : cases) {
    ExpectConvMatchesInterpreter(conv, GetParam(), SgemmCall(GetParam()));
    EXPECT_THAT(CompileWith(conv.Model(), TargetWith(GetParam()), Choose(GetParam())).kernels,
                HasSubstr("im2col"))
        << conv.name;
  }
}

TEST_P(LibraryRuleTest, ArtifactNeedsTheLibraryAndItsManifestSaysSo) {
  const std::string library = GetParam();
  const char* soname = library == "dnnl" ? "libdnnl.so.2" : "libopenblas.so.0";
  const char* symbol = library == "dnnl" ? "dnnl_sgemm" : "cblas_sgemm";
  LibraryArtifact compiled =
      CompileWith(MatmulModel({"m", 8}, {8, 8}, {"m", 8}), TargetWith(library), Choose(library));
  EXPECT_THAT(compiled.artifact.manifest_json, HasSubstr("\"libraries\": [\"" + library + "\"]"));
  EXPECT_THAT(NeededLibraries(compiled.artifact.bytes), ::testing::Contains(soname));
  auto symbols = codegen::ListDynamicSymbols(compiled.artifact.bytes);
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  bool imports_sgemm = false;
  for (const codegen::DynamicSymbol& s : *symbols) imports_sgemm |= s.name == symbol;
  EXPECT_TRUE(imports_sgemm);
  // The default schedule calls no library, and its artifact neither needs nor names one.
  auto target = driver::ResolveTarget(TargetWith(library));
  ASSERT_TRUE(target.ok()) << target.status();
  auto plain = driver::CompileModel(MatmulModel({"m", 8}, {8, 8}, {"m", 8}), *target, {}, nullptr);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_THAT(plain->manifest_json, Not(HasSubstr("\"libraries\": [")));
  EXPECT_THAT(NeededLibraries(plain->bytes), Not(::testing::Contains(soname)));
}

// A matmul through OpenBLAS and a conv through oneDNN in one artifact: both needed, both named.
TEST(LibraryRulesTest, AnArtifactMayCallBothLibraries) {
  OnnxBuilder b;
  b.Input("x", {"n", 4, 5, 5});
  b.FloatInitializer("w", {6, 4, 3, 3}, std::vector<float>(6 * 4 * 9, 0.125f));
  b.Input("m", {3, 7});
  b.Node("Conv", {"x", "w"}, {"y"});
  b.Node("MatMul", {"y", "m"}, {"z"});
  b.Output("z", {"n", 6, 3, 7});
  std::string onnx = b.Serialize();
  schedule::ChooseTrace choose = [](const schedule::TunableKernel& kernel) {
    return Choose(kernel.spaces.front().rule == "matmul" ? "openblas" : "dnnl")(kernel);
  };
  LibraryArtifact compiled =
      CompileWith(onnx, "triple=x86_64-linux-gnu;libraries=openblas,dnnl", choose);
  EXPECT_THAT(compiled.kernels, HasSubstr("dnnl_sgemm(")) << compiled.kernels;
  EXPECT_THAT(compiled.kernels, HasSubstr("cblas_sgemm(")) << compiled.kernels;
  EXPECT_THAT(compiled.artifact.manifest_json,
              HasSubstr("\"libraries\": [\"dnnl\", \"openblas\"]"));
  EXPECT_THAT(NeededLibraries(compiled.artifact.bytes),
              ::testing::IsSupersetOf({"libdnnl.so.2", "libopenblas.so.0"}));
  if (!CanRun("dnnl") || !CanRun("openblas")) GTEST_SKIP() << "a library is not installed";
  std::unique_ptr<runtime::Model> model = LoadArtifact(compiled.artifact);
  ASSERT_NE(model, nullptr);
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  std::vector<ir::NDArray> inputs = {RandomArray({2, 4, 5, 5}, 1), RandomArray({3, 7}, 2)};
  auto expected = interp::Run(*module, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ir::NDArray out = ir::NDArray::Zeros(arith::DataType::Float(32), {2, 6, 3, 7});
  ExpectClose(RunModel(*model, inputs, {out})[0], (*expected)[0], "both libraries");
}

// The tuner's spaces: the default rule's first, then each library the target has.
TEST(LibraryRulesTest, OnlyTargetsWithTheLibraryOfferIt) {
  std::string matmul = MatmulModel({"m", 8}, {8, 8}, {"m", 8});
  std::string conv = ConvCase{"3x3", 4, 8, 9, 9, 3}.Model();
  for (const auto& [onnx, rule] : {std::pair{matmul, "matmul"}, std::pair{conv, "conv"}}) {
    for (const char* text :
         {"x86_64", "x86_64-v3", kTarget, "triple=x86_64-linux-gnu;libraries=dnnl",
          "triple=x86_64-linux-gnu;libraries=dnnl,openblas"}) {
      ir::Target target = *ir::ParseTarget(text);
      auto fused = Lower(onnx, target, nullptr, "fuse_ops");
      ASSERT_TRUE(fused.ok()) << fused.status();
      std::vector<schedule::TunableKernel> kernels = schedule::TunableKernels(*fused, target);
      ASSERT_EQ(kernels.size(), 1u) << text;
      std::vector<std::string> rules;
      for (const schedule::SearchSpace& space : kernels[0].spaces) rules.push_back(space.rule);
      std::vector<std::string> expected = {rule};
      for (const char* library : {"openblas", "dnnl"}) {
        if (target.HasLibrary(library)) expected.push_back(library);
      }
      EXPECT_EQ(rules, expected) << text;
    }
  }
}

TEST(LibraryRulesTest, UnknownOrUnavailableLibrariesAreUserErrors) {
  auto unknown = driver::ResolveTarget("triple=x86_64-linux-gnu;libraries=cublas");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown library 'cublas'"));
  auto wasm = driver::ResolveTarget("triple=wasm32;libraries=openblas");
  EXPECT_EQ(wasm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wasm.status().message(), HasSubstr("not available for wasm32"));
  auto riscv = driver::ResolveTarget("triple=riscv64-linux-gnu;libraries=dnnl");
  EXPECT_EQ(riscv.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(riscv.status().message(), HasSubstr("library 'dnnl' is not available for riscv64"));
}

// The tuner's measurement: the library form against the default form, in the JIT.
TEST_P(LibraryRuleTest, TheJitMeasuresTheLibraryForm) {
  if (!CanRun(GetParam())) GTEST_SKIP() << GetParam() << " is not installed";
  std::string onnx = MatmulModel({"m", 96}, {96, 40}, {"m", 40});
  ir::Target target = *ir::ParseTarget(TargetWith(GetParam()));
  auto library = Lower(onnx, target, Choose(GetParam()), "schedule");
  auto reference = Lower(onnx, target, nullptr, "schedule");
  ASSERT_TRUE(library.ok() && reference.ok()) << library.status() << reference.status();
  std::string kernel;
  std::map<std::string, int64_t> scalars;
  for (const auto& [name, func] : library->prim_funcs) {
    if (func.is_host || name.rfind("matmul", 0) != 0) continue;
    kernel = name;
    for (const arith::PrimExpr& s : func.scalars) scalars[s->name] = 77;
  }
  ASSERT_FALSE(kernel.empty()) << ir::ToString(*library);
  tune::MeasureOptions options;
  options.target = target;
  auto measured = tune::MeasureKernel(*library, *reference, kernel, scalars, options);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_TRUE(measured->ok) << measured->failure;
  EXPECT_GT(measured->median_ns, 0);
}

}  // namespace
}  // namespace kiln::testing
