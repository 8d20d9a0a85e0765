#include "common/log_buffer.h"

#include <algorithm>
#include <utility>

namespace cohort {
namespace {

// Per entry, beside its text: the deque slot and the string's header.
constexpr size_t kEntryOverhead = sizeof(LogEntry);

}  // namespace

LogBuffer::LogBuffer(size_t max_bytes) : max_bytes_(max_bytes) {}

LogBuffer& LogBuffer::Default() {
  // 4 MiB: tens of thousands of lines, minutes of a chatty daemon.
  static LogBuffer* const buffer = new LogBuffer(size_t{4} << 20);
  return *buffer;
}

void LogBuffer::Append(absl::Time time, std::string text) {
  absl::MutexLock lock(&mu_);
  bytes_ += text.size() + kEntryOverhead;
  entries_.push_back(LogEntry{next_seq_++, time, std::move(text)});
  // Keep at least the newest line, however long.
  while (bytes_ > max_bytes_ && entries_.size() > 1) {
    bytes_ -= entries_.front().text.size() + kEntryOverhead;
    entries_.pop_front();
  }
}

std::vector<LogEntry> LogBuffer::Read(int64_t after_seq, size_t max_lines,
                                      int64_t* dropped) const {
  absl::MutexLock lock(&mu_);
  std::vector<LogEntry> out;
  *dropped = 0;
  if (entries_.empty()) return out;
  const int64_t first = entries_.front().seq;
  // after_seq comes from a request: compared, never added to, so that
  // INT64_MAX cannot wrap round to the start of the buffer.
  if (after_seq >= entries_.back().seq) return out;
  if (after_seq < first - 1) {
    *dropped = first - 1 - after_seq;
    after_seq = first - 1;
  }
  // Seqs are consecutive, so the start is an index.
  size_t index = static_cast<size_t>(after_seq - (first - 1));
  for (; index < entries_.size() && out.size() < max_lines; ++index) {
    out.push_back(entries_[index]);
  }
  return out;
}

int64_t LogBuffer::TailStart(size_t n) const {
  absl::MutexLock lock(&mu_);
  if (entries_.size() <= n) {
    return entries_.empty() ? next_seq_ - 1 : entries_.front().seq - 1;
  }
  return entries_[entries_.size() - n].seq - 1;
}

int64_t LogBuffer::last_seq() const {
  absl::MutexLock lock(&mu_);
  return next_seq_ - 1;
}

}  // namespace cohort
