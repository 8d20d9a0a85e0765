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

// OK, or INVALID_ARGUMENT naming `what` ("variable") and the problem: the
// name is empty, longer than kMaxNameBytes, not UTF-8, or holds a control
// character.
absl::Status CheckName(absl::string_view what, absl::string_view name);

// `text` in double quotes, escaped (C style) so that an error message that
// shows user input stays on one line: "a\nb" for a newline.
std::string Quoted(absl::string_view text);

}  // namespace cohort
