#pragma once

// The recent lines a daemon logged, held in memory so that they can be read
// over gRPC (Logs.ReadLog) from any host. The journal or the task's log file
// keeps the full history; this keeps only the newest lines, up to a byte
// budget, and says how many a reader missed.

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort {

struct LogEntry {
  int64_t seq = 0;  // 1, 2, ... in the order appended
  absl::Time time;
  std::string text;  // without the newline
};

// Thread-safe. Append never blocks on readers.
class LogBuffer {
 public:
  explicit LogBuffer(size_t max_bytes);
  LogBuffer(const LogBuffer&) = delete;
  LogBuffer& operator=(const LogBuffer&) = delete;

  // The buffer every daemon's logger writes to (see logging.h).
  static LogBuffer& Default();

  void Append(absl::Time time, std::string text);

  // Up to `max_lines` entries with seq > after_seq, oldest first.
  // `*dropped`: how many entries after after_seq are no longer held.
  std::vector<LogEntry> Read(int64_t after_seq, size_t max_lines,
                             int64_t* dropped) const;
  // The seq of the entry `n` before the newest (0 when fewer are held), so
  // that Read(TailStart(n), ...) returns the last n entries.
  int64_t TailStart(size_t n) const;
  int64_t last_seq() const;

 private:
  const size_t max_bytes_;
  mutable absl::Mutex mu_;
  std::deque<LogEntry> entries_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace cohort
