#include "worker_agent/logical_devices.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "worker_agent/user_code.h"

namespace cohort::agent {

LogicalDevices::LogicalDevices(std::vector<Device> devices)
    : devices_(std::move(devices)), executors_(devices_.size()) {}

// Each executor's destructor joins its thread; nothing runs on it then, as
// RunOn waits for what it posts.
LogicalDevices::~LogicalDevices() = default;

absl::Status LogicalDevices::Check(int k) const {
  if (k >= 0 && k < count()) return absl::OkStatus();
  return absl::OutOfRangeError(absl::StrCat(
      "logical device ", k, " is out of range: this replica has ", count(),
      count() == 1 ? " logical device (0)"
                   : absl::StrCat(" logical devices (0..", count() - 1, ")"),
      "; JobSpec.logical_devices_per_replica sets how many"));
}

absl::Status LogicalDevices::CheckPlacement(
    const VariableOptions& options) const {
  absl::Status valid = Check(options.logical_device);
  if (valid.ok()) return valid;
  return absl::Status(valid.code(),
                      absl::StrCat("create_variable \"", options.name,
                                   "\": ", valid.message()));
}

absl::StatusOr<Device> LogicalDevices::Get(int k) const {
  if (absl::Status valid = Check(k); !valid.ok()) return valid;
  return devices_[k];
}

absl::Status LogicalDevices::RunOn(
    int k, const std::function<absl::Status(const Device&)>& fn) {
  if (absl::Status valid = Check(k); !valid.ok()) return valid;
  const Device& device = devices_[k];
  if (k == 0) return fn(device);
  if (executors_[k] == nullptr) {
    executors_[k] =
        std::make_unique<Executor>(1, absl::StrCat("logical-device-", k));
  }
  absl::Status status;
  absl::Notification done;
  executors_[k]->Post([&] {
    status = MakeCurrent(device);
    // This thread runs the library's code: an exception must not end it.
    if (status.ok()) status = CallUserCode([&] { return fn(device); });
    // What fn queued on k's stream is done before the caller reads it on
    // device 0 (a gradient all-reduced there, say).
    if (status.ok()) status = Synchronize(device);
    done.Notify();
  });
  // No deadline of its own: this is the step's work, which has none either;
  // a collective inside it keeps its own.
  done.WaitForNotification();
  return status;
}

absl::StatusOr<Tensor> LogicalDevices::Allocate(int k, size_t count,
                                                DType dtype) {
  if (absl::Status valid = Check(k); !valid.ok()) return valid;
  const size_t bytes = count * DTypeSize(dtype);
  absl::StatusOr<DeviceBuffer> buffer =
      DeviceBuffer::Allocate(devices_[k], bytes);
  if (!buffer.ok()) return buffer.status();
  const std::vector<char> zeros(bytes, 0);
  if (absl::Status zeroed =
          CopyToDevice(devices_[k], buffer->data(), zeros.data(), bytes);
      !zeroed.ok()) {
    return zeroed;
  }
  scratch_.push_back(*std::move(buffer));
  return Tensor{scratch_.back().data(), count, dtype};
}

absl::Status LogicalDevices::SynchronizeAll() const {
  for (const Device& device : devices_) {
    if (absl::Status synced = Synchronize(device); !synced.ok()) return synced;
  }
  return absl::OkStatus();
}

}  // namespace cohort::agent
