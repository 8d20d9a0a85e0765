#include "coordinator/log_relay.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cohort/v1/logs.grpc.pb.h"
#include "common/steady_time.h"
#include "coordinator/job_tasks.h"
#include "rpc/channel.h"
#include "rpc/limits.h"
#include "rpc/log_service.h"
#include "rpc/status_conversion.h"

namespace cohort::coordinator {
namespace {

// After its job ends, a job's stream waits this long for the tasks' last
// lines (a step's final log line is sent on the next pump).
constexpr absl::Duration kJobEndGrace = absl::Seconds(1);
// A relay holds at most this many lines of one task that the reader has not
// taken; beyond, the oldest are dropped and counted.
constexpr size_t kMaxBufferedLines = 20000;
// Lines taken from the sources that the stream has not sent yet. A relay
// takes no more while it holds this many, so that lines arriving faster
// than the reader reads them wait, and are dropped and counted, in the
// sources' bounded buffers instead of piling up here.
constexpr size_t kMaxPendingLines = 4 * rpc::kLogLinesPerChunk;

// The coordinator's own log.
class LocalLogSource final : public LogSource {
 public:
  LocalLogSource(const LogBuffer* buffer, const v1::ReadLogRequest& request)
      : cursor_(buffer, request), follow_(request.follow()) {}

  void Take(std::vector<v1::LogLine>* out, int64_t* dropped) override {
    v1::LogChunk chunk;
    rpc::AppendLogLines(cursor_.Next(dropped), &chunk);
    for (v1::LogLine& line : *chunk.mutable_lines()) {
      line.set_task(task_);
      out->push_back(std::move(line));
    }
  }
  std::optional<grpc::Status> Ended() override {
    if (!follow_ && cursor_.CaughtUp()) return grpc::Status::OK;
    return std::nullopt;
  }
  const std::string& task() const override { return task_; }

 private:
  const std::string task_ = "coordinator";
  rpc::LogCursor cursor_;
  const bool follow_;
};

// A task's Logs.ReadLog call. Keeps itself alive until gRPC is done with it;
// the RemoteLogSource that started it cancels it when dropped. Thread-safe.
class Upstream final : public grpc::ClientReadReactor<v1::LogChunk> {
 public:
  static std::shared_ptr<Upstream> Start(std::string task,
                                         const std::string& address,
                                         const rpc::Security& security,
                                         const v1::ReadLogRequest& request,
                                         int64_t clock_offset_ms) {
    std::shared_ptr<Upstream> upstream(new Upstream(
        std::move(task), address, security, request, clock_offset_ms));
    upstream->self_ = upstream;
    upstream->stub_->async()->ReadLog(upstream->context_.get(),
                                      &upstream->request_, upstream.get());
    upstream->StartRead(&upstream->chunk_);
    upstream->StartCall();
    return upstream;
  }

  void Take(std::vector<v1::LogLine>* out, int64_t* dropped) {
    absl::MutexLock lock(&mu_);
    for (v1::LogLine& line : lines_) out->push_back(std::move(line));
    lines_.clear();
    *dropped += dropped_;
    dropped_ = 0;
  }
  std::optional<grpc::Status> Ended() {
    {
      absl::MutexLock lock(&mu_);
      // Lines still held are not lost because the call ended: Take them
      // first.
      if (!lines_.empty()) return std::nullopt;
      if (status_.has_value() || !keeps_alive_ ||
          std::chrono::steady_clock::now() - last_heard_ <
              absl::ToChronoSeconds(rpc::kStreamSilence)) {
        return status_;
      }
      // A task that keeps alive sends a chunk every kStreamKeepalive.
      status_ = grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          absl::StrCat("the log of ", task_, " at ", connection_.address(),
                       ": nothing heard for ",
                       absl::FormatDuration(rpc::kStreamSilence),
                       "; the task or its host is unreachable"));
    }
    Cancel();
    absl::MutexLock lock(&mu_);
    if (!lines_.empty()) return std::nullopt;  // arrived meanwhile
    return status_;
  }
  void Cancel() { context_->TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the call is over; OnDone follows
    {
      absl::MutexLock lock(&mu_);
      last_heard_ = std::chrono::steady_clock::now();
      keeps_alive_ = keeps_alive_ || chunk_.keeps_alive();
      dropped_ += chunk_.dropped();
      for (v1::LogLine& line : *chunk_.mutable_lines()) {
        line.set_task(task_);
        line.set_time_unix_ms(line.time_unix_ms() - clock_offset_ms_);
        lines_.push_back(std::move(line));
      }
      if (lines_.size() > kMaxBufferedLines) {
        const size_t excess = lines_.size() - kMaxBufferedLines;
        lines_.erase(lines_.begin(), lines_.begin() + excess);
        dropped_ += static_cast<int64_t>(excess);
      }
    }
    chunk_.Clear();
    StartRead(&chunk_);
  }

  void OnDone(const grpc::Status& status) override {
    std::shared_ptr<Upstream> keep = std::move(self_);
    absl::MutexLock lock(&mu_);
    if (status_.has_value()) return;  // ended for silence, then cancelled
    if (status.ok() || status.error_code() == grpc::StatusCode::CANCELLED) {
      status_ = status;
    } else {
      status_ = grpc::Status(
          status.error_code(),
          absl::StrCat("the log of ", task_, " at ", connection_.address(),
                       ": ", status.error_message()));
    }
  }

 private:
  Upstream(std::string task, const std::string& address,
           const rpc::Security& security, v1::ReadLogRequest request,
           int64_t clock_offset_ms)
      : task_(std::move(task)),
        clock_offset_ms_(clock_offset_ms),
        connection_(address, security),
        stub_(v1::Logs::NewStub(connection_.channel())),
        // A follower has no deadline: it ends when the relay cancels it, or
        // when the task falls silent (Ended).
        context_(connection_.NewContext(
            request.follow() ? absl::InfiniteDuration() : absl::Seconds(30))),
        request_(std::move(request)) {}

  const std::string task_;
  // The task's clock minus the coordinator's: lines are relayed on the
  // coordinator's clock, so that lines of several hosts interleave right.
  const int64_t clock_offset_ms_;
  const rpc::Connection connection_;
  const std::unique_ptr<v1::Logs::Stub> stub_;
  const std::unique_ptr<grpc::ClientContext> context_;
  const v1::ReadLogRequest request_;
  v1::LogChunk chunk_;              // the read in flight
  std::shared_ptr<Upstream> self_;  // until OnDone
  absl::Mutex mu_;
  std::vector<v1::LogLine> lines_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<grpc::Status> status_ ABSL_GUARDED_BY(mu_);
  // When the last chunk came (a steady clock: a step of the wall clock is
  // no silence), and whether the task promised keepalives.
  std::chrono::steady_clock::time_point last_heard_ ABSL_GUARDED_BY(mu_) =
      std::chrono::steady_clock::now();
  bool keeps_alive_ ABSL_GUARDED_BY(mu_) = false;
};

class RemoteLogSource final : public LogSource {
 public:
  RemoteLogSource(std::string task, const std::string& address,
                  const rpc::Security& security,
                  const v1::ReadLogRequest& request, int64_t clock_offset_ms)
      : task_(task),
        upstream_(Upstream::Start(std::move(task), address, security, request,
                                  clock_offset_ms)) {}
  ~RemoteLogSource() override { upstream_->Cancel(); }

  void Take(std::vector<v1::LogLine>* out, int64_t* dropped) override {
    upstream_->Take(out, dropped);
  }
  std::optional<grpc::Status> Ended() override { return upstream_->Ended(); }
  const std::string& task() const override { return task_; }

 private:
  const std::string task_;
  const std::shared_ptr<Upstream> upstream_;
};

}  // namespace

absl::StatusOr<LogRelayPlan> PlanLogRelay(const v1::StreamLogsRequest& request,
                                          const ClusterManager& cluster,
                                          const JobManager& jobs,
                                          const LogBuffer* own_log,
                                          const rpc::Security& security) {
  if (request.tail_lines() < 0) {
    return absl::InvalidArgumentError("tail_lines must not be negative");
  }
  v1::ReadLogRequest read;
  read.set_tail_lines(request.tail_lines());
  read.set_follow(request.follow());
  LogRelayPlan plan;
  plan.follow = request.follow();
  const std::string& target = request.target();
  if (target == "coordinator") {
    plan.sources.push_back(std::make_unique<LocalLogSource>(own_log, read));
    return plan;
  }
  std::vector<TaskId> tasks;
  absl::StatusOr<v1::JobStatus> job = jobs.Get(target);
  if (absl::StatusOr<TaskId> task = ParseTaskId(target);
      task.ok() && cluster.spec().address(*task).ok()) {
    tasks.push_back(*task);
  } else if (job.ok()) {
    tasks = JobTasks(*job, cluster.spec(), /*with_ps=*/true);
    read.set_since_unix_ms(job->submit_time_unix_ms());
    plan.job_ended = [&jobs, id = target] {
      absl::StatusOr<v1::JobStatus> now = jobs.Get(id);
      return !now.ok() || IsTerminal(now->state());
    };
  } else if (int64_t id = 0; absl::SimpleAtoi(target, &id)) {
    return job.status();  // no such job, or one dropped from the table
  } else {
    return absl::NotFoundError(absl::StrCat(
        "no task or job \"", target,
        "\" (give a task of the cluster spec such as worker:0, a job id "
        "such as 3, or coordinator)"));
  }
  // A job's lines are those each task logged since the submission, on the
  // task's own clock: hosts' clocks differ.
  std::map<TaskId, int64_t> offsets;
  for (const v1::TaskStatus& status : cluster.Snapshot(SteadyNow())) {
    offsets[TaskId{status.task().type(), status.task().index()}] =
        status.clock_offset_ms();
  }
  const int64_t since = read.since_unix_ms();
  for (const TaskId& task : tasks) {
    const std::string address = *cluster.spec().address(task);
    const int64_t offset = offsets[task];
    if (since > 0) read.set_since_unix_ms(since + offset);
    plan.sources.push_back(std::make_unique<RemoteLogSource>(
        task.ToString(), address, security, read, offset));
  }
  return plan;
}

LogRelay::LogRelay(rpc::StreamPump* pump, LogRelayPlan plan)
    : PumpedWriter(pump),
      plan_(std::move(plan)),
      reported_(plan_.sources.size(), false) {}

LogRelay::Step LogRelay::Next() {
  const absl::Time now = absl::Now();
  const size_t before = pending_.size();
  bool all_ended = true;
  const bool room = pending_.size() < kMaxPendingLines;
  for (size_t i = 0; i < plan_.sources.size(); ++i) {
    LogSource& source = *plan_.sources[i];
    if (!room) {
      all_ended = false;  // what it still holds is not taken yet
      continue;
    }
    source.Take(&pending_, &dropped_);
    std::optional<grpc::Status> ended = source.Ended();
    if (!ended.has_value()) {
      all_ended = false;
      continue;
    }
    if (ended->ok() || reported_[i]) continue;
    reported_[i] = true;
    if (plan_.sources.size() == 1) {
      final_ = *ended;
    } else {
      // One task of a job out of reach: say so in the stream, go on.
      v1::LogLine note;
      note.set_task(source.task());
      note.set_time_unix_ms(absl::ToUnixMillis(now));
      note.set_text(
          absl::StrCat("(log unavailable: ", ended->error_message(), ")"));
      pending_.push_back(std::move(note));
    }
  }
  if (plan_.sources.size() > 1 && pending_.size() > before) {
    std::stable_sort(pending_.begin() + before, pending_.end(),
                     [](const v1::LogLine& a, const v1::LogLine& b) {
                       return a.time_unix_ms() < b.time_unix_ms();
                     });
  }
  if (plan_.job_ended && !job_ended_at_.has_value() && plan_.job_ended()) {
    job_ended_at_ = now;
  }
  // Without follow, every source ends once caught up.
  const bool done = all_ended || (plan_.follow && job_ended_at_.has_value() &&
                                  now - *job_ended_at_ >= kJobEndGrace);

  Step step;
  if (!pending_.empty() || dropped_ > 0) {
    v1::LogChunk chunk;
    const size_t n =
        std::min(pending_.size(), static_cast<size_t>(rpc::kLogLinesPerChunk));
    for (size_t i = 0; i < n; ++i) {
      *chunk.add_lines() = std::move(pending_[i]);
    }
    pending_.erase(pending_.begin(), pending_.begin() + n);
    chunk.set_dropped(dropped_);
    dropped_ = 0;
    step.message = std::move(chunk);
    last_sent_ = now;
  } else if (now - last_sent_ >= rpc::kStreamKeepalive) {
    // Nothing new: an empty chunk tells the reader the relay is alive, also
    // while a read without follow waits (up to 30 s) for a task that does
    // not answer.
    step.message = v1::LogChunk();
    last_sent_ = now;
  }
  if (done && pending_.empty()) step.finish = final_.value_or(grpc::Status::OK);
  return step;
}

}  // namespace cohort::coordinator
