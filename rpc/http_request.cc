#include "rpc/http_request.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace cohort::rpc {

std::optional<size_t> RequestHeadEnd(absl::string_view received) {
  // Lines end in CRLF, or in a bare LF, which servers may accept (RFC 9112
  // section 2.2) and hand-typed requests send.
  for (size_t lf = received.find('\n'); lf != absl::string_view::npos;
       lf = received.find('\n', lf + 1)) {
    const size_t next = lf + 1;
    if (next < received.size() && received[next] == '\n') return next + 1;
    if (next + 1 < received.size() && received[next] == '\r' &&
        received[next + 1] == '\n') {
      return next + 2;
    }
  }
  return std::nullopt;
}

absl::StatusOr<HttpRequestHead> ParseRequestHead(absl::string_view head) {
  std::vector<absl::string_view> lines;
  for (absl::string_view line : absl::StrSplit(head, '\n')) {
    absl::ConsumeSuffix(&line, "\r");
    if (!line.empty()) lines.push_back(line);
  }
  if (lines.empty()) {
    return absl::InvalidArgumentError("an empty HTTP request");
  }
  const std::vector<absl::string_view> request_line =
      absl::StrSplit(lines[0], ' ');
  if (request_line.size() != 3 || request_line[0].empty() ||
      !absl::StartsWith(request_line[1], "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("a malformed request line: \"",
                     absl::CEscape(lines[0].substr(0, 100)), "\""));
  }
  if (!absl::StartsWith(request_line[2], "HTTP/1.")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HTTP version \"", absl::CEscape(request_line[2].substr(0, 20)),
        "\" is not served here (HTTP/1.0 and 1.1 are)"));
  }
  HttpRequestHead parsed;
  parsed.method = std::string(request_line[0]);
  const absl::string_view target = request_line[1];
  parsed.path = std::string(target.substr(0, target.find('?')));
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("header line ", i, " has no colon"));
    }
    if (absl::EqualsIgnoreCase(lines[i].substr(0, colon), "authorization")) {
      parsed.authorization =
          std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    }
  }
  return parsed;
}

}  // namespace cohort::rpc
