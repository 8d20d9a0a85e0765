#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "worker_agent/cuda_probe.h"

#ifdef COHORT_HAVE_NCCL
#include <nccl.h>
#endif

namespace cohort::agent {
namespace {

// As nvidia-smi prints it: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
std::string GpuUuid(const cudaUUID_t& uuid) {
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    absl::StrAppend(&out, absl::Hex(static_cast<uint8_t>(uuid.bytes[i]),
                                    absl::kZeroPad2));
  }
  return out;
}

CudaProbe Probe() {
  CudaProbe probe;
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
    probe.runtime_version =
        absl::StrCat(runtime / 1000, ".", (runtime % 1000) / 10);
  }
#ifdef COHORT_HAVE_NCCL
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess) {
    // NCCL >= 2.9 encodes MAJOR*10000 + MINOR*100 + PATCH.
    probe.nccl_version =
        absl::StrCat(nccl / 10000, ".", (nccl % 10000) / 100, ".", nccl % 100);
  }
#endif
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    // Without a GPU there is usually no driver either, which the runtime
    // reports as a version mismatch.
    probe.note =
        error == cudaErrorInsufficientDriver
            ? "no CUDA device: no NVIDIA driver, or one older than this "
              "build's CUDA runtime"
            : absl::StrCat("no CUDA device: ", cudaGetErrorString(error));
    return probe;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp props;
    if (cudaGetDeviceProperties(&props, i) != cudaSuccess) continue;
    v1::Device device;
    device.set_kind(v1::Device::CUDA);
    device.set_index(i);
    device.set_name(props.name);
    device.set_memory_bytes(static_cast<int64_t>(props.totalGlobalMem));
    char bus_id[32] = {};
    if (cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), i) == cudaSuccess) {
      device.set_pci_bus_id(bus_id);
    }
    device.set_uuid(GpuUuid(props.uuid));
    probe.devices.push_back(std::move(device));
  }
  if (probe.devices.empty()) probe.note = "no CUDA device present";
  return probe;
}

}  // namespace

CudaProbe ProbeCuda() {
  static const CudaProbe* const probe = new CudaProbe(Probe());
  return *probe;
}

}  // namespace cohort::agent
