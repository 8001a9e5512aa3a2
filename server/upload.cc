#include "server/upload.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kiln::server {

absl::Status UploadAssembler::Begin(const v1::UploadModelRequest& first) {
  if (!cache::IsValidDigest(first.sha256())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "upload: sha256 must be \"sha256:\" followed by 64 lowercase hex digits, got \"",
        first.sha256(), "\""));
  }
  if (first.total_bytes() > max_model_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat("upload: model of ", first.total_bytes(),
                                                     " bytes exceeds this server's limit of ",
                                                     max_model_bytes_, " bytes"));
  }
  name_ = first.name();
  expected_digest_ = first.sha256();
  total_bytes_ = first.total_bytes();
  // Safe to reserve: total_bytes is bounded by the limit just checked.
  bytes_.reserve(total_bytes_);
  return absl::OkStatus();
}

absl::Status UploadAssembler::Add(const v1::UploadModelRequest& message) {
  const int64_t index = messages_++;
  if (index == 0) {
    if (absl::Status status = Begin(message); !status.ok()) return status;
  }
  const std::string& chunk = message.chunk();
  if (chunk.size() > kMaxChunkBytes) {
    return absl::InvalidArgumentError(absl::StrCat("upload: chunk ", index, " is ", chunk.size(),
                                                   " bytes; chunks must be at most ",
                                                   kMaxChunkBytes, " bytes"));
  }
  // Checked per chunk so a lying client cannot make the server buffer past the limit.
  if (bytes_.size() + chunk.size() > total_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("upload: chunk ", index, " brings the model to ", bytes_.size() + chunk.size(),
                     " bytes, more than the announced total_bytes ", total_bytes_));
  }
  bytes_.append(chunk);
  hasher_.Update(chunk);
  Throttle(chunk.size());
  return absl::OkStatus();
}

void UploadAssembler::Throttle(uint64_t message_bytes) {
  if (rate_.bytes_per_second <= 0) return;
  const absl::Time now = rate_.now();
  if (messages_ == 1) first_message_ = now;
  counted_bytes_ += std::max<uint64_t>(message_bytes, UploadRate::kMinMessageCost);
  // The first chunk's worth is free (a burst); the rest must not arrive ahead of the rate.
  if (counted_bytes_ <= kMaxChunkBytes) return;
  const absl::Time due =
      first_message_ + absl::Seconds(static_cast<double>(counted_bytes_ - kMaxChunkBytes) /
                                     static_cast<double>(rate_.bytes_per_second));
  if (due > now) rate_.sleep(due - now);
}

absl::StatusOr<std::string> UploadAssembler::Finish() {
  if (messages_ == 0) {
    return absl::InvalidArgumentError(
        "upload: no messages; the first must carry sha256 and total_bytes");
  }
  if (bytes_.size() != total_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("truncated upload: got ", bytes_.size(), " of ", total_bytes_, " bytes"));
  }
  std::string actual = hasher_.FinishDigest();
  if (actual != expected_digest_) {
    return absl::InvalidArgumentError(absl::StrCat("upload: digest mismatch: the client announced ",
                                                   expected_digest_, " but the bytes hash to ",
                                                   actual));
  }
  return std::move(bytes_);
}

}  // namespace kiln::server
