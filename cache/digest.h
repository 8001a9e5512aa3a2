// Content digests: every blob Kiln stores or sends is named "sha256:<64 lowercase hex>".
// Shared by cache/, server/ and client/ so all three spell digests the same way.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace kiln::cache {

// 64 lowercase hex digits of the SHA-256 of `bytes`.
std::string Sha256Hex(std::string_view bytes);

// "sha256:" + Sha256Hex(bytes): the name of a blob.
std::string Sha256Digest(std::string_view bytes);

// True for "sha256:" followed by exactly 64 lowercase hex digits.
bool IsValidDigest(std::string_view digest);

// Incremental SHA-256 for data that arrives in chunks (uploads, fetches), so the bytes are
// hashed as they stream instead of in a second pass.
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;

  void Update(std::string_view bytes);
  // "sha256:<hex>" of everything passed to Update; the hasher is spent afterwards.
  std::string FinishDigest();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kiln::cache
