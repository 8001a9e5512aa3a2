#include "server/auth.h"

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cache/digest.h"

namespace kiln::server {
namespace {

constexpr size_t kMinTokenLength = 16;

const char* RoleName(Role role) {
  switch (role) {
    case Role::kCompile:
      return "compile";
    case Role::kTune:
      return "tune";
    case Role::kAdmin:
      return "admin";
  }
  return "?";
}

bool IsTenantName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

absl::Status SetRoles(absl::string_view roles, Caller& caller) {
  for (absl::string_view role : absl::StrSplit(roles, ',')) {
    if (role == "compile") {
      caller.compile = true;
    } else if (role == "tune") {
      caller.tune = true;
    } else if (role == "admin") {
      caller.admin = true;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown role \"", role, "\" (roles: compile, tune, admin)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<std::string, Caller>> ParseLine(absl::string_view line) {
  std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
  if (words.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected `TOKEN TENANT ROLE[,ROLE]`, got ", words.size(), " words"));
  }
  if (words[0].size() < kMinTokenLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("token shorter than ", kMinTokenLength, " characters"));
  }
  if (!IsTenantName(words[1])) {
    return absl::InvalidArgumentError(
        absl::StrCat("tenant \"", words[1], "\" is not [A-Za-z0-9._-]+"));
  }
  Caller caller{.tenant = std::string(words[1])};
  if (absl::Status status = SetRoles(words[2], caller); !status.ok()) return status;
  return std::pair(cache::Sha256Hex(std::string_view(words[0].data(), words[0].size())),
                   std::move(caller));
}

}  // namespace

bool Caller::Has(Role role) const {
  if (admin) return true;
  return role == Role::kCompile ? compile : role == Role::kTune ? tune : false;
}

absl::Status Authorize(const Caller& caller, Role role, absl::string_view what) {
  if (caller.Has(role)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("tenant \"", caller.tenant, "\" lacks the ",
                                                  RoleName(role), " role, needed for ", what));
}

TokenTable TokenTable::Open() {
  TokenTable table;
  table.open_ = true;
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::InvalidArgumentError(absl::StrCat("token file ", path, ": cannot read"));
  std::stringstream text;
  text << file.rdbuf();
  return Parse(text.str(), path);
}

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text, absl::string_view source) {
  TokenTable table;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    absl::StatusOr<std::pair<std::string, Caller>> entry = ParseLine(line);
    if (!entry.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file ", source, ":", number, ": ", entry.status().message()));
    }
    if (!table.callers_.insert(*std::move(entry)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file ", source, ":", number, ": the token appears twice"));
    }
  }
  return table;
}

absl::StatusOr<Caller> TokenTable::Authenticate(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  if (open_) return Caller{.tenant = "", .compile = true, .tune = true, .admin = true};
  auto header = metadata.find("authorization");
  if (header == metadata.end()) {
    return absl::UnauthenticatedError("no `authorization: Bearer TOKEN` metadata");
  }
  absl::string_view value(header->second.data(), header->second.size());
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWithIgnoreCase(value, kBearer)) {
    return absl::UnauthenticatedError("authorization metadata is not `Bearer TOKEN`");
  }
  const absl::string_view token = value.substr(kBearer.size());
  auto caller = callers_.find(cache::Sha256Hex(std::string_view(token.data(), token.size())));
  if (caller == callers_.end()) return absl::UnauthenticatedError("unknown token");
  return caller->second;
}

}  // namespace kiln::server
