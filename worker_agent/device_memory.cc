#include "worker_agent/device_memory.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

#ifdef COHORT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace cohort::agent {
namespace {

#ifdef COHORT_HAVE_CUDA
absl::Status CudaStatus(cudaError_t error, const char* what,
                        const Device& device) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " on cuda:", device.index, ": ",
                                          cudaGetErrorString(error)));
}

cudaStream_t StreamOf(const Device& device) {
  return static_cast<cudaStream_t>(device.stream);
}
#endif

[[maybe_unused]] absl::Status NoCuda() {
  return absl::FailedPreconditionError(
      "a CUDA device was assigned, but this agent was built without CUDA");
}

// With unified addressing CUDA tells host from device memory by the
// pointers: so copies also reach buffers in mapped host memory
// (AllocateShared).
absl::Status Copy(const Device& device, void* dst, const void* src,
                  size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (!device.is_cuda()) {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
#ifdef COHORT_HAVE_CUDA
  if (absl::Status set =
          CudaStatus(cudaSetDevice(device.index), "cudaSetDevice", device);
      !set.ok()) {
    return set;
  }
  if (absl::Status copy = CudaStatus(
          cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, StreamOf(device)),
          "cudaMemcpyAsync", device);
      !copy.ok()) {
    return copy;
  }
  return Synchronize(device);
#else
  return NoCuda();
#endif
}

}  // namespace

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(const Device& device,
                                                    size_t bytes) {
  DeviceBuffer buffer;
  buffer.device_ = device;
  buffer.bytes_ = bytes;
  const size_t size = bytes == 0 ? 1 : bytes;
  if (!device.is_cuda()) {
    buffer.data_ = std::calloc(1, size);
    if (buffer.data_ == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", bytes, " bytes of host memory"));
    }
    return buffer;
  }
#ifdef COHORT_HAVE_CUDA
  if (absl::Status set =
          CudaStatus(cudaSetDevice(device.index), "cudaSetDevice", device);
      !set.ok()) {
    return set;
  }
  void* data = nullptr;
  if (cudaError_t error = cudaMalloc(&data, size); error != cudaSuccess) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes on cuda:", device.index,
                     ": ", cudaGetErrorString(error)));
  }
  buffer.data_ = data;
  // On the replica's stream, and finished before anything is copied in:
  // a non-blocking stream does not wait for the legacy default stream.
  if (absl::Status zero =
          CudaStatus(cudaMemsetAsync(data, 0, size, StreamOf(device)),
                     "cudaMemset", device);
      !zero.ok()) {
    return zero;
  }
  if (absl::Status synced = Synchronize(device); !synced.ok()) return synced;
  return buffer;
#else
  return NoCuda();
#endif
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::AllocateShared(const Device& device,
                                                          size_t bytes) {
  if (!device.is_cuda()) return Allocate(device, bytes);
#ifdef COHORT_HAVE_CUDA
  DeviceBuffer buffer;
  buffer.device_ = device;
  buffer.bytes_ = bytes;
  buffer.host_mapped_ = true;
  void* data = nullptr;
  // Portable: mapped on every GPU, not only the current one.
  if (cudaError_t error =
          cudaHostAlloc(&data, bytes == 0 ? 1 : bytes,
                        cudaHostAllocMapped | cudaHostAllocPortable);
      error != cudaSuccess) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", bytes,
        " bytes of mapped host memory: ", cudaGetErrorString(error)));
  }
  std::memset(data, 0, bytes);
  buffer.data_ = data;
  return buffer;
#else
  return NoCuda();
#endif
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(other.device_),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      host_mapped_(std::exchange(other.host_mapped_, false)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    this->~DeviceBuffer();
    new (this) DeviceBuffer(std::move(other));
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ == nullptr) return;
  if (!device_.is_cuda()) {
    std::free(data_);
  } else {
#ifdef COHORT_HAVE_CUDA
    if (host_mapped_) {
      cudaFreeHost(data_);
    } else {
      cudaSetDevice(device_.index);
      cudaFree(data_);
    }
#endif
  }
  data_ = nullptr;
}

absl::Status CopyToDevice(const Device& device, void* device_dst,
                          const void* host_src, size_t bytes) {
  return Copy(device, device_dst, host_src, bytes);
}

absl::Status CopyToHost(const Device& device, void* host_dst,
                        const void* device_src, size_t bytes) {
  return Copy(device, host_dst, device_src, bytes);
}

absl::Status CopyOnDevice(const Device& device, void* dst, const void* src,
                          size_t bytes) {
  return Copy(device, dst, src, bytes);
}

absl::Status Synchronize(const Device& device) {
  if (!device.is_cuda()) return absl::OkStatus();
#ifdef COHORT_HAVE_CUDA
  return CudaStatus(cudaStreamSynchronize(StreamOf(device)),
                    "cudaStreamSynchronize", device);
#else
  return NoCuda();
#endif
}

absl::Status MakeCurrent(const Device& device) {
  if (!device.is_cuda()) return absl::OkStatus();
#ifdef COHORT_HAVE_CUDA
  return CudaStatus(cudaSetDevice(device.index), "cudaSetDevice", device);
#else
  return NoCuda();
#endif
}

absl::StatusOr<void*> CreateStream(int index) {
#ifdef COHORT_HAVE_CUDA
  Device device{.kind = Device::Kind::kCuda, .index = index};
  if (absl::Status set =
          CudaStatus(cudaSetDevice(index), "cudaSetDevice", device);
      !set.ok()) {
    return set;
  }
  cudaStream_t stream = nullptr;
  if (absl::Status created =
          CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                     "cudaStreamCreate", device);
      !created.ok()) {
    return created;
  }
  return static_cast<void*>(stream);
#else
  return NoCuda();
#endif
}

void DestroyStream([[maybe_unused]] int index, [[maybe_unused]] void* stream) {
#ifdef COHORT_HAVE_CUDA
  if (stream == nullptr) return;
  cudaSetDevice(index);
  cudaStreamDestroy(static_cast<cudaStream_t>(stream));
#endif
}

}  // namespace cohort::agent
