#pragma once

// The element-wise updates of the optimizers in cohort::OptimizerOptions,
// with Keras's formulas, computed in the variable's precision:
//
//   SGD:       var -= lr * g
//   Momentum:  m = momentum * m - lr * g
//              var += m                         (nesterov: var += momentum
//                                                * m - lr * g, new m)
//   Adam:      lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
//              m = beta1 * m + (1 - beta1) * g
//              v = beta2 * v + (1 - beta2) * g * g
//              var -= lr_t * m / (sqrt(v) + epsilon)
//
// Stateless free functions; concurrent calls on disjoint memory are safe.

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "cohort/step.h"

namespace cohort::agent {

// The slots an optimizer keeps per variable, each shaped as the variable:
// 0 (SGD), 1 (momentum) or 2 (Adam).
int SlotCount(OptimizerKind kind);
// The name of slot `slot`, as saved in checkpoints after "<variable>/":
// "momentum"; Adam's "m" and "v". Null for a slot the kind does not have.
const char* SlotName(OptimizerKind kind, int slot);

// Applies update number `t` (1-based; Adam's bias correction uses it) to
// `count` elements of `var` from `grad`, all in host memory. Momentum uses
// `slot0` (m); Adam uses `slot0` (m) and `slot1` (v); unused slots are
// ignored. INVALID_ARGUMENT for a dtype other than kFloat32 or
// kFloat64, a missing slot, or t < 1 with Adam.
absl::Status ApplyUpdateHost(const OptimizerOptions& options, DType dtype,
                             void* var, const void* grad, void* slot0,
                             void* slot1, size_t count, int64_t t);

#ifdef COHORT_HAVE_CUDA
// The same on device memory, queued on `stream` (a cudaStream_t; null for
// the legacy default stream) of the current device; returns once launched.
// INTERNAL with CUDA's message when the launch fails.
absl::Status ApplyUpdateCuda(const OptimizerOptions& options, DType dtype,
                             void* var, const void* grad, void* slot0,
                             void* slot1, size_t count, int64_t t,
                             void* stream);
#endif

}  // namespace cohort::agent
