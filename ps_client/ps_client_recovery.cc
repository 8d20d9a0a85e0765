// PsClient's recovery: how a call to a ps task that went away is retried
// until the task is back (restored from its snapshot, or empty and given
// the job's variables again), or fails naming it after the recovery
// timeout. The data path is in ps_client.cc.

#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "ps_client/ps_client.h"
#include "ps_client/ps_client_shard.h"
#include "spdlog/spdlog.h"

namespace cohort::ps {
namespace {

// "60s", "0.5s": how the recovery message states the timeout.
std::string Seconds(absl::Duration d) {
  return absl::StrFormat("%gs", absl::ToDoubleSeconds(d));
}

// The shard did not know the variables: restarted without a snapshot, or
// never told. (Another job's shard is PERMISSION_DENIED.)
bool IsMissingVariables(const absl::Status& s) {
  return s.code() == absl::StatusCode::kNotFound;
}

}  // namespace

bool PsClient::Retryable(Shard& shard, const absl::Status& status) const {
  if (status.code() == absl::StatusCode::kUnavailable) return true;
  // A deadline that passed before the channel ever connected is a shard
  // that is not there (yet), not a slow one.
  return status.code() == absl::StatusCode::kDeadlineExceeded &&
         shard.connection.channel()->GetState(false) != GRPC_CHANNEL_READY;
}

absl::Status PsClient::Named(const Shard& shard, const absl::Status& status) {
  const std::string prefix = absl::StrCat("ps:", shard.id);
  if (status.ok() || absl::StartsWith(status.message(), prefix)) return status;
  return absl::Status(status.code(),
                      absl::StrCat(prefix, ": ", status.message()));
}

absl::Status PsClient::RunWithRecovery(
    Shard& shard, Op op, const CreateBatches& create,
    const std::function<absl::Status(uint64_t incarnation, bool* restarted)>&
        attempt) {
  uint64_t sent_to = incarnation(shard.id);
  if (op == Op::kPush && sent_to == 0) {
    // A push carries the incarnation it is meant for, and 0 matches any: one
    // that failed could not tell whether it was applied, and would be sent
    // again to the shard that applied it. Learn the incarnation first.
    COHORT_RETURN_IF_ERROR(CreateWithRetry(shard, create));
    sent_to = incarnation(shard.id);
  }
  bool recreated = false;
  std::optional<absl::Time> deadline;  // set by the first unavailability
  // Bounded: every pass either returns, or has waited for the shard (within
  // the deadline fixed at the first failure), or is the one retry after
  // recreating missing variables.
  for (;;) {
    bool restarted = false;
    const absl::Status status = attempt(sent_to, &restarted);
    if (status.ok()) {
      if (restarted) RecreateAfterRestart(shard, create);
      return status;
    }
    if (status.code() == absl::StatusCode::kCancelled) {
      return Named(shard, status);
    }
    // A push refused as meant for another incarnation: the shard restarted
    // unseen and applied none of it. Either way the shard is told the
    // variables (the create shows its incarnation too), and the call is
    // sent again if the shard is another incarnation than it was sent to.
    const bool other_incarnation =
        op == Op::kPush && status.code() == absl::StatusCode::kAborted;
    if ((IsMissingVariables(status) || other_incarnation) && !recreated) {
      recreated = true;
      const absl::Status again = CreateWithRetry(shard, create);
      if (!again.ok()) {
        return Named(shard, absl::Status(status.code(),
                                         absl::StrCat(status.message(),
                                                      "; recreating the "
                                                      "variables failed too: ",
                                                      again.message())));
      }
      const uint64_t now = incarnation(shard.id);
      if (now == sent_to) return Named(shard, status);
      sent_to = now;
      continue;
    }
    if (!Retryable(shard, status)) return Named(shard, status);
    if (!deadline.has_value()) {
      deadline = absl::Now() + options_.recovery_timeout;
    }
    COHORT_RETURN_IF_ERROR(AwaitShard(shard, create, *deadline, status));
    if (op == Op::kPush) {
      const uint64_t now = incarnation(shard.id);
      if (now == sent_to) {
        return Named(
            shard,
            absl::UnavailableError(absl::StrCat(
                "push failed (", status.message(),
                ") and the shard answers again as the same incarnation: it "
                "may or may not have applied the push, so it is not re-sent")));
      }
      sent_to = now;  // the restarted shard's snapshot predates the push
    }
  }
}

absl::Status PsClient::CreateWithRetry(Shard& shard,
                                       const CreateBatches& request) {
  const absl::Status status = CreateAll(shard, request, options_.rpc_timeout);
  if (status.ok() || !Retryable(shard, status)) return Named(shard, status);
  return AwaitShard(shard, request, absl::Now() + options_.recovery_timeout,
                    status);
}

absl::Status PsClient::AwaitShard(Shard& shard, const CreateBatches& request,
                                  absl::Time deadline,
                                  absl::Status last_error) {
  absl::Duration backoff = options_.initial_backoff;
  for (;;) {
    COHORT_RETURN_IF_ERROR(Stopped());
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::UnavailableError(absl::StrCat(
          "ps:", shard.id, " at ", shard.connection.address(),
          " did not come back within ", Seconds(options_.recovery_timeout),
          ": ", last_error.message()));
    }
    // Wait for a connection, one window at a time so that Shutdown() is
    // seen. Waiting here is also what drives the reconnection: a call that
    // fails fast leaves no thread polling the connection attempt, which then
    // completes only when gRPC's backup poller (every 5 s) looks at it.
    const absl::Duration window = std::min(left, options_.max_backoff);
    if (!shard.connection.channel()->WaitForConnected(
            absl::ToChronoTime(absl::Now() + window))) {
      continue;
    }
    const absl::Status status = CreateAll(shard, request, options_.rpc_timeout);
    if (status.ok()) return status;
    if (!Retryable(shard, status)) return Named(shard, status);
    last_error = status;
    // Connected, yet refused as unavailable (a shard shutting down, say).
    COHORT_RETURN_IF_ERROR(Backoff(std::min(backoff, deadline - absl::Now())));
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

absl::Status PsClient::Backoff(absl::Duration delay) {
  mu_.LockWhenWithTimeout(absl::Condition(&stopping_), delay);
  const bool stopping = stopping_;
  mu_.Unlock();
  if (stopping) return absl::CancelledError("ps client shut down");
  return absl::OkStatus();
}

absl::StatusOr<bool> PsClient::Observe(Shard& shard,
                                       const v1::PsShardState& state,
                                       uint64_t call, bool acknowledged) {
  if (state.shard_id() != shard.id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the ps task at ", shard.connection.address(), " says it is shard ",
        state.shard_id(), "; this client expects shard ", shard.id,
        " there (are the ps addresses in task index order?)"));
  }
  PsRecoveryEvent event;
  {
    absl::MutexLock lock(&shard.mu);
    const uint64_t old_incarnation = shard.incarnations.current();
    switch (shard.incarnations.Answer(state.incarnation(), call)) {
      case IncarnationTracker::Verdict::kLate:
        return false;
      case IncarnationTracker::Verdict::kCurrent:
        if (acknowledged) {
          shard.updates_seen = std::max(shard.updates_seen, state.updates());
        }
        return false;
      case IncarnationTracker::Verdict::kNew:
        break;
    }
    event =
        PsRecoveryEvent{.shard = shard.id,
                        .old_incarnation = old_incarnation,
                        .new_incarnation = state.incarnation(),
                        .updates_seen = shard.updates_seen,
                        .restored_updates = state.restored_updates(),
                        .lost = std::max<int64_t>(
                            0, shard.updates_seen - state.restored_updates())};
    shard.updates_seen =
        acknowledged ? state.updates() : state.restored_updates();
  }
  spdlog::warn(
      "ps:{} at {} restarted (incarnation {} -> {}): its snapshot restored "
      "{} updates, {} of the {} this worker had seen are lost",
      shard.id, shard.connection.address(), event.old_incarnation,
      event.new_incarnation, event.restored_updates, event.lost,
      event.updates_seen);
  absl::MutexLock lock(&mu_);
  events_.push_back(event);
  return true;
}

void PsClient::RecreateAfterRestart(Shard& shard, const CreateBatches& create) {
  // The call that saw the restart succeeded, so the shard holds what it
  // needed; this restores the rest of this client's variables, in case the
  // snapshot predates some. Best effort: a variable still missing is
  // recreated when a call meets it (NOT_FOUND).
  const absl::Status status = CreateWithRetry(shard, create);
  if (!status.ok()) {
    spdlog::warn("recreating the variables on ps:{} after its restart: {}",
                 shard.id, status.ToString());
  }
}

}  // namespace cohort::ps
