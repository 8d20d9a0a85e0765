#include "collective/types.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace cohort::collective {

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMean:
      return "mean";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
  }
  return "unknown";
}

absl::Status CheckSupported(DType dtype, ReduceOp op) {
  const bool half = dtype == DType::kFloat16 || dtype == DType::kBFloat16;
  if (half && (op == ReduceOp::kMin || op == ReduceOp::kMax)) {
    return absl::InvalidArgumentError(
        absl::StrCat(DTypeName(dtype), " supports sum and mean only, not ",
                     ReduceOpName(op)));
  }
  return absl::OkStatus();
}

namespace {

uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float BitsFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

}  // namespace

float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000) << 16;
  const uint32_t exponent = (half >> 10) & 0x1f;
  const uint32_t mantissa = half & 0x3ff;
  if (exponent == 0x1f) {  // inf or NaN
    return BitsFloat(sign | 0x7f800000 | (mantissa << 13));
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  return BitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t FloatToHalf(float value) {
  const uint32_t bits = FloatBits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const float magnitude = std::fabs(value);
  if (std::isnan(value)) return sign | 0x7e00;
  if (magnitude >= 65520.0f) return sign | 0x7c00;  // rounds to infinity
  if (magnitude < 6.103515625e-05f) {  // subnormal half: units of 2^-24
    return sign |
           static_cast<uint16_t>(std::nearbyint(std::ldexp(magnitude, 24)));
  }
  // Normal: keep 10 mantissa bits, round to nearest even on the 13 dropped.
  uint32_t rounded = (bits & 0x7fffffff) - (112u << 23);
  rounded += 0xfff + ((rounded >> 13) & 1);
  return sign | static_cast<uint16_t>(rounded >> 13);
}

float BFloat16ToFloat(uint16_t value) {
  return BitsFloat(static_cast<uint32_t>(value) << 16);
}

uint16_t FloatToBFloat16(float value) {
  const uint32_t bits = FloatBits(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t rounded = bits + 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(rounded >> 16);
}

absl::Status CheckRoot(const char* op, int root, int size) {
  if (root >= 0 && root < size) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, " root ", root, " is out of range: the group has ", size, " ranks"));
}

absl::Status AbortStatus(const absl::Status& status) {
  if (!status.ok()) return status;
  return absl::UnknownError("the group was aborted without a reason");
}

}  // namespace cohort::collective
