#pragma once

// Text from user code (a step's error, a metric's name, a stop reason)
// travels to the coordinator in protobuf `string` fields, which the receiver
// refuses whole when one holds malformed UTF-8, and a message holding a
// megabyte-long error can pass the size limit. Either way every later report
// would be refused and the job would never end. These repair such text
// before it is sent (common/names.h, ToReportableText). Stateless;
// thread-safe.

#include <cstddef>

#include "google/protobuf/message.h"

namespace cohort::rpc {

// Longest text a reported string keeps.
inline constexpr size_t kMaxReportedTextBytes = 64 << 10;

// Whether any `string` field of `message`, nested messages and map keys
// included, is malformed UTF-8 or longer than max_bytes.
bool HasUnreportableText(const google::protobuf::Message& message,
                         size_t max_bytes = kMaxReportedTextBytes);

// Repairs each such field in place; returns how many it changed.
int MakeReportable(google::protobuf::Message& message,
                   size_t max_bytes = kMaxReportedTextBytes);

// `message` itself when it needs no repair (the common case, with no copy),
// else a repaired copy of it kept in `storage`.
template <typename Message>
const Message& Reportable(const Message& message, Message& storage) {
  if (!HasUnreportableText(message)) return message;
  storage = message;
  MakeReportable(storage);
  return storage;
}

}  // namespace cohort::rpc
