#include "worker_agent/group_keepalive.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "spdlog/spdlog.h"

namespace cohort::agent {

namespace {

// What each rank contributes to a round; the group acts on the largest. A
// rank whose work is overdue contributes kOverdue plus its rank.
enum Round : int64_t { kDone = 0, kBusy = 1, kOverdue = 2 };

// The rounds, until the group's work has ended (OK), a collective fails, or
// some rank's work is overdue.
absl::Status Rounds(const absl::Notification* done,
                    const std::function<absl::Status(int64_t*)>& all_reduce_max,
                    const KeepAliveOptions& options) {
  const absl::Time start = absl::Now();
  absl::Time next_report = start + options.report_every;
  while (true) {
    int64_t round = kDone;
    if (done != nullptr &&
        !done->WaitForNotificationWithTimeout(options.interval)) {
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
    if (round == kDone) return absl::OkStatus();
    if (round >= kOverdue) {
      return absl::DeadlineExceededError(
          absl::StrCat(options.what, " took longer than ",
                       absl::FormatDuration(options.limit), " on replica ",
                       round - kOverdue));
    }
  }
}

}  // namespace

absl::Status KeepGroupAliveDuring(
    std::function<absl::Status()> work,
    const std::function<absl::Status(int64_t*)>& all_reduce_max,
    const KeepAliveOptions& options) {
  if (!work) return Rounds(nullptr, all_reduce_max, options);
  absl::Notification done;
  absl::Status status;
  std::thread worker([&] {
    status = work();
    done.Notify();
  });
  absl::Status group = Rounds(&done, all_reduce_max, options);
  if (!done.HasBeenNotified()) {
    spdlog::info("{}: waiting for it to end ({})", options.what,
                 group.ToString());
  }
  worker.join();
  return group.ok() ? status : group;
}

}  // namespace cohort::agent
