#pragma once

// The optimizers of cohort::OptimizerOptions applied to whole buffers, in
// the variable's precision, on the host or on a CUDA device. The math is
// update_math.h's, shared with the ps shards.
//
// Stateless free functions; concurrent calls on disjoint memory are safe.

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "cohort/step.h"

namespace cohort::optimizer {

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

}  // namespace cohort::optimizer
