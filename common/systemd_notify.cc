#include "common/systemd_notify.h"

#include <systemd/sd-daemon.h>

#include "absl/strings/str_cat.h"

namespace cohort {

void NotifyReady(absl::string_view status) {
  sd_notify(0, absl::StrCat("READY=1\nSTATUS=", status).c_str());
}

void NotifyStatus(absl::string_view status) {
  sd_notify(0, absl::StrCat("STATUS=", status).c_str());
}

void NotifyStopping() { sd_notify(0, "STOPPING=1"); }

}  // namespace cohort
