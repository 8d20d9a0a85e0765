#pragma once

// Readiness reporting to systemd (Type=notify units). Each call is a no-op
// when the process was not started by systemd (NOTIFY_SOCKET unset).

#include "absl/strings/string_view.h"

namespace cohort {

void NotifyReady(absl::string_view status);
void NotifyStatus(absl::string_view status);
void NotifyStopping();

}  // namespace cohort
