// Kernel classification reads loops and index expressions, never op names: hand-written
// kernels in the text format and kernels legalized from real operators classify alike.
#include <gtest/gtest.h>

#include <string>

#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "compiler/ir/parser.h"
#include "compiler/transform/classify_kernel.h"
#include "tests/support/onnx_builder.h"

namespace kiln {
namespace {

using testing::OnnxBuilder;
using transform::ClassifyKernel;
using transform::KernelClass;
using transform::KernelClassName;

std::string ClassOf(const std::string& text, const std::string& kernel) {
  auto m = ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return "";
  return KernelClassName(ClassifyKernel(m->prim_funcs.at(kernel)));
}

TEST(ClassifyKernelTest, Elementwise) {
  EXPECT_EQ(ClassOf(R"(
    prim_func @k(A: f32[n, 4], B: f32[n, 4], out: f32[n, 4], n: i64) {
      for i in range(0, n) serial {
        for j in range(0, 4) serial {
          out[i, j] = select(A[i, j] < 0.0, 0.0, A[i, j]) * B[i, j]
        }
      }
    })",
                    "k"),
            "elementwise");
}

TEST(ClassifyKernelTest, BroadcastReadsAProjection) {
  EXPECT_EQ(ClassOf(R"(
    prim_func @k(A: f32[n, 4], B: f32[1, 4], out: f32[n, 4], n: i64) {
      for i in range(0, n) serial {
        for j in range(0, 4) serial {
          out[i, j] = A[i, j] + B[0, j]
        }
      }
    })",
                    "k"),
            "broadcast");
}

TEST(ClassifyKernelTest, TransposeIsInjective) {
  EXPECT_EQ(ClassOf(R"(
    prim_func @k(A: f32[4, n], out: f32[n, 4], n: i64) {
      for i in range(0, n) serial {
        for j in range(0, 4) serial {
          out[i, j] = A[j, i]
        }
      }
    })",
                    "k"),
            "injective");
}

TEST(ClassifyKernelTest, ConcatAsSeveralNestsIsInjective) {
  EXPECT_EQ(ClassOf(R"(
    prim_func @k(A: f32[2], B: f32[3], out: f32[5]) {
      for i in range(0, 2) serial {
        out[i] = A[i]
      }
      for i in range(0, 3) serial {
        out[i + 2] = B[i]
      }
    })",
                    "k"),
            "injective");
}

TEST(ClassifyKernelTest, RowSumIsAReduction) {
  EXPECT_EQ(ClassOf(R"(
    prim_func @k(A: f32[n, 8], out: f32[n], n: i64) {
      for i in range(0, n) serial {
        out[i] = 0.0
        for k in range(0, 8) serial {
          out[i] = out[i] + A[i, k]
        }
      }
    })",
                    "k"),
            "reduction");
}

TEST(ClassifyKernelTest, MatmulIsOutputFusable) {
  EXPECT_EQ(ClassOf(R"(
    prim_func @k(A: f32[n, 8], B: f32[8, 4], out: f32[n, 4], n: i64) {
      for i in range(0, n) serial {
        for j in range(0, 4) serial {
          out[i, j] = 0.0
          for k in range(0, 8) serial {
            out[i, j] = out[i, j] + A[i, k] * B[k, j]
          }
        }
      }
    })",
                    "k"),
            "output-fusable");
}

TEST(ClassifyKernelTest, GatherIsOpaque) {
  EXPECT_EQ(ClassOf(R"(
    prim_func @k(A: f32[5, 4], I: i64[3], out: f32[3, 4]) {
      for i in range(0, 3) serial {
        for j in range(0, 4) serial {
          out[i, j] = A[I[i], j]
        }
      }
    })",
                    "k"),
            "opaque");
}

TEST(ClassifyKernelTest, SecondWriteOfTheOutputIsOpaque) {
  // A softmax-like kernel rewrites elements of a row after reducing it.
  EXPECT_EQ(ClassOf(R"(
    prim_func @k(A: f32[n, 4], out: f32[n, 4], n: i64) {
      for i in range(0, n) serial {
        for j in range(0, 4) serial {
          out[i, j] = A[i, j]
        }
        for j in range(0, 4) serial {
          out[i, j] = out[i, j] / out[i, 0]
        }
      }
    })",
                    "k"),
            "opaque");
}

// The class of the kernel that legalize makes for the model's only node.
std::string LegalizedClass(OnnxBuilder& b) {
  auto m = driver::ImportModel(b.Serialize());
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return "";
  auto legal = driver::RunPipeline(*std::move(m), nullptr, "legalize");
  EXPECT_TRUE(legal.ok()) << legal.status();
  if (!legal.ok() || legal->prim_funcs.size() != 1) return "";
  return KernelClassName(ClassifyKernel(legal->prim_funcs.begin()->second));
}

TEST(ClassifyKernelTest, LegalizedOperators) {
  {
    OnnxBuilder b(13);
    b.Input("x", {"n", 4});
    b.Node("Relu", {"x"}, {"y"});
    b.Output("y", {"n", 4});
    EXPECT_EQ(LegalizedClass(b), "elementwise");
  }
  {
    OnnxBuilder b(13);
    b.Input("x", {"n", 4});
    b.Input("bias", {4});
    b.Node("Add", {"x", "bias"}, {"y"});
    b.Output("y", {"n", 4});
    EXPECT_EQ(LegalizedClass(b), "broadcast");
  }
  {
    OnnxBuilder b(13);
    b.Input("x", {"n", 4});
    OnnxBuilder::IntsAttr(b.Node("Transpose", {"x"}, {"y"}), "perm", {1, 0});
    b.Output("y", {4, "n"});
    EXPECT_EQ(LegalizedClass(b), "injective");
  }
  {
    OnnxBuilder b(13);
    b.Input("x", {"n", 8});
    b.Input("w", {8, 4});
    b.Node("MatMul", {"x", "w"}, {"y"});
    b.Output("y", {"n", 4});
    EXPECT_EQ(LegalizedClass(b), "output-fusable");
  }
  {
    OnnxBuilder b(13);
    b.Input("x", {"n", 2, 5, 5});
    b.Input("w", {3, 2, 3, 3});
    b.Node("Conv", {"x", "w"}, {"y"});
    b.Output("y", {"n", 3, 3, 3});
    EXPECT_EQ(LegalizedClass(b), "output-fusable");
  }
  {
    OnnxBuilder b(13);
    b.Input("x", {"n", 3, 4, 4});
    b.Node("GlobalAveragePool", {"x"}, {"y"});
    b.Output("y", {"n", 3, 1, 1});
    EXPECT_EQ(LegalizedClass(b), "reduction");
  }
  {
    OnnxBuilder b(13);
    b.Input("x", {"n", 4});
    OnnxBuilder::IntAttr(b.Node("Softmax", {"x"}, {"y"}), "axis", 1);
    b.Output("y", {"n", 4});
    EXPECT_EQ(LegalizedClass(b), "opaque");
  }
}

}  // namespace
}  // namespace kiln
