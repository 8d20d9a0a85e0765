#pragma once

// Finds the compute devices an agent runs replicas on: every CUDA GPU the
// runtime sees when built with CUDA and a device is present, otherwise
// `cpu_devices` CPU devices.

#include <string>
#include <vector>

#include "cohort/v1/cluster.pb.h"

namespace cohort::agent {

struct DiscoveredDevices {
  std::vector<v1::Device> devices;
  std::string note;  // why these devices, for the log
};

DiscoveredDevices DiscoverDevices(int cpu_devices);

// Build features worth reporting: "cuda 13.0", "nccl 2.27.3".
std::vector<std::string> BuildFeatures();

}  // namespace cohort::agent
