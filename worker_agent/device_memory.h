#pragma once

// Memory and copies on a replica's device: plain host memory for CPU
// devices, CUDA memory and the replica's stream for GPUs. The one place of
// the runtime that knows the difference.

#include <cstddef>

#include "absl/status/statusor.h"
#include "cohort/step.h"

namespace cohort::agent {

// Owns `bytes` zeroed bytes on a device. Movable, not copyable; not
// thread-safe (one replica's).
class DeviceBuffer {
 public:
  static absl::StatusOr<DeviceBuffer> Allocate(const Device& device,
                                               size_t bytes);
  // Memory that kernels on every GPU of the host read and write directly:
  // pinned host memory mapped into each device's address space (plain host
  // memory for CPU devices). CentralStorage's one copy over several GPUs.
  static absl::StatusOr<DeviceBuffer> AllocateShared(const Device& device,
                                                     size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  Device device_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool host_mapped_ = false;  // from AllocateShared on a CUDA device
};

// Synchronous copies between host memory and the device's memory, ordered
// after the work already queued on the device's stream.
absl::Status CopyToDevice(const Device& device, void* device_dst,
                          const void* host_src, size_t bytes);
absl::Status CopyToHost(const Device& device, void* host_dst,
                        const void* device_src, size_t bytes);
absl::Status CopyOnDevice(const Device& device, void* dst, const void* src,
                          size_t bytes);
// Waits for the work queued on the device's stream (no-op on CPU).
absl::Status Synchronize(const Device& device);

// Makes `device` the calling thread's current CUDA device, so that
// allocations and launches there land on it (no-op on CPU).
absl::Status MakeCurrent(const Device& device);

// A new stream on CUDA device `index` (Device::stream), and its release.
absl::StatusOr<void*> CreateStream(int index);
void DestroyStream(int index, void* stream);

}  // namespace cohort::agent
