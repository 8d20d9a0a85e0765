#include "rpc/log_service.h"

#include "absl/time/clock.h"
#include "rpc/limits.h"
#include "rpc/status_conversion.h"

namespace cohort::rpc {
namespace {

class LogReader final : public PumpedWriter<v1::LogChunk> {
 public:
  LogReader(StreamPump* pump, const LogBuffer* buffer,
            const v1::ReadLogRequest& request)
      : PumpedWriter(pump), cursor_(buffer, request), follow_(request.follow()) {}

 private:
  Step Next() override {
    int64_t dropped = 0;
    const std::vector<LogEntry> entries = cursor_.Next(&dropped);
    const absl::Time now = absl::Now();
    Step step;
    if (!entries.empty() || dropped > 0) {
      v1::LogChunk chunk;
      AppendLogLines(entries, &chunk);
      chunk.set_dropped(dropped);
      step.message = std::move(chunk);
      last_sent_ = now;
    } else if (follow_ && now - last_sent_ >= kStreamKeepalive) {
      // Nothing new: an empty chunk tells the follower this task is there.
      step.message = v1::LogChunk();
      last_sent_ = now;
    }
    if (step.message.has_value() && follow_) {
      step.message->set_keeps_alive(true);
    }
    // Without follow, the call ends once it has caught up.
    if (!follow_ && cursor_.CaughtUp()) step.finish = grpc::Status::OK;
    return step;
  }

  LogCursor cursor_;  // pump thread only
  const bool follow_;
  absl::Time last_sent_ = absl::Now();  // pump thread only
};

}  // namespace

LogCursor::LogCursor(const LogBuffer* buffer, const v1::ReadLogRequest& request)
    : buffer_(buffer),
      since_(request.since_unix_ms() > 0
                 ? absl::FromUnixMillis(request.since_unix_ms())
                 : absl::InfinitePast()),
      after_(request.tail_lines() > 0
                 ? buffer->TailStart(static_cast<size_t>(request.tail_lines()))
                 : request.after_seq()) {}

std::vector<LogEntry> LogCursor::Next(int64_t* dropped) {
  int64_t lost = 0;
  std::vector<LogEntry> entries =
      buffer_->Read(after_, kLogLinesPerChunk, &lost);
  *dropped += lost;
  if (!entries.empty()) after_ = entries.back().seq;
  std::erase_if(entries, [this](const LogEntry& e) { return e.time < since_; });
  return entries;
}

void AppendLogLines(const std::vector<LogEntry>& entries,
                    v1::LogChunk* chunk) {
  for (const LogEntry& entry : entries) {
    v1::LogLine* line = chunk->add_lines();
    line->set_seq(entry.seq);
    line->set_time_unix_ms(absl::ToUnixMillis(entry.time));
    line->set_text(entry.text);
  }
}

LogService::LogService(const LogBuffer* buffer, const Authenticator* auth,
                       StreamPump* pump)
    : buffer_(buffer), auth_(auth), pump_(pump) {}

grpc::ServerWriteReactor<v1::LogChunk>* LogService::ReadLog(
    grpc::CallbackServerContext* context, const v1::ReadLogRequest* request) {
  if (absl::Status status = auth_->Check(*context); !status.ok()) {
    return new RefusedWriter<v1::LogChunk>(ToGrpcStatus(status));
  }
  if (request->tail_lines() < 0 || request->after_seq() < 0) {
    return new RefusedWriter<v1::LogChunk>(grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        "ReadLog: tail_lines and after_seq must not be negative"));
  }
  auto* reader = new LogReader(pump_, buffer_, *request);
  reader->Begin();
  return reader;
}

}  // namespace cohort::rpc
