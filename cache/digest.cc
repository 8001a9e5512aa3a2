#include "cache/digest.h"

#include <openssl/evp.h>

#include <stdexcept>

#include "absl/strings/ascii.h"

namespace kiln::cache {
namespace {

constexpr std::string_view kPrefix = "sha256:";

std::string ToHex(const unsigned char* data, unsigned int size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(size * 2);
  for (unsigned int i = 0; i < size; ++i) {
    hex.push_back(kDigits[data[i] >> 4]);
    hex.push_back(kDigits[data[i] & 0xf]);
  }
  return hex;
}

}  // namespace

// OpenSSL only fails here on allocation failure or a broken build; neither is a user error.
struct Sha256Hasher::State {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  State() {
    if (ctx == nullptr || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
      throw std::runtime_error("OpenSSL: cannot initialise SHA-256");
    }
  }
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256Hasher::Sha256Hasher() : state_(std::make_unique<State>()) {}
Sha256Hasher::~Sha256Hasher() = default;

void Sha256Hasher::Update(std::string_view bytes) {
  EVP_DigestUpdate(state_->ctx, bytes.data(), bytes.size());
}

std::string Sha256Hasher::FinishDigest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(state_->ctx, md, &size);
  return std::string(kPrefix) + ToHex(md, size);
}

std::string Sha256Digest(std::string_view bytes) {
  Sha256Hasher hasher;
  hasher.Update(bytes);
  return hasher.FinishDigest();
}

std::string Sha256Hex(std::string_view bytes) { return Sha256Digest(bytes).substr(kPrefix.size()); }

bool IsValidDigest(std::string_view digest) {
  if (digest.size() != kPrefix.size() + 64 || digest.substr(0, kPrefix.size()) != kPrefix) {
    return false;
  }
  for (char c : digest.substr(kPrefix.size())) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

}  // namespace kiln::cache
