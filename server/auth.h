// Who is calling: bearer tokens from a token file, each naming a tenant and its roles.
// Models, artifacts and jobs belong to tenants; tuning records are shared, written only by
// the tune role. Without a token file kilnd is open: every caller is the tenant "" with every
// role (for a developer's machine; kilnd logs a warning).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/string_ref.h"

namespace kiln::server {

enum class Role { kCompile, kTune, kAdmin };

struct Caller {
  std::string tenant;
  bool compile = false;
  bool tune = false;
  bool admin = false;  // every role, and every tenant's jobs
  bool Has(Role role) const;
};

// PERMISSION_DENIED naming the tenant, the role and `what` it was needed for.
absl::Status Authorize(const Caller& caller, Role role, absl::string_view what);

class TokenTable {
 public:
  // No token file: everyone is Caller{"", every role}.
  static TokenTable Open();
  // Lines `TOKEN TENANT ROLE[,ROLE...]`; blank lines and # comments skipped. Tokens have at
  // least 16 characters and appear once; tenants are [A-Za-z0-9._-]+; roles are compile,
  // tune and admin. INVALID_ARGUMENT names the file, line and problem (never the token).
  static absl::StatusOr<TokenTable> Load(const std::string& path);
  static absl::StatusOr<TokenTable> Parse(absl::string_view text, absl::string_view source);

  // The caller named by the `authorization: Bearer TOKEN` metadata entry; UNAUTHENTICATED
  // when it is missing or unknown.
  absl::StatusOr<Caller> Authenticate(
      const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;

  bool open() const { return open_; }
  int size() const { return static_cast<int>(callers_.size()); }

 private:
  bool open_ = false;
  // By the token's SHA-256: the table never keeps a token itself.
  absl::flat_hash_map<std::string, Caller> callers_;
};

}  // namespace kiln::server
