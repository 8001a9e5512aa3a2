// FuseOps, text in and text out: the module before, the module expected after, compared
// structurally. Kernels are written as legalize writes them, or by hand; fusion reads their
// loops, not their names.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/structural.h"
#include "compiler/ir/verifier.h"
#include "compiler/transform/fuse_ops.h"

namespace kiln {
namespace {

void ExpectFused(const char* before, const char* expected) {
  auto m = ir::ParseModule(before);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m);
  auto fused = transform::FuseOps(*m);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_TRUE(ir::VerifyModule(*fused).ok()) << ir::VerifyModule(*fused);
  auto want = ir::ParseModule(expected);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(ir::StructuralMismatch(*fused, *want), "") << ir::ToString(*fused);
}

constexpr char kAdd[] = R"(
  prim_func @add_0(A0: f32[n, 4], A1: f32[n, 4], out: f32[n, 4], n: i64) {
    for i0 in range(0, n) serial {
      for i1 in range(0, 4) serial {
        out[i0, i1] = A0[i0, i1] + A1[i0, i1]
      }
    }
  })";
constexpr char kRelu[] = R"(
  prim_func @relu_0(A0: f32[n, 4], out: f32[n, 4], n: i64) {
    for i0 in range(0, n) serial {
      for i1 in range(0, 4) serial {
        out[i0, i1] = select(A0[i0, i1] < 0.0, 0.0, A0[i0, i1])
      }
    }
  })";
constexpr char kExp[] = R"(
  prim_func @exp_0(A0: f32[n, 4], out: f32[n, 4], n: i64) {
    for i0 in range(0, n) serial {
      for i1 in range(0, 4) serial {
        out[i0, i1] = exp(A0[i0, i1])
      }
    }
  })";

std::string Module(const std::string& main, std::initializer_list<const char*> kernels) {
  std::string text = main;
  for (const char* k : kernels) text += k;
  return text;
}

TEST(FuseOpsTest, ElementwiseChainInlinesTheProducer) {
  ExpectFused(Module(R"(
    def @main(%x: Tensor([n, 4], f32), %y: Tensor([n, 4], f32)) {
      dataflow {
        %s: Tensor([n, 4], f32) = call_tir(@add_0, %x, %y)
        %r: Tensor([n, 4], f32) = call_tir(@relu_0, %s)
      }
      return %r
    })",
                     {kAdd, kRelu})
                  .c_str(),
              R"(
    def @main(%x: Tensor([n, 4], f32), %y: Tensor([n, 4], f32)) {
      dataflow {
        %r: Tensor([n, 4], f32) = call_tir(@fused_add_relu_0, %x, %y)
      }
      return %r
    }
    prim_func @fused_add_relu_0(A0: f32[n, 4], A1: f32[n, 4], out: f32[n, 4], n: i64) {
      for i0 in range(0, n) serial {
        for i1 in range(0, 4) serial {
          out[i0, i1] = select(A0[i0, i1] + A1[i0, i1] < 0.0, 0.0, A0[i0, i1] + A1[i0, i1])
        }
      }
    })");
}

TEST(FuseOpsTest, BroadcastBiasAddFusesIntoItsConsumer) {
  ExpectFused(Module(R"(
    def @main(%x: Tensor([n, 4], f32), %b: Tensor([4], f32)) {
      dataflow {
        %s: Tensor([n, 4], f32) = call_tir(@bias_0, %x, %b)
        %r: Tensor([n, 4], f32) = call_tir(@relu_0, %s)
      }
      return %r
    }
    prim_func @bias_0(A0: f32[n, 4], A1: f32[4], out: f32[n, 4], n: i64) {
      for i0 in range(0, n) serial {
        for i1 in range(0, 4) serial {
          out[i0, i1] = A0[i0, i1] + A1[i1]
        }
      }
    })",
                     {kRelu})
                  .c_str(),
              R"(
    def @main(%x: Tensor([n, 4], f32), %b: Tensor([4], f32)) {
      dataflow {
        %r: Tensor([n, 4], f32) = call_tir(@fused_bias_relu_0, %x, %b)
      }
      return %r
    }
    prim_func @fused_bias_relu_0(A0: f32[n, 4], A1: f32[4], out: f32[n, 4], n: i64) {
      for i0 in range(0, n) serial {
        for i1 in range(0, 4) serial {
          out[i0, i1] = select(A0[i0, i1] + A1[i1] < 0.0, 0.0, A0[i0, i1] + A1[i1])
        }
      }
    })");
}

TEST(FuseOpsTest, MatmulTakesAddAndGeluAsAnEpilogue) {
  ExpectFused(R"(
    def @main(%x: Tensor([n, 8], f32), %w: Tensor([8, 4], f32), %b: Tensor([4], f32)) {
      dataflow {
        %mm: Tensor([n, 4], f32) = call_tir(@matmul_0, %x, %w)
        %s: Tensor([n, 4], f32) = call_tir(@add_0, %mm, %b)
        %g: Tensor([n, 4], f32) = call_tir(@gelu_0, %s)
      }
      return %g
    }
    prim_func @matmul_0(A0: f32[n, 8], A1: f32[8, 4], out: f32[n, 4], n: i64) {
      for i0 in range(0, n) serial {
        for i1 in range(0, 4) serial {
          out[i0, i1] = 0.0
          for k in range(0, 8) serial {
            out[i0, i1] = out[i0, i1] + A0[i0, k] * A1[k, i1]
          }
        }
      }
    }
    prim_func @add_0(A0: f32[n, 4], A1: f32[4], out: f32[n, 4], n: i64) {
      for i0 in range(0, n) serial {
        for i1 in range(0, 4) serial {
          out[i0, i1] = A0[i0, i1] + A1[i1]
        }
      }
    }
    prim_func @gelu_0(A0: f32[n, 4], out: f32[n, 4], n: i64) {
      for i0 in range(0, n) serial {
        for i1 in range(0, 4) serial {
          out[i0, i1] = 0.5 * A0[i0, i1] * (1.0 + tanh(0.75 * A0[i0, i1]))
        }
      }
    })",
              R"(
    def @main(%x: Tensor([n, 8], f32), %w: Tensor([8, 4], f32), %b: Tensor([4], f32)) {
      dataflow {
        %g: Tensor([n, 4], f32) = call_tir(@fused_matmul_add_gelu_0, %x, %w, %b)
      }
      return %g
    }
    prim_func @fused_matmul_add_gelu_0(A0: f32[n, 8], A1: f32[8, 4], A2: f32[4],
                                       out: f32[n, 4], n: i64) {
      for i0 in range(0, n) serial {
        for i1 in range(0, 4) serial {
          out[i0, i1] = 0.0
          for k in range(0, 8) serial {
            out[i0, i1] = out[i0, i1] + A0[i0, k] * A1[k, i1]
          }
          out[i0, i1] = out[i0, i1] + A2[i1]
          out[i0, i1] = 0.5 * out[i0, i1] * (1.0 + tanh(0.75 * out[i0, i1]))
        }
      }
    })");
}

// A batch of 1: the add reads the matmul's result at 0 in the batch dim, as broadcasting
// reads a dim of extent 1, and that is the element the matmul just finished.
TEST(FuseOpsTest, MatmulWithABatchOfOneTakesTheBroadcastingAddAsAnEpilogue) {
  ExpectFused(R"(
    def @main(%x: Tensor([1, n, 8], f32), %w: Tensor([8, 4], f32), %b: Tensor([4], f32)) {
      dataflow {
        %mm: Tensor([1, n, 4], f32) = call_tir(@matmul_0, %x, %w)
        %s: Tensor([1, n, 4], f32) = call_tir(@add_0, %mm, %b)
      }
      return %s
    }
    prim_func @matmul_0(A0: f32[1, n, 8], A1: f32[8, 4], out: f32[1, n, 4], n: i64) {
      for i0 in range(0, 1) serial {
        for i1 in range(0, n) serial {
          for i2 in range(0, 4) serial {
            out[i0, i1, i2] = 0.0
            for k in range(0, 8) serial {
              out[i0, i1, i2] = out[i0, i1, i2] + A0[0, i1, k] * A1[k, i2]
            }
          }
        }
      }
    }
    prim_func @add_0(A0: f32[1, n, 4], A1: f32[4], out: f32[1, n, 4], n: i64) {
      for i0 in range(0, 1) serial {
        for i1 in range(0, n) serial {
          for i2 in range(0, 4) serial {
            out[i0, i1, i2] = A0[0, i1, i2] + A1[i2]
          }
        }
      }
    })",
              R"(
    def @main(%x: Tensor([1, n, 8], f32), %w: Tensor([8, 4], f32), %b: Tensor([4], f32)) {
      dataflow {
        %s: Tensor([1, n, 4], f32) = call_tir(@fused_matmul_add_0, %x, %w, %b)
      }
      return %s
    }
    prim_func @fused_matmul_add_0(A0: f32[1, n, 8], A1: f32[8, 4], A2: f32[4],
                                  out: f32[1, n, 4], n: i64) {
      for i0 in range(0, 1) serial {
        for i1 in range(0, n) serial {
          for i2 in range(0, 4) serial {
            out[i0, i1, i2] = 0.0
            for k in range(0, 8) serial {
              out[i0, i1, i2] = out[i0, i1, i2] + A0[0, i1, k] * A1[k, i2]
            }
            out[i0, i1, i2] = out[i0, i1, i2] + A2[i2]
          }
        }
      }
    })");
}

// Reading row 0 of a result with 4 rows is a broadcast of another element, which the matmul
// may not have finished: no epilogue.
TEST(FuseOpsTest, ConsumerReadingAnotherRowOfTheMatmulIsNotFused) {
  std::string text = R"(
    def @main(%x: Tensor([4, 8], f32), %w: Tensor([8, 4], f32)) {
      dataflow {
        %mm: Tensor([4, 4], f32) = call_tir(@matmul_0, %x, %w)
        %s: Tensor([4, 4], f32) = call_tir(@row0_0, %mm)
      }
      return %s
    }
    prim_func @matmul_0(A0: f32[4, 8], A1: f32[8, 4], out: f32[4, 4]) {
      for i0 in range(0, 4) serial {
        for i1 in range(0, 4) serial {
          out[i0, i1] = 0.0
          for k in range(0, 8) serial {
            out[i0, i1] = out[i0, i1] + A0[i0, k] * A1[k, i1]
          }
        }
      }
    }
    prim_func @row0_0(A0: f32[4, 4], out: f32[4, 4]) {
      for i0 in range(0, 4) serial {
        for i1 in range(0, 4) serial {
          out[i0, i1] = A0[0, i1] * 2.0
        }
      }
    })";
  ExpectFused(text.c_str(), text.c_str());
}

TEST(FuseOpsTest, ConvWithAccumulatorTakesBiasAndReluAsAnEpilogue) {
  ExpectFused(R"(
    def @main(%x: Tensor([n, 2, 4], f32), %w: Tensor([3, 2, 3], f32), %b: Tensor([3, 1], f32)) {
      dataflow {
        %c: Tensor([n, 3, 2], f32) = call_tir(@conv_0, %x, %w)
        %s: Tensor([n, 3, 2], f32) = call_tir(@add_0, %c, %b)
        %r: Tensor([n, 3, 2], f32) = call_tir(@relu_0, %s)
      }
      return %r
    }
    prim_func @conv_0(A0: f32[n, 2, 4], A1: f32[3, 2, 3], out: f32[n, 3, 2], n: i64) {
      for i0 in range(0, n) serial {
        for i1 in range(0, 3) serial {
          for i2 in range(0, 2) serial {
            alloc acc: f64[1]
            acc[0] = 0.0:f64
            for c in range(0, 2) serial {
              for t in range(0, 3) serial {
                acc[0] = acc[0] + cast<f64>(A0[i0, c, i2 + t]) * cast<f64>(A1[i1, c, t])
              }
            }
            out[i0, i1, i2] = cast<f32>(acc[0])
          }
        }
      }
    }
    prim_func @add_0(A0: f32[n, 3, 2], A1: f32[3, 1], out: f32[n, 3, 2], n: i64) {
      for i0 in range(0, n) serial {
        for i1 in range(0, 3) serial {
          for i2 in range(0, 2) serial {
            out[i0, i1, i2] = A0[i0, i1, i2] + A1[i1, 0]
          }
        }
      }
    }
    prim_func @relu_0(A0: f32[n, 3, 2], out: f32[n, 3, 2], n: i64) {
      for i0 in range(0, n) serial {
        for i1 in range(0, 3) serial {
          for i2 in range(0, 2) serial {
            out[i0, i1, i2] = max(A0[i0, i1, i2], 0.0)
          }
        }
      }
    })",
              R"(
    def @main(%x: Tensor([n, 2, 4], f32), %w: Tensor([3, 2, 3], f32), %b: Tensor([3, 1], f32)) {
      dataflow {
        %r: Tensor([n, 3, 2], f32) = call_tir(@fused_conv_add_relu_0, %x, %w, %b)
      }
      return %r
    }
    prim_func @fused_conv_add_relu_0(A0: f32[n, 2, 4], A1: f32[3, 2, 3], A2: f32[3, 1],
                                     out: f32[n, 3, 2], n: i64) {
      for i0 in range(0, n) serial {
        for i1 in range(0, 3) serial {
          for i2 in range(0, 2) serial {
            alloc acc: f64[1]
            acc[0] = 0.0:f64
            for c in range(0, 2) serial {
              for t in range(0, 3) serial {
                acc[0] = acc[0] + cast<f64>(A0[i0, c, i2 + t]) * cast<f64>(A1[i1, c, t])
              }
            }
            out[i0, i1, i2] = cast<f32>(acc[0])
            out[i0, i1, i2] = out[i0, i1, i2] + A2[i1, 0]
            out[i0, i1, i2] = max(out[i0, i1, i2], 0.0)
          }
        }
      }
    })");
}

TEST(FuseOpsTest, IntermediateWithASecondConsumerIsKept) {
  std::string text = Module(R"(
    def @main(%x: Tensor([n, 4], f32), %y: Tensor([n, 4], f32)) {
      dataflow {
        %s: Tensor([n, 4], f32) = call_tir(@add_0, %x, %y)
        %r: Tensor([n, 4], f32) = call_tir(@relu_0, %s)
        %e: Tensor([n, 4], f32) = call_tir(@exp_0, %s)
      }
      return (%r, %e)
    })",
                            {kAdd, kRelu, kExp});
  ExpectFused(text.c_str(), text.c_str());
}

TEST(FuseOpsTest, GraphOutputInTheMiddleIsKept) {
  std::string text = Module(R"(
    def @main(%x: Tensor([n, 4], f32), %y: Tensor([n, 4], f32)) {
      dataflow {
        %s: Tensor([n, 4], f32) = call_tir(@add_0, %x, %y)
        %r: Tensor([n, 4], f32) = call_tir(@relu_0, %s)
      }
      return (%s, %r)
    })",
                            {kAdd, kRelu});
  ExpectFused(text.c_str(), text.c_str());
}

TEST(FuseOpsTest, ReductionFeedingABroadcastIsNotFused) {
  // A row sum read by every element of its row (softmax's normalization): an epilogue would
  // need the whole row, so the reduction stays its own kernel.
  std::string text = R"(
    def @main(%x: Tensor([n, 4], f32)) {
      dataflow {
        %s: Tensor([n, 1], f32) = call_tir(@sum_0, %x)
        %d: Tensor([n, 4], f32) = call_tir(@div_0, %x, %s)
      }
      return %d
    }
    prim_func @sum_0(A0: f32[n, 4], out: f32[n, 1], n: i64) {
      for i0 in range(0, n) serial {
        for i1 in range(0, 1) serial {
          out[i0, i1] = 0.0
          for k in range(0, 4) serial {
            out[i0, i1] = out[i0, i1] + A0[i0, k]
          }
        }
      }
    }
    prim_func @div_0(A0: f32[n, 4], A1: f32[n, 1], out: f32[n, 4], n: i64) {
      for i0 in range(0, n) serial {
        for i1 in range(0, 4) serial {
          out[i0, i1] = A0[i0, i1] / A1[i0, 0]
        }
      }
    })";
  ExpectFused(text.c_str(), text.c_str());
}

TEST(FuseOpsTest, HandWrittenKernelFusesLikeALegalizedOne) {
  // Its own names for buffers, loops and the symbolic dim; a transpose read is injective.
  ExpectFused(Module(R"(
    def @main(%x: Tensor([n, 4], f32), %y: Tensor([n, 4], f32)) {
      dataflow {
        %s: Tensor([n, 4], f32) = call_tir(@add_0, %x, %y)
        %t: Tensor([4, n], f32) = call_tir(@my_transpose_scale, %s)
      }
      return %t
    }
    prim_func @my_transpose_scale(X: f32[rows, 4], Y: f32[4, rows], rows: i64) {
      for col in range(0, 4) serial {
        for row in range(0, rows) serial {
          Y[col, row] = X[row, col] * 2.0
        }
      }
    })",
                     {kAdd})
                  .c_str(),
              R"(
    def @main(%x: Tensor([n, 4], f32), %y: Tensor([n, 4], f32)) {
      dataflow {
        %t: Tensor([4, n], f32) = call_tir(@fused_add_my_transpose_scale_0, %x, %y)
      }
      return %t
    }
    prim_func @fused_add_my_transpose_scale_0(A0: f32[n, 4], A1: f32[n, 4], out: f32[4, n],
                                              n: i64) {
      for col in range(0, 4) serial {
        for row in range(0, n) serial {
          out[col, row] = (A0[row, col] + A1[row, col]) * 2.0
        }
      }
    })");
}

TEST(FuseOpsTest, InliningStopsBeforeExpressionsExplode) {
  // Each relu reads its input twice, so inlining all 16 would copy the first one 2^15 times.
  constexpr int kChain = 16;
  std::string text = "def @main(%v0: Tensor([n, 4], f32)) {\n  dataflow {\n";
  for (int i = 1; i <= kChain; ++i) {
    text += absl::StrCat("    %v", i, ": Tensor([n, 4], f32) = call_tir(@relu_", i - 1, ", %v",
                         i - 1, ")\n");
  }
  text += absl::StrCat("  }\n  return %v", kChain, "\n}\n");
  for (int i = 0; i < kChain; ++i) {
    std::string relu = kRelu;
    text += relu.replace(relu.find("relu_0"), 6, absl::StrCat("relu_", i));
  }
  auto m = ir::ParseModule(text);
  ASSERT_TRUE(m.ok()) << m.status();
  auto fused = transform::FuseOps(*m);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_TRUE(ir::VerifyModule(*fused).ok()) << ir::VerifyModule(*fused);
  size_t kernels = fused->functions.at("main").blocks[0].bindings.size();
  EXPECT_GT(kernels, 1u);
  EXPECT_LT(kernels, 5u);
  EXPECT_EQ(fused->prim_funcs.size(), kernels);
  for (const auto& [name, kernel] : fused->prim_funcs) {
    EXPECT_LT(ir::ToString(kernel).size(), 64u * 1024) << name;
  }
}

}  // namespace
}  // namespace kiln
