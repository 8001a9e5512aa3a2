// Target presets and descriptions: parsing, defaults, user errors naming the input, and the
// canonical form that cache keys use (two spellings of one target must be equal).
#include "compiler/ir/target.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::ir {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

std::string ErrorOf(std::string_view text) {
  absl::StatusOr<Target> target = ParseTarget(text);
  EXPECT_EQ(target.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(target.status().message());
}

std::string CanonicalOf(std::string_view text) {
  absl::StatusOr<Target> target = ParseTarget(text);
  EXPECT_TRUE(target.ok()) << target.status();
  return target.ok() ? target->Canonical() : "";
}

TEST(TargetTest, PresetsHaveACanonicalFormWithoutTheirName) {
  EXPECT_EQ(CanonicalOf("x86_64"),
            "triple=x86_64-unknown-linux-gnu;cpu=x86-64;features=;vector_bits=128");
  EXPECT_EQ(CanonicalOf("x86_64-v3"),
            "triple=x86_64-unknown-linux-gnu;cpu=x86-64-v3;features=+avx2,+fma;vector_bits=256");
  EXPECT_EQ(CanonicalOf("x86_64-v4"),
            "triple=x86_64-unknown-linux-gnu;cpu=x86-64-v4;features=+avx2,+avx512bw,+avx512dq,"
            "+avx512f,+avx512vl,+evex512,+fma;vector_bits=512");
  EXPECT_EQ(ParseTarget("x86_64-v3")->preset, "x86_64-v3");
  for (const Target& t : ListPresetTargets()) {
    EXPECT_THAT(t.Canonical(), Not(HasSubstr("preset"))) << t.preset;
    EXPECT_EQ(ParseTarget(t.preset)->Canonical(), t.Canonical());
  }
}

TEST(TargetTest, EveryArchHasPresets) {
  EXPECT_EQ(CanonicalOf("aarch64"),
            "triple=aarch64-unknown-linux-gnu;cpu=generic;features=+neon;vector_bits=128");
  EXPECT_EQ(CanonicalOf("aarch64-sve"),
            "triple=aarch64-unknown-linux-gnu;cpu=generic;features=+neon,+sve;vector_bits=128");
  EXPECT_EQ(CanonicalOf("riscv64"),
            "triple=riscv64-unknown-linux-gnu;cpu=generic-rv64;features=+a,+c,+d,+f,+m,+v;"
            "vector_bits=128");
  EXPECT_EQ(CanonicalOf("wasm32"),
            "triple=wasm32-unknown-unknown;cpu=generic;features=;vector_bits=128");
  EXPECT_EQ(CanonicalOf("wasm32-simd"),
            "triple=wasm32-unknown-unknown;cpu=generic;features=+simd128;vector_bits=128");
  EXPECT_EQ(ParseTarget("wasm32")->artifact_file, "model.wasm");
  EXPECT_EQ(ParseTarget("aarch64")->artifact_file, "model.so");
  EXPECT_EQ(ParseTarget("aarch64")->VectorRegisters(), 32);
  EXPECT_EQ(ParseTarget("x86_64-v3")->VectorRegisters(), 16);
  EXPECT_EQ(ParseTarget("x86_64-v4")->VectorRegisters(), 32);
}

TEST(TargetTest, DescriptionsOfOtherArchsTakeTheirDefaults) {
  absl::StatusOr<Target> arm = ParseTarget("triple=aarch64-linux-gnu;features=+neon");
  ASSERT_TRUE(arm.ok()) << arm.status();
  EXPECT_EQ(arm->Canonical(), CanonicalOf("aarch64"));
  EXPECT_THAT(arm->preset, MatchesRegex("aarch64-custom-[0-9a-f]{8}"));
  absl::StatusOr<Target> rv = ParseTarget("triple=riscv64-linux-gnu;features=+m,+a,+f,+d,+c,+v");
  ASSERT_TRUE(rv.ok()) << rv.status();
  EXPECT_EQ(rv->Canonical(), CanonicalOf("riscv64"));
  absl::StatusOr<Target> wasm = ParseTarget("triple=wasm32-unknown-unknown;features=+simd128");
  ASSERT_TRUE(wasm.ok()) << wasm.status();
  EXPECT_EQ(wasm->Canonical(), CanonicalOf("wasm32-simd"));
  EXPECT_EQ(wasm->artifact_file, "model.wasm");
  // SVE's length is not known at compile time: 128 bits unless the description says more.
  EXPECT_EQ(ParseTarget("triple=aarch64-linux-gnu;features=+sve")->vector_bits, 128);
}

TEST(TargetTest, ThreadsAreTheArtifactsStartingThreadCount) {
  absl::StatusOr<Target> t = ParseTarget("triple=aarch64-linux-gnu;threads=4");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->threads, 4);
  EXPECT_EQ(t->Canonical(),
            "triple=aarch64-unknown-linux-gnu;cpu=generic;features=;vector_bits=128;threads=4");
  EXPECT_EQ(ParseTarget("aarch64")->threads, 0);  // presets leave it to the runtime
  EXPECT_THAT(ErrorOf("triple=x86_64-linux-gnu;threads=0"),
              HasSubstr("threads '0' must be from 1 to 1024"));
  EXPECT_THAT(ErrorOf("triple=wasm32-unknown-unknown;threads=2"),
              HasSubstr("wasm32 modules run on one thread"));
  EXPECT_THAT(ErrorOf("triple=nvptx64-nvidia-cuda;threads=2"), HasSubstr("threads_per_block"));
}

TEST(TargetTest, GpuDescriptionsTakeABlockSizeAndSharedMemory) {
  EXPECT_EQ(CanonicalOf("cuda-sm80"),
            "triple=nvptx64-nvidia-cuda;cpu=sm_80;features=+ptx78;vector_bits=128;"
            "threads_per_block=256;shared_memory=49152");
  absl::StatusOr<Target> t =
      ParseTarget("triple=nvptx64-nvidia-cuda;cpu=sm_90;threads_per_block=512;shared_memory=0");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->IsGpu());
  EXPECT_EQ(t->threads_per_block, 512);
  EXPECT_EQ(t->shared_memory, 0);
  EXPECT_THAT(ErrorOf("triple=nvptx64-nvidia-cuda;threads_per_block=100"),
              HasSubstr("multiple of 32"));
  EXPECT_THAT(ErrorOf("triple=nvptx64-nvidia-cuda;shared_memory=-1"), HasSubstr("shared_memory"));
  EXPECT_THAT(ErrorOf("triple=x86_64-linux-gnu;threads_per_block=64"),
              HasSubstr("GPU targets (nvptx64) only"));
}

TEST(TargetTest, HostIsResolvedByTheDriverNotHere) {
  EXPECT_THAT(ErrorOf("host"), HasSubstr("driver::ResolveTarget"));
}

TEST(TargetTest, ParsesAFullDescription) {
  absl::StatusOr<Target> t = ParseTarget(
      "triple=x86_64-unknown-linux-gnu;cpu=skylake;features=+avx2,+fma;vector_bits=128");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->triple, "x86_64-unknown-linux-gnu");
  EXPECT_EQ(t->cpu, "skylake");
  EXPECT_EQ(t->features, "+avx2,+fma");
  EXPECT_EQ(t->vector_bits, 128);  // explicit wins over what the features imply
  EXPECT_EQ(t->artifact_file, "model.so");
}

TEST(TargetTest, DescriptionDefaults) {
  absl::StatusOr<Target> t = ParseTarget("triple=x86_64-linux-gnu");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->triple, "x86_64-unknown-linux-gnu");
  EXPECT_EQ(t->cpu, "x86-64");
  EXPECT_EQ(t->features, "");
  EXPECT_EQ(t->vector_bits, 128);
  EXPECT_EQ(t->Canonical(), CanonicalOf("x86_64"));
}

TEST(TargetTest, VectorBitsFollowTheEnabledFeatures) {
  EXPECT_EQ(ParseTarget("triple=x86_64-linux-gnu;features=+sse4.2")->vector_bits, 128);
  EXPECT_EQ(ParseTarget("triple=x86_64-linux-gnu;features=+avx")->vector_bits, 256);
  EXPECT_EQ(ParseTarget("triple=x86_64-linux-gnu;features=+fma,+avx2")->vector_bits, 256);
  EXPECT_EQ(ParseTarget("triple=x86_64-linux-gnu;features=+avx2,+avx512f")->vector_bits, 512);
  EXPECT_EQ(ParseTarget("triple=x86_64-linux-gnu;features=-avx512f,+avx2")->vector_bits, 256);
  EXPECT_EQ(ParseTarget("triple=x86_64-linux-gnu;features=-avx2")->vector_bits, 128);
  EXPECT_EQ(ParseTarget("triple=x86_64-linux-gnu;features=+avx2;vector_bits=512")->vector_bits,
            512);
}

TEST(TargetTest, PresetAndDescriptionOfOneTargetAreEqual) {
  EXPECT_EQ(CanonicalOf("triple=x86_64-unknown-linux-gnu;cpu=x86-64-v3;features=+fma,+avx2"),
            CanonicalOf("x86_64-v3"));
  EXPECT_EQ(
      CanonicalOf("vector_bits=256;features=+avx2,+fma;cpu=x86-64-v3;triple=x86_64-linux-gnu"),
      CanonicalOf("x86_64-v3"));
  EXPECT_EQ(CanonicalOf("triple=x86_64-linux-gnu;cpu=x86-64-v4;features=+fma,+evex512,+avx512vl,"
                        "+avx512dq,+avx512bw,+avx512f,+avx2"),
            CanonicalOf("x86_64-v4"));
}

TEST(TargetTest, FeatureOrderAndDuplicatesDoNotMatter) {
  const std::string a = CanonicalOf("triple=x86_64-linux-gnu;features=+fma,+avx2");
  EXPECT_EQ(a, CanonicalOf("triple=x86_64-linux-gnu;features=+avx2,+fma"));
  EXPECT_EQ(a, CanonicalOf("triple=x86_64-linux-gnu;features=+avx2,+fma,+avx2,+fma"));
  EXPECT_EQ(a, CanonicalOf(" triple = x86_64-linux-gnu ; features = +avx2 , +fma ;"));
  EXPECT_NE(a, CanonicalOf("triple=x86_64-linux-gnu;features=+avx2"));
  EXPECT_NE(a, CanonicalOf("triple=x86_64-linux-gnu;features=+avx2,-fma"));
}

TEST(TargetTest, DescriptionsGetAShortStableDisplayName) {
  const std::string name = ParseTarget("triple=x86_64-linux-gnu;features=+fma,+avx2")->preset;
  EXPECT_THAT(name, MatchesRegex("x86_64-custom-[0-9a-f]{8}"));
  EXPECT_EQ(ParseTarget("features=+avx2,+fma,+fma;triple=x86_64-unknown-linux-gnu")->preset, name);
  EXPECT_NE(ParseTarget("triple=x86_64-linux-gnu;features=+avx2")->preset, name);
}

TEST(TargetTest, TriplesAreNormalizedAsLLVMDoes) {
  EXPECT_EQ(ParseTarget("triple=x86_64-linux-gnu")->triple, "x86_64-unknown-linux-gnu");
  EXPECT_EQ(ParseTarget("triple=x86_64-pc-linux-gnu")->triple, "x86_64-pc-linux-gnu");
  EXPECT_EQ(ParseTarget("triple=x86_64-linux")->triple, "x86_64-unknown-linux");
  EXPECT_EQ(ParseTarget("triple=x86_64--linux-gnu")->triple, "x86_64-unknown-linux-gnu");
}

TEST(TargetTest, ErrorsNameTheKeyOrValue) {
  EXPECT_THAT(ErrorOf("triple=x86_64-linux-gnu;arch=x86"), HasSubstr("unknown key 'arch'"));
  EXPECT_THAT(ErrorOf("triple=x86_64-linux-gnu;avx2"), HasSubstr("malformed pair 'avx2'"));
  EXPECT_THAT(ErrorOf("triple=x86_64-linux-gnu;=x"), HasSubstr("malformed pair '=x'"));
  EXPECT_THAT(ErrorOf("triple=x86_64-linux-gnu;vector_bits=wide"),
              HasSubstr("vector_bits 'wide' is not supported; use 128, 256 or 512"));
  EXPECT_THAT(ErrorOf("triple=x86_64-linux-gnu;vector_bits=384"),
              HasSubstr("vector_bits '384' is not supported"));
  EXPECT_THAT(ErrorOf("triple=x86_64-linux-gnu;cpu=a;cpu=b"), HasSubstr("key 'cpu' given twice"));
  EXPECT_THAT(ErrorOf("cpu=x86-64"), HasSubstr("has no triple"));
  EXPECT_THAT(ErrorOf("triple=x86_64-linux-gnu;features=avx2"),
              HasSubstr("target feature 'avx2' must be '+name'"));
  EXPECT_THAT(ErrorOf("triple=x86_64-linux-gnu;features=+avx2,-avx2"),
              HasSubstr("'avx2' is both enabled and disabled"));
  EXPECT_THAT(ErrorOf("riscv-toaster"), HasSubstr("unknown target 'riscv-toaster'"));
}

TEST(TargetTest, UnsupportedArchIsNamed) {
  std::string error = ErrorOf("triple=mips64-unknown-linux-gnu");
  EXPECT_THAT(error, HasSubstr("arch 'mips64' is not supported"));
  EXPECT_THAT(error, HasSubstr("supported archs: x86_64, aarch64, riscv64, wasm32"));
  EXPECT_THAT(ErrorOf("triple=arm-linux-gnueabihf"), HasSubstr("arch 'arm'"));
}

TEST(TargetTest, LibrariesAreSortedAndOnlyInTheCanonicalFormWhenNamed) {
  const std::string base = "triple=x86_64-unknown-linux-gnu;cpu=x86-64;features=;vector_bits=128";
  EXPECT_EQ(CanonicalOf("triple=x86_64-linux-gnu"), base);
  EXPECT_TRUE(ParseTarget("x86_64")->libraries.empty());
  absl::StatusOr<Target> blas = ParseTarget("triple=x86_64-linux-gnu;libraries= openblas,openblas");
  ASSERT_TRUE(blas.ok()) << blas.status();
  EXPECT_EQ(blas->libraries, std::vector<std::string>{"openblas"});
  EXPECT_TRUE(blas->HasLibrary("openblas"));
  EXPECT_FALSE(ParseTarget("x86_64")->HasLibrary("openblas"));
  EXPECT_EQ(blas->Canonical(), base + ";libraries=openblas");
  // Another spelling of the same target shares its key; without the library it differs.
  EXPECT_EQ(CanonicalOf(blas->Canonical()), blas->Canonical());
  EXPECT_NE(blas->preset, ParseTarget("triple=x86_64-linux-gnu")->preset);
  EXPECT_TRUE(ParseTarget("triple=aarch64-linux-gnu;libraries=openblas").ok());
  EXPECT_TRUE(ParseTarget("triple=riscv64-linux-gnu;libraries=openblas").ok());
}

TEST(TargetTest, LibraryErrorsNameTheLibrary) {
  EXPECT_THAT(ErrorOf("triple=x86_64-linux-gnu;libraries=openblas,mkl"),
              HasSubstr("unknown library 'mkl'; known libraries: openblas"));
  EXPECT_THAT(ErrorOf("triple=wasm32;libraries=openblas"),
              HasSubstr("library 'openblas' is not available for wasm32"));
  EXPECT_THAT(ErrorOf("triple=x86_64-linux-gnu;librarys=openblas"),
              HasSubstr("unknown key 'librarys'"));
}

TEST(TargetTest, ExternFunctionsBelongToTheirLibrary) {
  ASSERT_NE(LibraryOfFunction("cblas_sgemm"), nullptr);
  EXPECT_STREQ(LibraryOfFunction("cblas_sgemm")->soname, "libopenblas.so.0");
  EXPECT_EQ(LibraryOfFunction("exp"), nullptr);
  EXPECT_EQ(std::string(FindExternFunction("cblas_sgemm")->params).size(), 14u);
}

}  // namespace
}  // namespace kiln::ir
