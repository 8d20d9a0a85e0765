#pragma once

// Bearer-token authentication of incoming RPCs.

#include <grpcpp/server_context.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cohort::rpc {

inline constexpr absl::string_view kAuthorizationHeader = "authorization";

// The check itself, kept free of gRPC for unit tests. `header` is the
// "authorization" metadata value, if the call had one. OK when `expected` is
// unset (auth disabled) or the header is "Bearer <expected>"; otherwise
// UNAUTHENTICATED with a message saying what was missing or wrong.
absl::Status CheckBearerToken(std::optional<absl::string_view> header,
                              const std::optional<std::string>& expected);

// Checks calls against the token a server was started with. Immutable after
// construction; thread-safe.
class Authenticator {
 public:
  explicit Authenticator(std::optional<std::string> token)
      : token_(std::move(token)) {}

  absl::Status Check(const grpc::ServerContextBase& context) const;

 private:
  const std::optional<std::string> token_;
};

}  // namespace cohort::rpc
