#pragma once

// cohort.v1.Logs on every daemon: its recent log lines (LogBuffer), and with
// `follow` each new one, streamed through a StreamPump; a follower gets an
// empty chunk at least every kStreamKeepalive.

#include "cohort/v1/logs.grpc.pb.h"
#include "common/log_buffer.h"
#include "rpc/auth.h"
#include "rpc/stream_pump.h"

namespace cohort::rpc {

// One chunk holds at most this many lines, so that a long backlog goes out
// in messages well under the gRPC size limit.
inline constexpr int kLogLinesPerChunk = 500;

// A reader's place in a LogBuffer, as a ReadLogRequest sets it: after
// `after_seq`, or before the last `tail_lines`; lines older than
// `since_unix_ms` are skipped. Not thread-safe: one reader's.
class LogCursor {
 public:
  LogCursor(const LogBuffer* buffer, const v1::ReadLogRequest& request);

  // The next lines, at most kLogLinesPerChunk; adds to *dropped those no
  // longer held.
  std::vector<LogEntry> Next(int64_t* dropped);
  // Whether every line logged so far has been read.
  bool CaughtUp() const { return after_ >= buffer_->last_seq(); }

 private:
  const LogBuffer* const buffer_;
  const absl::Time since_;
  int64_t after_;
};

// The lines of `entries` as LogLines (seq, time, text).
void AppendLogLines(const std::vector<LogEntry>& entries,
                    v1::LogChunk* chunk);

// `buffer`, `auth` and `pump` are not owned and must outlive the service and
// its calls. Thread-safe.
class LogService final : public v1::Logs::CallbackService {
 public:
  LogService(const LogBuffer* buffer, const Authenticator* auth,
             StreamPump* pump);

  grpc::ServerWriteReactor<v1::LogChunk>* ReadLog(
      grpc::CallbackServerContext* context,
      const v1::ReadLogRequest* request) override;

 private:
  const LogBuffer* const buffer_;
  const Authenticator* const auth_;
  StreamPump* const pump_;
};

}  // namespace cohort::rpc
