// float16 in compiled code: stored as halves, computed in f32. Conversions are checked
// against an independent decoding of every half and against IEEE round-to-nearest-even
// results worked out by hand; arithmetic against the reference interpreter.
#include <elf.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "compiler/driver/driver.h"
#include "compiler/interp/interpreter.h"
#include "tests/support/artifact.h"
#include "tests/support/onnx_builder.h"

namespace kiln {
namespace {

using testing::OnnxBuilder;
using testing::RunCompiled;

const arith::DataType kF16 = arith::DataType::Float(16);
const arith::DataType kF32 = arith::DataType::Float(32);

// The dynamic symbols of an ELF shared object: those it defines and those it needs.
struct DynamicSymbols {
  std::vector<std::string> defined, undefined;
};

DynamicSymbols ReadDynamicSymbols(const std::string& so) {
  DynamicSymbols names;
  const char* base = so.data();
  const auto* header = reinterpret_cast<const Elf64_Ehdr*>(base);
  const auto* sections = reinterpret_cast<const Elf64_Shdr*>(base + header->e_shoff);
  for (int i = 0; i < header->e_shnum; ++i) {
    if (sections[i].sh_type != SHT_DYNSYM) continue;
    const char* strings = base + sections[sections[i].sh_link].sh_offset;
    const auto* symbols = reinterpret_cast<const Elf64_Sym*>(base + sections[i].sh_offset);
    size_t count = sections[i].sh_size / sizeof(Elf64_Sym);
    for (size_t s = 1; s < count; ++s) {
      auto& list = symbols[s].st_shndx == SHN_UNDEF ? names.undefined : names.defined;
      list.push_back(strings + symbols[s].st_name);
    }
  }
  return names;
}

std::string CastModel(onnx::TensorProto::DataType from, onnx::TensorProto::DataType to) {
  OnnxBuilder b;
  b.Input("x", {"n"}, from);
  auto& n = b.Node("Cast", {"x"}, {"y"});
  OnnxBuilder::IntAttr(n, "to", to);
  b.Output("y", {"n"}, to);
  return b.Serialize();
}

// A half's value from its fields, without any float16 conversion code.
double DecodeHalf(uint16_t h) {
  int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double magnitude;
  if (exponent == 0x1f) {
    magnitude = mantissa ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);
  } else {
    magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

// Half conversions must not become calls to compiler-rt (__extendhfsf2, __truncsfhf2): the
// artifact links against nothing.
TEST(CompiledF16Test, ArtifactNeedsNoConversionRoutines) {
  for (auto [from, to] : {std::pair{onnx::TensorProto::FLOAT16, onnx::TensorProto::FLOAT},
                          std::pair{onnx::TensorProto::FLOAT, onnx::TensorProto::FLOAT16}}) {
    auto target = ir::ParseTarget("x86_64");
    ASSERT_TRUE(target.ok());
    auto artifact = driver::CompileModel(CastModel(from, to), *target, {}, nullptr);
    ASSERT_TRUE(artifact.ok()) << artifact.status();
    ASSERT_GT(artifact->bytes.size(), sizeof(Elf64_Ehdr));
    DynamicSymbols symbols = ReadDynamicSymbols(artifact->bytes);
    EXPECT_FALSE(symbols.defined.empty()) << "no dynamic symbol table read";
    EXPECT_EQ(symbols.undefined, std::vector<std::string>{});
  }
}

TEST(CompiledF16Test, EveryHalfWidensExactly) {
  ir::NDArray x = ir::NDArray::Zeros(kF16, {65536});
  for (int i = 0; i < 65536; ++i) reinterpret_cast<uint16_t*>(x.bytes.data())[i] = i;
  auto got = RunCompiled(CastModel(onnx::TensorProto::FLOAT16, onnx::TensorProto::FLOAT), {x},
                         {ir::NDArray::Zeros(kF32, {65536})});
  ASSERT_EQ(got.size(), 1u);
  for (int i = 0; i < 65536; ++i) {
    double want = DecodeHalf(i);
    float f = got[0].data<float>()[i];
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f)) << "half 0x" << std::hex << i;
    } else {
      EXPECT_EQ(f, want) << "half 0x" << std::hex << i;
      EXPECT_EQ(std::signbit(f), std::signbit(want)) << "half 0x" << std::hex << i;
    }
  }
}

TEST(CompiledF16Test, NarrowingRoundsToNearestEven) {
  const float tiny = std::ldexp(1.0f, -24);  // the least subnormal half
  struct Case {
    float value;
    uint16_t bits;
  } cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {-2.5f, 0xc100},
      {0.1f, 0x2e66},
      {65504.0f, 0x7bff},                          // the largest half
      {65519.0f, 0x7bff},                          // below the halfway point to 65536
      {65520.0f, 0x7c00},                          // halfway: to even, which is inf
      {1e5f, 0x7c00},                              // overflow
      {-1e5f, 0xfc00},                             //
      {1.0f + std::ldexp(1.0f, -11), 0x3c00},      // tie between 0x3c00 and 0x3c01: even
      {1.0f + 3 * std::ldexp(1.0f, -11), 0x3c02},  // tie between 0x3c01 and 0x3c02: even
      {tiny, 0x0001},
      {tiny * 0.5f, 0x0000},  // tie between 0 and the least subnormal: even
      {tiny * 1.5f, 0x0002},  // tie: even
      {tiny * 0.75f, 0x0001},
      {std::ldexp(1.0f, -14), 0x0400},     // the least normal half
      {std::ldexp(1023.5f, -24), 0x0400},  // rounds up from subnormal to normal
      {INFINITY, 0x7c00},
      {-INFINITY, 0xfc00},
  };
  int n = sizeof(cases) / sizeof(cases[0]);
  ir::NDArray x = ir::NDArray::Zeros(kF32, {n + 1});
  for (int i = 0; i < n; ++i) x.data<float>()[i] = cases[i].value;
  x.data<float>()[n] = std::numeric_limits<float>::quiet_NaN();
  auto got = RunCompiled(CastModel(onnx::TensorProto::FLOAT, onnx::TensorProto::FLOAT16), {x},
                         {ir::NDArray::Zeros(kF16, {n + 1})});
  ASSERT_EQ(got.size(), 1u);
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(got[0].bytes.data());
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(bits[i], cases[i].bits) << "value " << cases[i].value << " (case " << i << ")";
  }
  EXPECT_EQ(bits[n] & 0x7c00, 0x7c00) << "NaN";
  EXPECT_NE(bits[n] & 0x3ff, 0) << "NaN";
}

// Arithmetic, math functions and a reduction on halves agree with the reference interpreter
// to half precision (the compiled code rounds once, at the store).
TEST(CompiledF16Test, ArithmeticMatchesTheReference) {
  OnnxBuilder b;
  b.Input("a", {"n", 4}, onnx::TensorProto::FLOAT16);
  b.Input("c", {"n", 4}, onnx::TensorProto::FLOAT16);
  b.Node("Mul", {"a", "c"}, {"m"});
  b.Node("Tanh", {"m"}, {"t"});
  b.Node("Add", {"t", "a"}, {"s"});
  auto& sm = b.Node("Softmax", {"s"}, {"y"});
  OnnxBuilder::IntAttr(sm, "axis", 1);
  b.Output("y", {"n", 4}, onnx::TensorProto::FLOAT16);
  std::string model = b.Serialize();
  std::vector<ir::NDArray> inputs = {ir::NDArray::Zeros(kF16, {3, 4}),
                                     ir::NDArray::Zeros(kF16, {3, 4})};
  for (int i = 0; i < 12; ++i) {
    inputs[0].SetDouble(i, (i - 6) * 0.37);
    inputs[1].SetDouble(i, 1.5 - i * 0.21);
  }
  auto module = driver::ImportModel(model);
  ASSERT_TRUE(module.ok()) << module.status();
  auto want = interp::Run(*module, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  auto got = RunCompiled(model, inputs, {ir::NDArray::Zeros(kF16, {3, 4})});
  ASSERT_EQ(got.size(), 1u);
  for (int i = 0; i < 12; ++i) {
    double w = (*want)[0].GetDouble(i);
    // Two half roundings apart at most: the reference rounds after every op.
    EXPECT_NEAR(got[0].GetDouble(i), w, 2 * std::ldexp(std::abs(w), -10)) << "element " << i;
  }
}

}  // namespace
}  // namespace kiln
