// UploadAssembler: the checks an upload passes before anything is stored.
#include <string>

#include "cache/digest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/upload.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;

v1::UploadModelRequest Header(const std::string& model, std::string chunk) {
  v1::UploadModelRequest first;
  first.set_name("m.onnx");
  first.set_sha256(cache::Sha256Digest(model));
  first.set_total_bytes(model.size());
  first.set_chunk(std::move(chunk));
  return first;
}

v1::UploadModelRequest Chunk(std::string bytes) {
  v1::UploadModelRequest message;
  message.set_chunk(std::move(bytes));
  return message;
}

TEST(UploadAssemblerTest, ReassemblesChunksInOrder) {
  UploadAssembler upload(100);
  ASSERT_TRUE(upload.Add(Header("abcdef", "ab")).ok());
  ASSERT_TRUE(upload.Add(Chunk("cd")).ok());
  ASSERT_TRUE(upload.Add(Chunk("ef")).ok());
  absl::StatusOr<std::string> bytes = upload.Finish();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, "abcdef");
  EXPECT_EQ(upload.name(), "m.onnx");
  EXPECT_EQ(upload.digest(), cache::Sha256Digest("abcdef"));
}

TEST(UploadAssemblerTest, EmptyModelInOneMessageIsFine) {
  UploadAssembler upload(100);
  ASSERT_TRUE(upload.Add(Header("", "")).ok());
  EXPECT_EQ(*upload.Finish(), "");
}

TEST(UploadAssemblerTest, ChunkOfExactlyOneMebibyteIsAccepted) {
  const std::string model(kMaxChunkBytes, 'x');
  UploadAssembler upload(kMaxChunkBytes);
  ASSERT_TRUE(upload.Add(Header(model, model)).ok());
  EXPECT_TRUE(upload.Finish().ok());
}

TEST(UploadAssemblerTest, ChunkOneByteOverTheLimitNamesItsIndex) {
  const std::string big(kMaxChunkBytes + 1, 'x');
  UploadAssembler upload(10 * kMaxChunkBytes);
  ASSERT_TRUE(upload.Add(Header("x" + big, "x")).ok());
  absl::Status status = upload.Add(Chunk(big));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("chunk 1 is 1048577 bytes"));
}

TEST(UploadAssemblerTest, NoMessagesIsInvalidArgument) {
  UploadAssembler upload(100);
  absl::StatusOr<std::string> bytes = upload.Finish();
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bytes.status().message(), HasSubstr("first must carry sha256"));
}

TEST(UploadAssemblerTest, UppercaseDigestIsMalformed) {
  v1::UploadModelRequest first = Header("abc", "abc");
  std::string upper = first.sha256();
  for (char& c : upper) c = static_cast<char>(toupper(c));
  first.set_sha256(upper);
  UploadAssembler upload(100);
  EXPECT_EQ(upload.Add(first).code(), absl::StatusCode::kInvalidArgument);
}

TEST(UploadAssemblerTest, TooLargeModelIsRefusedFromTheHeader) {
  UploadAssembler upload(5);
  absl::Status status = upload.Add(Header("abcdef", ""));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("6 bytes exceeds this server's limit of 5"));
}

}  // namespace
}  // namespace kiln::server
