// Reassembles a client-streamed model upload and checks it against what the first message
// promised (size and digest) before anything reaches the cache.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/digest.h"
#include "kiln/v1/kiln.pb.h"

namespace kiln::server {

// The proto's limit for one UploadModelRequest.chunk (and one ArtifactChunk.chunk).
inline constexpr uint64_t kMaxChunkBytes = 1 << 20;

class UploadAssembler {
 public:
  explicit UploadAssembler(uint64_t max_model_bytes) : max_model_bytes_(max_model_bytes) {}

  // Takes the next message. Errors are INVALID_ARGUMENT naming the problem (bad digest,
  // oversized chunk, more bytes than announced), or RESOURCE_EXHAUSTED for a model above the
  // size limit; the upload is over after the first error.
  absl::Status Add(const v1::UploadModelRequest& message);
  // After the last message: checks the size and digest and hands over the model bytes.
  absl::StatusOr<std::string> Finish();

  const std::string& name() const { return name_; }
  const std::string& digest() const { return expected_digest_; }

 private:
  absl::Status Begin(const v1::UploadModelRequest& first);

  const uint64_t max_model_bytes_;
  int64_t messages_ = 0;
  std::string name_;
  std::string expected_digest_;
  uint64_t total_bytes_ = 0;
  std::string bytes_;
  cache::Sha256Hasher hasher_;
};

}  // namespace kiln::server
