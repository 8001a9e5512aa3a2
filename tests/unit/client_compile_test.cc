// `kiln compile --server` and `kiln targets --server` against a fake kilnd in this process:
// chunked upload with digest, event printing, verified fetch, files written, errors surfaced.
#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cache/digest.h"
#include "client/cli.h"
#include "compiler/ir/target.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kiln/v1/kiln.grpc.pb.h"

// onnx_proto is the client library's private dependency; its headers need these.
#define ONNX_ML 1
#define ONNX_NAMESPACE onnx
#include "onnx/onnx_pb.h"

namespace kiln::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Answers like kilnd: every target compiles to the same artifact, except "broken", which
// fails with INVALID_ARGUMENT.
class FakeKiln final : public v1::Kiln::Service {
 public:
  std::string artifact =
      "\x7f"
      "ELF fake artifact";
  bool corrupt_fetch = false;
  int upload_messages = 0;
  std::string uploaded;
  std::string uploaded_sha256;
  v1::CompileRequest compile_request;

  grpc::Status UploadModel(grpc::ServerContext*, grpc::ServerReader<v1::UploadModelRequest>* reader,
                           v1::UploadModelResponse* response) override {
    v1::UploadModelRequest request;
    while (reader->Read(&request)) {
      if (upload_messages++ == 0) uploaded_sha256 = request.sha256();
      if (request.chunk().size() > (1u << 20)) {
        return {grpc::StatusCode::INVALID_ARGUMENT, "chunk over 1 MiB"};
      }
      uploaded += request.chunk();
    }
    if (cache::Sha256Digest(uploaded) != uploaded_sha256) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "digest mismatch"};
    }
    response->set_model_digest(uploaded_sha256);
    response->set_size_bytes(uploaded.size());
    return grpc::Status::OK;
  }

  grpc::Status Compile(grpc::ServerContext*, const v1::CompileRequest* request,
                       grpc::ServerWriter<v1::CompileEvent>* writer) override {
    compile_request = *request;
    grpc::Status status = grpc::Status::OK;
    for (const std::string& target : request->targets()) {
      v1::CompileEvent event;
      event.set_target_preset(target);
      event.set_target("triple=" + target);
      if (target == "broken") {
        event.set_kind(v1::CompileEvent::TARGET_ERROR);
        event.set_error_code(grpc::StatusCode::INVALID_ARGUMENT);
        event.set_message("node 'n0' (Foo): unsupported operator");
        writer->Write(event);
        if (status.ok()) status = {grpc::StatusCode::INVALID_ARGUMENT, event.message()};
        continue;
      }
      event.set_kind(v1::CompileEvent::CACHE_MISS);
      writer->Write(event);
      event.set_kind(v1::CompileEvent::STAGE);
      event.set_name("import");
      writer->Write(event);
      event.set_kind(v1::CompileEvent::TARGET_DONE);
      event.set_name("");
      event.set_artifact_digest(cache::Sha256Digest(artifact));
      event.set_artifact_file_name("model.so");
      event.set_artifact_size(artifact.size());
      writer->Write(event);
    }
    return status;
  }

  grpc::Status FetchArtifact(grpc::ServerContext*, const v1::FetchArtifactRequest* request,
                             grpc::ServerWriter<v1::ArtifactChunk>* writer) override {
    if (request->artifact_digest() != cache::Sha256Digest(artifact)) {
      return {grpc::StatusCode::NOT_FOUND, "no such artifact"};
    }
    v1::ArtifactChunk first;
    first.set_artifact_digest(request->artifact_digest());
    first.set_total_bytes(artifact.size());
    first.set_file_name("model.so");
    first.set_manifest_json("{\"artifact\": \"model.so\"}");
    first.set_chunk(artifact.substr(0, 4));
    writer->Write(first);
    v1::ArtifactChunk rest;
    rest.set_chunk(corrupt_fetch ? "tampered" : artifact.substr(4));
    writer->Write(rest);
    return grpc::Status::OK;
  }

  grpc::Status ListTargets(grpc::ServerContext*, const v1::ListTargetsRequest*,
                           v1::ListTargetsResponse* response) override {
    v1::TargetInfo* info = response->add_targets();
    info->set_name("x86_64");
    info->set_canonical("triple=x86_64-unknown-linux-gnu;cpu=x86-64;features=;vector_bits=128");
    info->set_description("any x86-64 server");
    return grpc::Status::OK;
  }
};

class CompileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(port);
    std::filesystem::create_directories(dir_);
    // 2.5 MiB: three upload messages.
    model_.resize((5u << 20) / 2);
    for (size_t i = 0; i < model_.size(); ++i) model_[i] = static_cast<char>(i * 131 % 251);
    std::ofstream(Path("model.onnx"), std::ios::binary) << model_;
  }
  void TearDown() override {
    server_->Shutdown();
    std::filesystem::remove_all(dir_);
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::string ReadBack(const std::string& name) {
    std::ifstream in(Path(name), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    return bytes.str();
  }

  int Kiln(std::vector<std::string> words) {
    out_.str("");
    err_.str("");
    return RunCli(words, out_, err_);
  }

  FakeKiln service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::string model_;
  std::filesystem::path dir_ = std::filesystem::path(::testing::TempDir()) /
                               ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::ostringstream out_, err_;
};

TEST_F(CompileTest, UploadsCompilesFetchesAndWrites) {
  ASSERT_EQ(Kiln({"compile", Path("model.onnx"), "--target", "x86_64", "--server", address_,
                  "--out", Path("out"), "--dim-bound", "seq=128"}),
            0)
      << err_.str();
  EXPECT_EQ(service_.upload_messages, 3);
  EXPECT_EQ(service_.uploaded, model_);
  EXPECT_EQ(service_.uploaded_sha256, cache::Sha256Digest(model_));
  EXPECT_THAT(service_.compile_request.targets(), ElementsAre("x86_64"));
  EXPECT_EQ(service_.compile_request.dim_bounds().at("seq"), 128);
  EXPECT_THAT(err_.str(), HasSubstr("[x86_64] cache miss\n[x86_64] stage import\n"));
  EXPECT_THAT(err_.str(), HasSubstr("[x86_64] done: model.so, " +
                                    std::to_string(service_.artifact.size()) + " bytes\n"));
  EXPECT_EQ(out_.str(), "x86_64: " + Path("out/x86_64/model.so") + "\n");
  EXPECT_EQ(ReadBack("out/x86_64/model.so"), service_.artifact);
  EXPECT_EQ(ReadBack("out/x86_64/manifest.json"), "{\"artifact\": \"model.so\"}");
}

TEST_F(CompileTest, DescriptionIsWrittenUnderItsDisplayName) {
  const std::string description = "triple=x86_64-linux-gnu;cpu=x86-64-v3;features=+fma,+avx2";
  ASSERT_EQ(Kiln({"compile", Path("model.onnx"), "-t", description, "--server", address_, "--out",
                  Path("out")}),
            0)
      << err_.str();
  EXPECT_THAT(service_.compile_request.targets(), ElementsAre(description));
  const std::string folder = ir::ParseTarget(description)->preset;
  EXPECT_THAT(folder, ::testing::MatchesRegex("x86_64-custom-[0-9a-f]{8}"));
  EXPECT_EQ(out_.str(), folder + ": " + Path("out/" + folder + "/model.so") + "\n");
  EXPECT_EQ(ReadBack("out/" + folder + "/model.so"), service_.artifact);
}

TEST_F(CompileTest, FailedTargetReportsCodeAndKeepsTheOthers) {
  EXPECT_EQ(Kiln({"compile", Path("model.onnx"), "-t", "x86_64", "-t", "broken", "--server",
                  address_, "--out", Path("out")}),
            1);
  EXPECT_THAT(err_.str(), HasSubstr("[broken] error: INVALID_ARGUMENT: node 'n0' (Foo): "
                                    "unsupported operator\n"));
  EXPECT_THAT(err_.str(), HasSubstr("error: INVALID_ARGUMENT: Compile (kilnd at " + address_ +
                                    "): node 'n0' (Foo): unsupported operator\n"));
  EXPECT_EQ(ReadBack("out/x86_64/model.so"), service_.artifact);
  EXPECT_FALSE(std::filesystem::exists(Path("out/broken")));
}

TEST_F(CompileTest, CorruptArtifactIsNeverWritten) {
  service_.corrupt_fetch = true;
  EXPECT_EQ(Kiln({"compile", Path("model.onnx"), "-t", "x86_64", "--server", address_, "--out",
                  Path("out")}),
            1);
  EXPECT_THAT(err_.str(), HasSubstr("error: DATA_LOSS: [x86_64] FetchArtifact: received"));
  EXPECT_FALSE(std::filesystem::exists(Path("out/x86_64/model.so")));
}

TEST_F(CompileTest, UnreachableServerIsUnavailable) {
  server_->Shutdown();
  EXPECT_EQ(Kiln({"compile", Path("model.onnx"), "-t", "x86_64", "--server", address_, "--out",
                  Path("out"), "--timeout", "5"}),
            1);
  EXPECT_THAT(err_.str(), HasSubstr("error: UNAVAILABLE: UploadModel (kilnd at " + address_));
}

TEST_F(CompileTest, TargetsFromTheServer) {
  ASSERT_EQ(Kiln({"targets", "--server", address_}), 0) << err_.str();
  EXPECT_EQ(out_.str(),
            "x86_64\ttriple=x86_64-unknown-linux-gnu;cpu=x86-64;features=;vector_bits=128\tany "
            "x86-64 server\n");
}

// The model's external data travels inside the uploaded blob; kilnd is never sent a file name.
TEST_F(CompileTest, InlinesExternalDataBeforeUpload) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::TensorProto* w = model.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  onnx::StringStringEntryProto* location = w->add_external_data();
  location->set_key("location");
  location->set_value("weights/w.bin");
  std::filesystem::create_directories(Path("weights"));
  std::ofstream(Path("weights/w.bin"), std::ios::binary) << std::string(8, '\x01');
  std::ofstream(Path("model.onnx"), std::ios::binary) << model.SerializeAsString();
  ASSERT_EQ(Kiln({"compile", Path("model.onnx"), "-t", "x86_64", "--server", address_, "--out",
                  Path("out")}),
            0)
      << err_.str();
  onnx::ModelProto uploaded;
  ASSERT_TRUE(uploaded.ParseFromString(service_.uploaded));
  const onnx::TensorProto& inlined = uploaded.graph().initializer(0);
  EXPECT_EQ(inlined.data_location(), onnx::TensorProto::DEFAULT);
  EXPECT_EQ(inlined.external_data_size(), 0);
  EXPECT_EQ(inlined.raw_data(), std::string(8, '\x01'));

  // A location outside the model's folder is refused before anything is uploaded.
  location->set_value("../secret");
  std::ofstream(Path("model.onnx"), std::ios::binary) << model.SerializeAsString();
  service_.upload_messages = 0;
  EXPECT_EQ(Kiln({"compile", Path("model.onnx"), "-t", "x86_64", "--server", address_, "--out",
                  Path("out")}),
            1);
  EXPECT_THAT(err_.str(), HasSubstr("error: INVALID_ARGUMENT: model '" + Path("model.onnx") +
                                    "': tensor 'w' (external data '../secret'): the location "
                                    "contains '..'"));
  EXPECT_EQ(service_.upload_messages, 0);
}

// Every command that reads a model inlines its external data: here `kiln inspect`, in process.
TEST_F(CompileTest, InspectReadsExternalData) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* graph = model.mutable_graph();
  for (const char* name : {"x", "y"}) {
    onnx::ValueInfoProto* info = name[0] == 'x' ? graph->add_input() : graph->add_output();
    info->set_name(name);
    info->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    info->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
  }
  onnx::NodeProto* add = graph->add_node();
  add->set_op_type("Add");
  add->add_input("x");
  add->add_input("w");
  add->add_output("y");
  onnx::TensorProto* w = graph->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  onnx::StringStringEntryProto* location = w->add_external_data();
  location->set_key("location");
  location->set_value("w.bin");
  std::ofstream(Path("w.bin"), std::ios::binary) << std::string(8, '\0');
  std::ofstream(Path("model.onnx"), std::ios::binary) << model.SerializeAsString();
  ASSERT_EQ(Kiln({"inspect", Path("model.onnx")}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("add"));

  std::filesystem::remove(Path("w.bin"));
  EXPECT_EQ(Kiln({"inspect", Path("model.onnx")}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("tensor 'w' (external data 'w.bin'): no such file"));
}

}  // namespace
}  // namespace kiln::client
