#pragma once

// Element types and reduction operators of the collective layer, as
// tf.distribute's ReduceOp (SUM, MEAN) plus MIN and MAX.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cohort::collective {

enum class DType : uint8_t {
  kFloat32,
  kFloat64,
  kInt32,
  kInt64,
  kFloat16,   // IEEE half
  kBFloat16,  // bfloat16
};

enum class ReduceOp : uint8_t { kSum, kMean, kMin, kMax };

size_t DTypeSize(DType dtype);
absl::string_view DTypeName(DType dtype);     // "float32"
absl::string_view ReduceOpName(ReduceOp op);  // "sum"

// float16 and bfloat16 support SUM and MEAN only; everything else supports
// every op. INVALID_ARGUMENT names the pair otherwise.
absl::Status CheckSupported(DType dtype, ReduceOp op);

// Conversions used by the reduction kernels and by tests. Round to nearest
// even; NaN stays NaN.
float HalfToFloat(uint16_t half);
uint16_t FloatToHalf(float value);
float BFloat16ToFloat(uint16_t value);
uint16_t FloatToBFloat16(float value);

}  // namespace cohort::collective
