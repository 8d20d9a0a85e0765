// CUDA kernels of the optimizer updates (optimizer_kernels.h). Built by nvcc
// as C++17, so this file sees neither Abseil nor step.h: optimizer_kernels.cc
// declares the two functions below with the same plain signatures and turns
// their cudaError_t into an absl::Status.
//
// Arithmetic goes through the round-to-nearest intrinsics, which nvcc never
// fuses into multiply-adds: each operation rounds exactly as the host's
// does, so CPU and GPU replicas of one job stay bitwise equal.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

namespace cohort::agent {
namespace {

// OptimizerKind's values (step.h).
constexpr int kSgd = 0;
constexpr int kMomentum = 1;
constexpr int kAdam = 2;

constexpr int kThreads = 256;
// Enough blocks to fill the largest GPUs; a grid-stride loop does the rest.
constexpr size_t kMaxBlocks = 4096;

__device__ inline float Add(float a, float b) { return __fadd_rn(a, b); }
__device__ inline float Sub(float a, float b) { return __fsub_rn(a, b); }
__device__ inline float Mul(float a, float b) { return __fmul_rn(a, b); }
__device__ inline float Div(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline float Sqrt(float a) { return __fsqrt_rn(a); }
__device__ inline double Add(double a, double b) { return __dadd_rn(a, b); }
__device__ inline double Sub(double a, double b) { return __dsub_rn(a, b); }
__device__ inline double Mul(double a, double b) { return __dmul_rn(a, b); }
__device__ inline double Div(double a, double b) { return __ddiv_rn(a, b); }
__device__ inline double Sqrt(double a) { return __dsqrt_rn(a); }

template <typename T>
struct Args {
  T* var;
  const T* grad;
  T* m;
  T* v;
  size_t count;
  T lr, momentum, beta1, beta2, epsilon, lr_t;
  bool nesterov;
};

template <typename T>
__global__ void SgdKernel(Args<T> a) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < a.count;
       i += stride) {
    a.var[i] = Sub(a.var[i], Mul(a.lr, a.grad[i]));
  }
}

template <typename T>
__global__ void MomentumKernel(Args<T> a) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < a.count;
       i += stride) {
    const T lr_g = Mul(a.lr, a.grad[i]);
    const T m = Sub(Mul(a.momentum, a.m[i]), lr_g);
    a.m[i] = m;
    a.var[i] = Add(a.var[i], a.nesterov ? Sub(Mul(a.momentum, m), lr_g) : m);
  }
}

template <typename T>
__global__ void AdamKernel(Args<T> a) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  const T one_minus_beta1 = Sub(T(1), a.beta1);
  const T one_minus_beta2 = Sub(T(1), a.beta2);
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < a.count;
       i += stride) {
    const T g = a.grad[i];
    const T m = Add(Mul(a.beta1, a.m[i]), Mul(one_minus_beta1, g));
    const T v = Add(Mul(a.beta2, a.v[i]), Mul(Mul(one_minus_beta2, g), g));
    a.m[i] = m;
    a.v[i] = v;
    a.var[i] = Sub(a.var[i], Div(Mul(a.lr_t, m), Add(Sqrt(v), a.epsilon)));
  }
}

template <typename T>
int Launch(int kind, const Args<T>& args, cudaStream_t stream) {
  const size_t blocks =
      std::min((args.count + kThreads - 1) / kThreads, kMaxBlocks);
  const dim3 grid(static_cast<unsigned>(blocks));
  switch (kind) {
    case kSgd:
      SgdKernel<T><<<grid, kThreads, 0, stream>>>(args);
      break;
    case kMomentum:
      MomentumKernel<T><<<grid, kThreads, 0, stream>>>(args);
      break;
    case kAdam:
      AdamKernel<T><<<grid, kThreads, 0, stream>>>(args);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename T>
Args<T> MakeArgs(bool nesterov, void* var, const void* grad, void* slot0,
                 void* slot1, size_t count, double lr, double momentum,
                 double beta1, double beta2, double epsilon, double lr_t) {
  return Args<T>{static_cast<T*>(var),
                 static_cast<const T*>(grad),
                 static_cast<T*>(slot0),
                 static_cast<T*>(slot1),
                 count,
                 static_cast<T>(lr),
                 static_cast<T>(momentum),
                 static_cast<T>(beta1),
                 static_cast<T>(beta2),
                 static_cast<T>(epsilon),
                 static_cast<T>(lr_t),
                 nesterov};
}

}  // namespace

int LaunchOptimizerUpdate(int kind, bool nesterov, bool f64, void* var,
                          const void* grad, void* slot0, void* slot1,
                          size_t count, double lr, double momentum,
                          double beta1, double beta2, double epsilon,
                          double lr_t, void* stream) {
  if (count == 0) return cudaSuccess;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (f64) {
    return Launch(kind,
                  MakeArgs<double>(nesterov, var, grad, slot0, slot1, count, lr,
                                   momentum, beta1, beta2, epsilon, lr_t),
                  s);
  }
  return Launch(kind,
                MakeArgs<float>(nesterov, var, grad, slot0, slot1, count, lr,
                                momentum, beta1, beta2, epsilon, lr_t),
                s);
}

const char* CudaErrorName(int error) {
  return cudaGetErrorString(static_cast<cudaError_t>(error));
}

}  // namespace cohort::agent
