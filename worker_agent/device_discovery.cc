#include "worker_agent/device_discovery.h"

#include "absl/strings/str_cat.h"
#include "worker_agent/cuda_probe.h"

namespace cohort::agent {

DiscoveredDevices DiscoverDevices(int cpu_devices) {
  DiscoveredDevices found;
  CudaProbe probe = ProbeCuda();
  if (!probe.devices.empty()) {
    found.devices = std::move(probe.devices);
    found.note = absl::StrCat(found.devices.size(), " CUDA device(s)");
    return found;
  }
  for (int i = 0; i < cpu_devices; ++i) {
    v1::Device device;
    device.set_kind(v1::Device::CPU);
    device.set_index(i);
    device.set_name(absl::StrCat("cpu:", i));
    found.devices.push_back(std::move(device));
  }
  found.note = absl::StrCat(cpu_devices, " CPU device(s) (", probe.note, ")");
  return found;
}

std::vector<std::string> BuildFeatures() {
  std::vector<std::string> features;
  CudaProbe probe = ProbeCuda();
  if (!probe.runtime_version.empty()) {
    features.push_back(absl::StrCat("cuda ", probe.runtime_version));
  }
  if (!probe.nccl_version.empty()) {
    features.push_back(absl::StrCat("nccl ", probe.nccl_version));
  }
  return features;
}

}  // namespace cohort::agent
