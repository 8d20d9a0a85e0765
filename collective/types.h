#pragma once

// Element types and reduction operators of the collective layer: those of
// the step API (cohort/step.h), so that a step's tensors reach the
// collectives without translation.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "cohort/step.h"

namespace cohort::collective {

using ::cohort::DType;
using ::cohort::DTypeName;
using ::cohort::DTypeSize;
using ::cohort::ReduceOp;

absl::string_view ReduceOpName(ReduceOp op);  // "sum"

// float16 and bfloat16 support SUM and MEAN only; everything else supports
// every op. INVALID_ARGUMENT names the pair otherwise.
absl::Status CheckSupported(DType dtype, ReduceOp op);

// INVALID_ARGUMENT unless `root` is a rank of a group of `size`; `op` names
// the collective ("broadcast").
absl::Status CheckRoot(const char* op, int root, int size);

// What an Abort(status) fails operations with: `status`, or UNKNOWN when
// it is OK, since an abort must fail what it touches on every rank alike.
absl::Status AbortStatus(const absl::Status& status);

// Conversions used by the reduction kernels and by tests. Round to nearest
// even; NaN stays NaN.
float HalfToFloat(uint16_t half);
uint16_t FloatToHalf(float value);
float BFloat16ToFloat(uint16_t value);
uint16_t FloatToBFloat16(float value);

}  // namespace cohort::collective
