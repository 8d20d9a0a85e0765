#include "optimizer/optimizer_kernels.h"

#include "absl/strings/str_cat.h"
#include "optimizer/update_math.h"

namespace cohort::optimizer {

#ifdef COHORT_HAVE_CUDA
// Defined in optimizer_kernels.cu, which nvcc builds as C++17 without Abseil
// or step.h; plain arguments keep the two sides in step (a mismatch fails to
// link). `kind` is OptimizerKind's value. Returns a cudaError_t.
int LaunchOptimizerUpdate(int kind, const Coefficients<float>& c, void* var,
                          const void* grad, void* slot0, void* slot1,
                          size_t count, void* stream);
int LaunchOptimizerUpdate(int kind, const Coefficients<double>& c, void* var,
                          const void* grad, void* slot0, void* slot1,
                          size_t count, void* stream);
const char* CudaErrorName(int error);
#endif

namespace {

template <typename T>
Coefficients<T> CoefficientsFor(const OptimizerOptions& o, int64_t t) {
  return MakeCoefficients<T>(o.learning_rate, o.momentum, o.nesterov, o.beta1,
                             o.beta2, o.epsilon,
                             o.kind == OptimizerKind::kAdam ? t : 0);
}

template <typename T>
void Update(OptimizerKind kind, const Coefficients<T>& c, T* var, const T* grad,
            T* m, T* v, size_t count) {
  switch (kind) {
    case OptimizerKind::kSgd:
      for (size_t i = 0; i < count; ++i) SgdUpdate(c, grad[i], var[i]);
      break;
    case OptimizerKind::kMomentum:
      for (size_t i = 0; i < count; ++i) {
        MomentumUpdate(c, grad[i], var[i], m[i]);
      }
      break;
    case OptimizerKind::kAdam:
      for (size_t i = 0; i < count; ++i) {
        AdamUpdate(c, grad[i], var[i], m[i], v[i]);
      }
      break;
    case OptimizerKind::kAdagrad:  // refused by CheckArgs
      break;
  }
}

absl::Status CheckArgs(const OptimizerOptions& options, DType dtype,
                       const void* var, const void* grad, const void* slot0,
                       const void* slot1, size_t count, int64_t t) {
  if (dtype != DType::kFloat32 && dtype != DType::kFloat64) {
    return absl::InvalidArgumentError(
        "optimizer update: variables must be float32 or float64");
  }
  if (options.kind == OptimizerKind::kAdagrad) {
    return absl::InvalidArgumentError(
        "optimizer update: Adagrad is applied by parameter servers only "
        "(the ParameterServer strategy)");
  }
  const int slots = SlotCount(options.kind);
  if (slots < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer update: unknown optimizer kind ",
                     static_cast<int>(options.kind)));
  }
  if (count == 0) return absl::OkStatus();
  if (var == nullptr || grad == nullptr) {
    return absl::InvalidArgumentError(
        "optimizer update: null variable or gradient");
  }
  if ((slots > 0 && slot0 == nullptr) || (slots > 1 && slot1 == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer update: the optimizer needs ", slots,
                     " slot buffer(s) and was given fewer"));
  }
  if (options.kind == OptimizerKind::kAdam && t < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer update: Adam's update count is ", t, "; it starts at 1"));
  }
  return absl::OkStatus();
}

}  // namespace

int SlotCount(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return 0;
    case OptimizerKind::kMomentum:
      return 1;
    case OptimizerKind::kAdam:
      return 2;
    case OptimizerKind::kAdagrad:
      return -1;
  }
  return -1;
}

const char* SlotName(OptimizerKind kind, int slot) {
  if (kind == OptimizerKind::kMomentum && slot == 0) return "momentum";
  if (kind == OptimizerKind::kAdam && slot == 0) return "m";
  if (kind == OptimizerKind::kAdam && slot == 1) return "v";
  return nullptr;
}

absl::Status ApplyUpdateHost(const OptimizerOptions& options, DType dtype,
                             void* var, const void* grad, void* slot0,
                             void* slot1, size_t count, int64_t t) {
  if (absl::Status checked =
          CheckArgs(options, dtype, var, grad, slot0, slot1, count, t);
      !checked.ok() || count == 0) {
    return checked;
  }
  if (dtype == DType::kFloat32) {
    Update(options.kind, CoefficientsFor<float>(options, t),
           static_cast<float*>(var), static_cast<const float*>(grad),
           static_cast<float*>(slot0), static_cast<float*>(slot1), count);
  } else {
    Update(options.kind, CoefficientsFor<double>(options, t),
           static_cast<double*>(var), static_cast<const double*>(grad),
           static_cast<double*>(slot0), static_cast<double*>(slot1), count);
  }
  return absl::OkStatus();
}

#ifdef COHORT_HAVE_CUDA
namespace {

// optimizer_kernels.cu switches on these values without seeing step.h.
static_assert(static_cast<int>(OptimizerKind::kSgd) == 0 &&
                  static_cast<int>(OptimizerKind::kMomentum) == 1 &&
                  static_cast<int>(OptimizerKind::kAdam) == 2,
              "optimizer_kernels.cu's kSgd, kMomentum and kAdam");

template <typename T>
int Launch(const OptimizerOptions& options, void* var, const void* grad,
           void* slot0, void* slot1, size_t count, int64_t t, void* stream) {
  return LaunchOptimizerUpdate(static_cast<int>(options.kind),
                               CoefficientsFor<T>(options, t), var, grad, slot0,
                               slot1, count, stream);
}

}  // namespace

absl::Status ApplyUpdateCuda(const OptimizerOptions& options, DType dtype,
                             void* var, const void* grad, void* slot0,
                             void* slot1, size_t count, int64_t t,
                             void* stream) {
  if (absl::Status checked =
          CheckArgs(options, dtype, var, grad, slot0, slot1, count, t);
      !checked.ok() || count == 0) {
    return checked;
  }
  const int error =
      dtype == DType::kFloat32
          ? Launch<float>(options, var, grad, slot0, slot1, count, t, stream)
          : Launch<double>(options, var, grad, slot0, slot1, count, t, stream);
  if (error != 0) {
    return absl::InternalError(absl::StrCat(
        "optimizer update kernel launch failed: ", CudaErrorName(error)));
  }
  return absl::OkStatus();
}
#endif

}  // namespace cohort::optimizer
