#include "common/systemd_notify.h"

#include <systemd/sd-daemon.h>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace cohort {

void NotifyReady(absl::string_view status) {
  sd_notify(0, absl::StrCat("READY=1\nSTATUS=", status).c_str());
}

void NotifyStatus(absl::string_view status) {
  sd_notify(0, absl::StrCat("STATUS=", status).c_str());
}

void NotifyStopping() { sd_notify(0, "STOPPING=1"); }

std::unique_ptr<SystemdWatchdog> SystemdWatchdog::Start(
    std::function<bool(absl::Duration)> alive) {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(/*unset_environment=*/0, &usec) <= 0 || usec == 0) {
    return nullptr;
  }
  return std::unique_ptr<SystemdWatchdog>(
      new SystemdWatchdog(absl::Microseconds(usec), std::move(alive)));
}

SystemdWatchdog::SystemdWatchdog(absl::Duration interval,
                                 std::function<bool(absl::Duration)> alive)
    : interval_(interval), alive_(std::move(alive)) {
  spdlog::info("feeding the systemd watchdog (WatchdogSec={})",
               absl::FormatDuration(interval_));
  thread_ = std::thread([this] { Loop(); });
}

SystemdWatchdog::~SystemdWatchdog() {
  stop_.Notify();
  thread_.join();
}

void SystemdWatchdog::Loop() {
  // A third of the interval: one late or failed check is not yet fatal.
  const absl::Duration period = interval_ / 3;
  bool was_alive = true;
  do {
    const bool alive = alive_(interval_ / 4);
    if (alive) sd_notify(0, "WATCHDOG=1");
    if (alive != was_alive) {
      if (alive) {
        spdlog::info("answering again; feeding the systemd watchdog");
      } else {
        spdlog::error(
            "this daemon's own server does not answer; no longer feeding "
            "the systemd watchdog, which restarts it after {}",
            absl::FormatDuration(interval_));
      }
    }
    was_alive = alive;
  } while (!stop_.WaitForNotificationWithTimeout(period));
}

}  // namespace cohort
