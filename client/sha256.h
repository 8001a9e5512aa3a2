// Content digests as the API spells them: "sha256:" and 64 lowercase hex digits.
// (cache/digest.h has the server's; the client keeps its own so that it does not link cache/.)
#pragma once

#include <string>
#include <string_view>

namespace kiln::client {

std::string Sha256Digest(std::string_view bytes);

}  // namespace kiln::client
