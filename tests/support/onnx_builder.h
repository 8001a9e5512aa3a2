// Builds small ONNX models in tests, through libonnx's protobuf classes, so that test models
// are written next to the assertions about them instead of being opaque binary files.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "onnx/onnx_pb.h"

namespace kiln::testing {

using Dim = std::variant<int64_t, std::string>;  // a size or a dim_param

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int64_t opset = 17) {
    model_.set_ir_version(8);
    model_.set_producer_name("kiln-tests");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  void Input(const std::string& name, const std::vector<Dim>& dims,
             int elem_type = onnx::TensorProto::FLOAT) {
    SetValueInfo(model_.mutable_graph()->add_input(), name, dims, elem_type);
  }
  void Output(const std::string& name, const std::vector<Dim>& dims,
              int elem_type = onnx::TensorProto::FLOAT) {
    SetValueInfo(model_.mutable_graph()->add_output(), name, dims, elem_type);
  }
  void FloatInitializer(const std::string& name, const std::vector<int64_t>& dims,
                        const std::vector<float>& values) {
    onnx::TensorProto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(
        std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  }
  void Int64Initializer(const std::string& name, const std::vector<int64_t>& dims,
                        const std::vector<int64_t>& values) {
    onnx::TensorProto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
  }
  onnx::NodeProto& Node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    onnx::NodeProto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + std::to_string(model_.graph().node_size()) : name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return *n;
  }
  static void IntAttr(onnx::NodeProto& n, const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void FloatAttr(onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void StringAttr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void FloatsAttr(onnx::NodeProto& n, const std::string& name, const std::vector<float>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOATS);
    for (float x : v) a->add_floats(x);
  }
  static void IntsAttr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

  static void GraphAttr(onnx::NodeProto& n, const std::string& name,
                        const onnx::GraphProto& graph) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = graph;
  }
  // The graph built so far, to use as a subgraph (If branches, Loop and Scan bodies).
  const onnx::GraphProto& graph() const { return model_.graph(); }

  std::string Serialize() const { return model_.SerializeAsString(); }
  onnx::ModelProto& model() { return model_; }

 private:
  static void SetValueInfo(onnx::ValueInfoProto* info, const std::string& name,
                           const std::vector<Dim>& dims, int elem_type) {
    info->set_name(name);
    auto* tensor = info->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(elem_type);
    auto* shape = tensor->mutable_shape();
    for (const Dim& d : dims) {
      auto* dim = shape->add_dim();
      if (const int64_t* v = std::get_if<int64_t>(&d)) {
        dim->set_dim_value(*v);
      } else {
        dim->set_dim_param(std::get<std::string>(d));
      }
    }
  }

  onnx::ModelProto model_;
};

}  // namespace kiln::testing
