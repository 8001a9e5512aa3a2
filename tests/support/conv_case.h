// A convolution test case for the schedule rules' tests: x[n, c, h, w] * w[m, c / group, k, k]
// with constant random weights and a bias, then relu, with a residual input added before the
// relu when `residual`; the batch `n` is symbolic.
#pragma once

#include <string>
#include <vector>

#include "tests/support/onnx_builder.h"
#include "tests/support/schedule_check.h"

namespace kiln::testing {

struct ConvCase {
  std::string name;
  int64_t c, m, h, w, k;
  int64_t stride = 1, dilation = 1, group = 1;
  std::vector<int64_t> pads = {0, 0, 0, 0};  // top, left, bottom, right
  bool residual = false;

  int64_t OutDim(int64_t in, int64_t begin, int64_t end) const {
    return (in + begin + end - dilation * (k - 1) - 1) / stride + 1;
  }
  std::vector<int64_t> OutShape(int64_t batch) const {
    return {batch, m, OutDim(h, pads[0], pads[2]), OutDim(w, pads[1], pads[3])};
  }

  std::string Model() const {
    OnnxBuilder b;
    b.Input("x", {"n", c, h, w});
    b.FloatInitializer("w", {m, c / group, k, k}, RandomValues(m * (c / group) * k * k, 11));
    b.FloatInitializer("b", {m}, RandomValues(m, 12));
    std::vector<int64_t> out = OutShape(1);
    onnx::NodeProto& conv = b.Node("Conv", {"x", "w", "b"}, {"y"});
    OnnxBuilder::IntsAttr(conv, "strides", {stride, stride});
    OnnxBuilder::IntsAttr(conv, "dilations", {dilation, dilation});
    OnnxBuilder::IntsAttr(conv, "pads", pads);
    OnnxBuilder::IntAttr(conv, "group", group);
    std::string before_relu = "y";
    if (residual) {
      b.Input("r", {"n", m, out[2], out[3]});
      b.Node("Add", {"y", "r"}, {"s"});
      before_relu = "s";
    }
    b.Node("Relu", {before_relu}, {"z"});
    b.Output("z", {"n", m, out[2], out[3]});
    return b.Serialize();
  }
};

}  // namespace kiln::testing
