#pragma once

// A replica's logical devices (TPUStrategy's model parallelism inside a
// replica): the devices of its agent that it spans, device 0 being the
// replica's own. Work placed on device k > 0 runs on that device's own
// executor thread, with the device current there on CUDA; device 0's runs
// on the calling (replica) thread. Scratch tensors the step allocates on a
// device live as long as this.
//
// Used from its replica's thread only.

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/step.h"
#include "common/executor.h"
#include "worker_agent/device_memory.h"

namespace cohort::agent {

class LogicalDevices {
 public:
  // `devices` is not empty; devices[0] is the replica's device.
  explicit LogicalDevices(std::vector<Device> devices);
  ~LogicalDevices();

  int count() const { return static_cast<int>(devices_.size()); }
  // OUT_OF_RANGE naming `k` and the count.
  absl::Status Check(int k) const;
  // Check() for the device of a variable being created, naming it.
  absl::Status CheckPlacement(const VariableOptions& options) const;
  // Device `k`, which Check() accepted.
  const Device& device(int k) const { return devices_[k]; }
  absl::StatusOr<Device> Get(int k) const;

  // Runs `fn` with device `k` and waits for it, and for the work it queued
  // on k's stream; fn's status.
  absl::Status RunOn(int k,
                     const std::function<absl::Status(const Device&)>& fn);
  // `count` zeroed elements on device `k`.
  absl::StatusOr<Tensor> Allocate(int k, size_t count, DType dtype);
  // Waits for the work queued on every device's stream.
  absl::Status SynchronizeAll() const;

 private:
  const std::vector<Device> devices_;
  std::vector<std::unique_ptr<Executor>> executors_;  // [k]; made on use
  std::vector<DeviceBuffer> scratch_;
};

}  // namespace cohort::agent
