#include "worker_agent/cuda_probe.h"

namespace cohort::agent {

CudaProbe ProbeCuda() {
  CudaProbe probe;
  probe.note = "built without CUDA";
  return probe;
}

}  // namespace cohort::agent
