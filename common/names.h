#pragma once

// Checks on names that users choose (variables, metrics). They travel in
// protobuf strings and JSON documents, both of which require UTF-8, and they
// appear in logs and errors, where control characters would garble a line.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cohort {

inline constexpr size_t kMaxNameBytes = 1024;

// Whether `text` is well-formed UTF-8 (no overlong forms, no surrogates,
// nothing above U+10FFFF).
bool IsValidUtf8(absl::string_view text);

// `text` made fit to travel in a protobuf string: each byte that is not
// part of well-formed UTF-8 becomes U+FFFD, and text longer than max_bytes
// is cut on a character boundary, with a note of how much, to fit in
// max_bytes (at least 40). For text from user code (errors, metric names),
// which must reach the coordinator even when malformed.
std::string ToReportableText(absl::string_view text, size_t max_bytes);

// OK, or INVALID_ARGUMENT naming `what` ("variable") and the problem: the
// name is empty, longer than kMaxNameBytes, not UTF-8, or holds a control
// character.
absl::Status CheckName(absl::string_view what, absl::string_view name);

// `text` in double quotes, escaped (C style) so that an error message that
// shows user input stays on one line: "a\nb" for a newline.
std::string Quoted(absl::string_view text);

}  // namespace cohort
