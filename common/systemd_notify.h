#pragma once

// Readiness and liveness reporting to systemd (Type=notify units with
// WatchdogSec=). Each call is a no-op when the process was not started by
// systemd (NOTIFY_SOCKET unset).

#include <functional>
#include <memory>
#include <thread>

#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace cohort {

void NotifyReady(absl::string_view status);
void NotifyStatus(absl::string_view status);
void NotifyStopping();

// Feeds systemd's watchdog: every third of WatchdogSec it asks `alive`,
// and sends WATCHDOG=1 only when it answers true, so that a daemon whose
// server stopped answering is killed and restarted by systemd. `alive` runs
// on the watchdog's own thread and is given the time it has to answer (a
// quarter of WatchdogSec).
// Stops on destruction.
class SystemdWatchdog {
 public:
  // Null when systemd asked for no watchdog (WATCHDOG_USEC unset, or set
  // for another pid).
  static std::unique_ptr<SystemdWatchdog> Start(
      std::function<bool(absl::Duration)> alive);
  ~SystemdWatchdog();

  absl::Duration interval() const { return interval_; }

 private:
  SystemdWatchdog(absl::Duration interval,
                  std::function<bool(absl::Duration)> alive);
  void Loop();

  const absl::Duration interval_;  // WatchdogSec
  const std::function<bool(absl::Duration)> alive_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace cohort
