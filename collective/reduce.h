#pragma once

// Element-wise reduction kernels. The order of operands is fixed by the
// caller, so that results are bitwise reproducible for a given topology.

#include <cstddef>

#include "absl/strings/cord.h"
#include "collective/types.h"

namespace cohort::collective {

// dst[i] = op(dst[i], src[i]) for i < count. Buffers need no alignment. MEAN
// accumulates as SUM; the division happens once, in DivideForMean.
// float16/bfloat16 are accumulated in float32 and rounded back after each step.
void Accumulate(void* dst, const void* src, size_t count, DType dtype,
                ReduceOp op);

// As above, with `src` as a transport holds it: in pieces, reduced where
// they lie. An element split across two pieces is joined first.
void Accumulate(void* dst, const absl::Cord& src, DType dtype, ReduceOp op);

// As above, but dst[i] = op(src[i], dst[i]): the operands of a rank that
// adds its own data (`src` here) to what it received (`dst`). The result
// differs from Accumulate's only where the operands' order shows: MIN and
// MAX of a NaN or of zeros of both signs. (Which of two NaNs a sum returns
// is the compiler's choice either way.)
void AccumulateSrcFirst(void* dst, const absl::Cord& src, DType dtype,
                        ReduceOp op);

// data[i] /= divisor, in the element type (integer division truncates).
void DivideForMean(void* data, size_t count, DType dtype, int divisor);

}  // namespace cohort::collective
