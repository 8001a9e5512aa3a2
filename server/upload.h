// Reassembles a client-streamed model upload and checks it against what the first message
// promised (size and digest) before anything reaches the cache.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cache/digest.h"
#include "kiln/v1/kiln.pb.h"

namespace kiln::server {

// The proto's limit for one UploadModelRequest.chunk (and one ArtifactChunk.chunk).
inline constexpr uint64_t kMaxChunkBytes = 1 << 20;

// The most one upload stream may send. Each message counts as at least kMinMessageCost bytes, so
// a flood of tiny chunks is held back as well as a flood of big ones.
struct UploadRate {
  static constexpr int64_t kMinMessageCost = 1024;
  int64_t bytes_per_second = 0;  // 0: no limit
  // The clock and the wait, replaceable in tests.
  std::function<absl::Time()> now = [] { return absl::Now(); };
  std::function<void(absl::Duration)> sleep = [](absl::Duration d) { absl::SleepFor(d); };
};

class UploadAssembler {
 public:
  explicit UploadAssembler(uint64_t max_model_bytes, UploadRate rate = {})
      : max_model_bytes_(max_model_bytes), rate_(std::move(rate)) {}

  // Takes the next message. Errors are INVALID_ARGUMENT naming the problem (bad digest,
  // oversized chunk, more bytes than announced), or RESOURCE_EXHAUSTED for a model above the
  // size limit; the upload is over after the first error.
  // With a rate, returns only once the stream is back under it (one chunk of burst allowed), so
  // the caller reads the next message no sooner and HTTP/2 flow control slows the client: a
  // fast client is throttled, not failed. One wait is at most about a chunk's worth of time.
  absl::Status Add(const v1::UploadModelRequest& message);
  // After the last message: checks the size and digest and hands over the model bytes.
  absl::StatusOr<std::string> Finish();

  const std::string& name() const { return name_; }
  const std::string& digest() const { return expected_digest_; }

 private:
  absl::Status Begin(const v1::UploadModelRequest& first);

  // Waits until the bytes counted so far are within the rate.
  void Throttle(uint64_t message_bytes);

  const uint64_t max_model_bytes_;
  const UploadRate rate_;
  absl::Time first_message_;
  uint64_t counted_bytes_ = 0;  // for the rate: every message at least kMinMessageCost
  int64_t messages_ = 0;
  std::string name_;
  std::string expected_digest_;
  uint64_t total_bytes_ = 0;
  std::string bytes_;
  cache::Sha256Hasher hasher_;
};

}  // namespace kiln::server
