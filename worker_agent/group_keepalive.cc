#include "worker_agent/group_keepalive.h"

#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "spdlog/spdlog.h"

namespace cohort::agent {

namespace {

// What each rank contributes to a round; the group acts on the largest. A
// rank whose work is overdue contributes kOverdue plus its rank.
enum Round : int64_t { kDone = 0, kBusy = 1, kOverdue = 2 };

// Shared with the work's thread, which may outlive the call.
struct Outcome {
  absl::Notification done;
  absl::Status status;  // written before `done` is notified
};

}  // namespace

absl::Status KeepGroupAliveDuring(
    std::function<absl::Status()> work,
    const std::function<absl::Status(int64_t*)>& all_reduce_max,
    const KeepAliveOptions& options) {
  std::shared_ptr<Outcome> outcome;
  if (work) {
    outcome = std::make_shared<Outcome>();
    std::thread([outcome, work = std::move(work)] {
      outcome->status = work();
      outcome->done.Notify();
    }).detach();
  }
  const absl::Time start = absl::Now();
  absl::Time next_report = start + options.report_every;
  while (true) {
    int64_t round = kDone;
    if (outcome != nullptr &&
        !outcome->done.WaitForNotificationWithTimeout(options.interval)) {
      const absl::Time now = absl::Now();
      round = now - start > options.limit ? kOverdue + options.rank : kBusy;
      if (now >= next_report) {
        spdlog::info(
            "{}: still going after {}", options.what,
            absl::FormatDuration(absl::Trunc(now - start, absl::Seconds(1))));
        next_report = now + options.report_every;
      }
    }
    if (absl::Status reduced = all_reduce_max(&round); !reduced.ok()) {
      return reduced;
    }
    if (round == kDone) break;
    if (round >= kOverdue) {
      return absl::DeadlineExceededError(
          absl::StrCat(options.what, " took longer than ",
                       absl::FormatDuration(options.limit), " on replica ",
                       round - kOverdue));
    }
  }
  return outcome != nullptr ? outcome->status : absl::OkStatus();
}

}  // namespace cohort::agent
