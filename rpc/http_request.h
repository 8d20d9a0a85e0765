#pragma once

// The head of an HTTP/1.x request, as the /metrics endpoint reads it: the
// request line and the one header it acts on. Pure functions; thread-safe.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort::rpc {

struct HttpRequestHead {
  std::string method;  // as sent: "GET"
  std::string path;    // the target without its query: "/metrics"
  std::optional<std::string> authorization;  // the header's value, trimmed
};

// Where the head in `received` ends: the offset just past its blank line,
// or nullopt while it has not ended. Lines may end in CRLF or a bare LF.
std::optional<size_t> RequestHeadEnd(absl::string_view received);

// Parses a complete head (request line, header lines, blank line).
// INVALID_ARGUMENT naming what is malformed: the request line, an HTTP
// version other than 1.x, a header line without a colon.
absl::StatusOr<HttpRequestHead> ParseRequestHead(absl::string_view head);

}  // namespace cohort::rpc
