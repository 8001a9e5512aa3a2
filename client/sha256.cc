#include "client/sha256.h"

#include <openssl/evp.h>

namespace kiln::client {

std::string Sha256Digest(std::string_view bytes) {
  unsigned char hash[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), hash, &size, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string digest = "sha256:";
  for (unsigned int i = 0; i < size; ++i) {
    digest.push_back(kHex[hash[i] >> 4]);
    digest.push_back(kHex[hash[i] & 0xf]);
  }
  return digest;
}

}  // namespace kiln::client
