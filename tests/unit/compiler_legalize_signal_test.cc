// Kernels for det, dft, grid_sample, roi_align, max_unpool and tf_idf_vectorizer, compiled
// for x86_64 and compared with the reference interpreter on shapes and values the ONNX suite
// does not cover: singular and 1 x 1 matrices, odd lengths, points and rois outside the
// image, indices out of range.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/support/compiled_kernel.h"
#include "tests/support/import_and_run.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/reference_check.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using arith::DataType;
using testing::ArrayOf;
using testing::CompiledKernel;
using testing::ExpectCompiledMatchesReference;
using testing::OnnxBuilder;

std::vector<double> Ramp(int64_t count, int64_t step = 7, int64_t mod = 11) {
  std::vector<double> v;
  for (int64_t i = 0; i < count; ++i) v.push_back(static_cast<double>(i * step % mod) - 3.5);
  return v;
}

// ---- det -------------------------------------------------------------------------------

std::string DetModel(std::vector<testing::Dim> dims, int elem_type = onnx::TensorProto::FLOAT) {
  OnnxBuilder b(11);
  b.Input("x", dims, elem_type);
  b.Node("Det", {"x"}, {"y"});
  b.Output("y", std::vector<testing::Dim>(dims.begin(), dims.end() - 2), elem_type);
  return b.Serialize();
}

TEST(LegalizeSignalTest, DetOfSingularPivotedAndOneByOneMatrices) {
  // A singular matrix (row 1 = 2 row 0) whose last pivot is exactly 0, one that needs row
  // swaps (zero leading entry), and one with a tiny leading entry that partial pivoting must
  // not divide by.
  std::vector<double> values = {1,     2, 3, 2, 4, 6, 1, 0, 1,  //
                                0,     2, 1, 3, 0, 4, 1, 5, 0,  //
                                1e-12, 1, 2, 1, 1, 1, 3, 2, 1};
  auto want =
      ExpectCompiledMatchesReference(DetModel({3, 3, 3}, onnx::TensorProto::DOUBLE),
                                     {ArrayOf(DataType::Float(64), {3, 3, 3}, values)}, 1e-9);
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(want[0].GetDouble(0), 0);
  ExpectCompiledMatchesReference(DetModel({1, 1}), {ArrayOf(DataType::Float(), {1, 1}, {-2.5})});
  ExpectCompiledMatchesReference(DetModel({2, 2, 4, 4}),
                                 {ArrayOf(DataType::Float(), {2, 2, 4, 4}, Ramp(64, 5, 13))});
}

TEST(LegalizeSignalTest, DetLoopsOverSymbolicBatchWithLocalMatrix) {
  std::string kernel = CompiledKernel(DetModel({"n", 3, 3}), "det");
  EXPECT_NE(kernel.find("range(0, n)"), std::string::npos) << kernel;
  EXPECT_NE(kernel.find("alloc a"), std::string::npos) << kernel;
}

// ---- dft -------------------------------------------------------------------------------

// DFT of x along `axis`, with dft_length as a constant when `length` > 0.
std::string DftModel(std::vector<int64_t> shape, int64_t axis, int64_t length, bool inverse,
                     bool onesided) {
  OnnxBuilder b(17);
  std::vector<testing::Dim> dims(shape.begin(), shape.end());
  b.Input("x", dims);
  std::vector<std::string> inputs = {"x"};
  if (length > 0) {
    b.Int64Initializer("len", {}, {length});
    inputs.push_back("len");
  }
  auto& node = b.Node("DFT", inputs, {"y"});
  OnnxBuilder::IntAttr(node, "axis", axis);
  OnnxBuilder::IntAttr(node, "inverse", inverse);
  OnnxBuilder::IntAttr(node, "onesided", onesided);
  int64_t n = length > 0 ? length : shape[axis];
  std::vector<testing::Dim> out(shape.begin(), shape.end());
  out[axis] = onesided ? n / 2 + 1 : n;
  out.back() = int64_t{2};
  b.Output("y", out);
  return b.Serialize();
}

TEST(LegalizeSignalTest, DftWithPaddingTruncationAndOnesidedBins) {
  auto x = [](std::vector<int64_t> shape) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    return ArrayOf(DataType::Float(), shape, Ramp(count));
  };
  // Odd length, zero padded to 8, onesided.
  ExpectCompiledMatchesReference(DftModel({2, 5, 1}, 1, 8, false, true), {x({2, 5, 1})}, 1e-4);
  // Complex input truncated to 3 samples along axis 0, inverse.
  ExpectCompiledMatchesReference(DftModel({7, 2, 2}, 0, 3, true, false), {x({7, 2, 2})}, 1e-4);
  // Along a middle axis, full length.
  ExpectCompiledMatchesReference(DftModel({2, 3, 5, 2}, 2, 0, false, false), {x({2, 3, 5, 2})},
                                 1e-4);
}

// ---- grid_sample -----------------------------------------------------------------------

// Grid points inside, on the border of and far outside a 3 x 4 image, and between pixels.
std::vector<double> GridPoints() {
  return {-1, -1, 1,    1,   0,   0,   0.3,  -0.7, -1.6, 0.2,   2.5,  -3.1, 0.9,  1.4,
          7,  -9, -0.5, 0.5, 0.5, 0.5, -1.2, 1.05, 0.01, -0.99, 0.66, 0.33, -4.2, 5.5};
}

void ExpectGridSampleMatches(const std::string& mode, const std::string& padding, bool align) {
  OnnxBuilder b(16);
  b.Input("x", {2, 2, 3, 4});
  b.Input("grid", {2, 7, 1, 2});
  auto& node = b.Node("GridSample", {"x", "grid"}, {"y"});
  OnnxBuilder::StringAttr(node, "mode", mode);
  OnnxBuilder::StringAttr(node, "padding_mode", padding);
  OnnxBuilder::IntAttr(node, "align_corners", align);
  b.Output("y", {2, 2, 7, 1});
  SCOPED_TRACE(mode + " " + padding + (align ? " align_corners" : ""));
  ExpectCompiledMatchesReference(b.Serialize(),
                                 {ArrayOf(DataType::Float(), {2, 2, 3, 4}, Ramp(48)),
                                  ArrayOf(DataType::Float(), {2, 7, 1, 2}, GridPoints())});
}

TEST(LegalizeSignalTest, GridSampleOutsideTheImageMatchesTheReference) {
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      ExpectGridSampleMatches(mode, padding, false);
      ExpectGridSampleMatches(mode, padding, true);
    }
  }
}

// ---- roi_align -------------------------------------------------------------------------

void ExpectRoiAlignMatches(const std::string& mode, const std::string& transform,
                           int64_t sampling_ratio) {
  OnnxBuilder b(16);
  b.Input("x", {2, 1, 5, 6});
  b.Input("rois", {4, 4});
  b.Input("batch", {4}, onnx::TensorProto::INT64);
  auto& node = b.Node("RoiAlign", {"x", "rois", "batch"}, {"y"});
  OnnxBuilder::StringAttr(node, "mode", mode);
  OnnxBuilder::StringAttr(node, "coordinate_transformation_mode", transform);
  OnnxBuilder::IntAttr(node, "output_height", 2);
  OnnxBuilder::IntAttr(node, "output_width", 3);
  OnnxBuilder::IntAttr(node, "sampling_ratio", sampling_ratio);
  OnnxBuilder::FloatAttr(node, "spatial_scale", 0.5f);
  b.Output("y", {4, 1, 2, 3});
  // Inside, straddling the edge, entirely outside, and inverted (negative extent).
  std::vector<double> rois = {1, 1, 9, 7, -3, 4, 14, 12, 20, 20, 30, 30, 8, 6, 2, 1};
  SCOPED_TRACE(mode + " " + transform + " sampling_ratio " + std::to_string(sampling_ratio));
  ExpectCompiledMatchesReference(b.Serialize(), {ArrayOf(DataType::Float(), {2, 1, 5, 6}, Ramp(60)),
                                                 ArrayOf(DataType::Float(), {4, 4}, rois),
                                                 ArrayOf(DataType::Int(64), {4}, {1, 0, 1, 0})});
}

TEST(LegalizeSignalTest, RoiAlignEdgeRoisMatchTheReference) {
  for (const char* mode : {"avg", "max"}) {
    for (const char* transform : {"half_pixel", "output_half_pixel"}) {
      ExpectRoiAlignMatches(mode, transform, 0);
      ExpectRoiAlignMatches(mode, transform, 2);
    }
  }
}

// ---- max_unpool ------------------------------------------------------------------------

TEST(LegalizeSignalTest, MaxUnpoolWithPaddingAndRepeatedIndices) {
  OnnxBuilder b(11);
  b.Input("x", {1, 2, 2, 2});
  b.Input("i", {1, 2, 2, 2}, onnx::TensorProto::INT64);
  auto& node = b.Node("MaxUnpool", {"x", "i"}, {"y"});
  OnnxBuilder::IntsAttr(node, "kernel_shape", {3, 3});
  OnnxBuilder::IntsAttr(node, "strides", {2, 2});
  OnnxBuilder::IntsAttr(node, "pads", {1, 1, 0, 0});
  b.Output("y", {1, 2, 4, 4});
  // Flat in [1, 2, 4, 4]; 5 repeats (the later value wins), channel 1 indexes channel 1.
  std::vector<double> indices = {0, 5, 5, 15, 16, 21, 26, 31};
  ExpectCompiledMatchesReference(b.Serialize(),
                                 {ArrayOf(DataType::Float(), {1, 2, 2, 2}, Ramp(8)),
                                  ArrayOf(DataType::Int(64), {1, 2, 2, 2}, indices)});
}

// ---- tf_idf_vectorizer -----------------------------------------------------------------

void ExpectTfIdfMatches(const std::string& mode, int64_t min_n, int64_t max_n, int64_t skip) {
  OnnxBuilder b(9);
  b.Input("x", {2, 7}, onnx::TensorProto::INT32);
  auto& node = b.Node("TfIdfVectorizer", {"x"}, {"y"});
  OnnxBuilder::StringAttr(node, "mode", mode);
  OnnxBuilder::IntAttr(node, "min_gram_length", min_n);
  OnnxBuilder::IntAttr(node, "max_gram_length", max_n);
  OnnxBuilder::IntAttr(node, "max_skip_count", skip);
  // Unigrams 2, 3, 5 and bigrams (2, 3), (5, 5), (3, 2); the bigram (5, 5) shares column 1.
  OnnxBuilder::IntsAttr(node, "ngram_counts", {0, 3});
  OnnxBuilder::IntsAttr(node, "ngram_indexes", {0, 1, 2, 3, 1, 5});
  OnnxBuilder::IntsAttr(node, "pool_int64s", {2, 3, 5, 2, 3, 5, 5, 3, 2});
  testing::OnnxBuilder::FloatsAttr(node, "weights",
                                   {0.5f, 2, 1.5f, 3, 4});  // column 5 defaults to 1
  b.Output("y", {2, 6});
  SCOPED_TRACE(mode + " n " + std::to_string(min_n) + ".." + std::to_string(max_n) + " skip " +
               std::to_string(skip));
  std::vector<double> tokens = {2, 3, 5, 5, 2, 3, 2, 5, 7, 5, 3, 2, 5, 5};
  ExpectCompiledMatchesReference(b.Serialize(), {ArrayOf(DataType::Int(32), {2, 7}, tokens)});
}

TEST(LegalizeSignalTest, TfIdfModesLengthsAndSkipsMatchTheReference) {
  for (const char* mode : {"TF", "IDF", "TFIDF"}) {
    ExpectTfIdfMatches(mode, 1, 2, 2);
    ExpectTfIdfMatches(mode, 2, 2, 0);
    ExpectTfIdfMatches(mode, 1, 1, 5);
  }
}

}  // namespace
}  // namespace kiln
