#pragma once

// The one place the agent asks the CUDA runtime (and NCCL) what is there.
// Built from cuda_probe_cuda.cc with CUDA, from cuda_probe_none.cc without.

#include <string>
#include <vector>

#include "cohort/v1/cluster.pb.h"

namespace cohort::agent {

struct CudaProbe {
  std::vector<v1::Device> devices;  // empty without CUDA or without a GPU
  std::string runtime_version;      // "13.0"; empty when not built with CUDA
  std::string nccl_version;         // "2.27.3"; empty when not built with NCCL
  std::string note;                 // why there are no devices, if none
};

// Thread-safe; cheap after the first call.
CudaProbe ProbeCuda();

}  // namespace cohort::agent
