#include "rpc/auth.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace cohort::rpc {
namespace {

constexpr absl::string_view kBearerPrefix = "Bearer ";

// Compares in time independent of where the strings differ, so that response
// timing does not reveal a token prefix. (The length may leak; it is not a
// secret worth the complexity.)
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace

absl::Status CheckBearerToken(std::optional<absl::string_view> header,
                              const std::optional<std::string>& expected) {
  if (!expected.has_value()) return absl::OkStatus();
  if (!header.has_value()) {
    return absl::UnauthenticatedError(
        "missing bearer token: this server requires one; pass "
        "--auth_token_file=FILE with the cluster's token");
  }
  if (!absl::StartsWith(*header, kBearerPrefix)) {
    return absl::UnauthenticatedError(
        "malformed authorization header: expected \"Bearer <token>\"");
  }
  if (!ConstantTimeEquals(header->substr(kBearerPrefix.size()), *expected)) {
    return absl::UnauthenticatedError(
        "invalid bearer token: the token does not match this server's "
        "--auth_token_file");
  }
  return absl::OkStatus();
}

absl::Status Authenticator::Check(
    const grpc::ServerContextBase& context) const {
  if (!token_.has_value()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(std::string(kAuthorizationHeader));
  std::optional<absl::string_view> header;
  if (it != metadata.end()) {
    header = absl::string_view(it->second.data(), it->second.size());
  }
  return CheckBearerToken(header, token_);
}

}  // namespace cohort::rpc
