#include "collective/reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace cohort::collective {
namespace {

template <typename T>
void AccumulateTyped(T* dst, const T* src, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean:
      for (size_t i = 0; i < count; ++i) dst[i] += src[i];
      return;
    case ReduceOp::kMin:
      for (size_t i = 0; i < count; ++i) dst[i] = std::min(dst[i], src[i]);
      return;
    case ReduceOp::kMax:
      for (size_t i = 0; i < count; ++i) dst[i] = std::max(dst[i], src[i]);
      return;
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void AccumulateHalf(uint16_t* dst, const uint16_t* src, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    dst[i] = FromFloat(ToFloat(dst[i]) + ToFloat(src[i]));
  }
}

template <typename T>
void DivideTyped(T* data, size_t count, int divisor) {
  const T d = static_cast<T>(divisor);
  for (size_t i = 0; i < count; ++i) data[i] /= d;
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void DivideHalf(uint16_t* data, size_t count, int divisor) {
  const float d = static_cast<float>(divisor);
  for (size_t i = 0; i < count; ++i) data[i] = FromFloat(ToFloat(data[i]) / d);
}

}  // namespace

void Accumulate(void* dst, const void* src, size_t count, DType dtype,
                ReduceOp op) {
  switch (dtype) {
    case DType::kFloat32:
      return AccumulateTyped(static_cast<float*>(dst),
                             static_cast<const float*>(src), count, op);
    case DType::kFloat64:
      return AccumulateTyped(static_cast<double*>(dst),
                             static_cast<const double*>(src), count, op);
    case DType::kInt32:
      return AccumulateTyped(static_cast<int32_t*>(dst),
                             static_cast<const int32_t*>(src), count, op);
    case DType::kInt64:
      return AccumulateTyped(static_cast<int64_t*>(dst),
                             static_cast<const int64_t*>(src), count, op);
    case DType::kFloat16:
      return AccumulateHalf<HalfToFloat, FloatToHalf>(
          static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src),
          count);
    case DType::kBFloat16:
      return AccumulateHalf<BFloat16ToFloat, FloatToBFloat16>(
          static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src),
          count);
  }
}

void Accumulate(void* dst, const absl::Cord& src, DType dtype, ReduceOp op) {
  const size_t element = DTypeSize(dtype);
  char* target = static_cast<char*>(dst);
  char split[16];
  size_t held = 0;  // bytes of a split element in `split`
  for (absl::string_view piece : src.Chunks()) {
    if (held > 0) {
      const size_t take = std::min(element - held, piece.size());
      std::memcpy(split + held, piece.data(), take);
      held += take;
      piece.remove_prefix(take);
      if (held < element) continue;
      Accumulate(target, split, 1, dtype, op);
      target += element;
      held = 0;
    }
    const size_t whole = piece.size() / element;
    Accumulate(target, piece.data(), whole, dtype, op);
    target += whole * element;
    piece.remove_prefix(whole * element);
    std::memcpy(split, piece.data(), piece.size());
    held = piece.size();
  }
}

void DivideForMean(void* data, size_t count, DType dtype, int divisor) {
  switch (dtype) {
    case DType::kFloat32:
      return DivideTyped(static_cast<float*>(data), count, divisor);
    case DType::kFloat64:
      return DivideTyped(static_cast<double*>(data), count, divisor);
    case DType::kInt32:
      return DivideTyped(static_cast<int32_t*>(data), count, divisor);
    case DType::kInt64:
      return DivideTyped(static_cast<int64_t*>(data), count, divisor);
    case DType::kFloat16:
      return DivideHalf<HalfToFloat, FloatToHalf>(static_cast<uint16_t*>(data),
                                                  count, divisor);
    case DType::kBFloat16:
      return DivideHalf<BFloat16ToFloat, FloatToBFloat16>(
          static_cast<uint16_t*>(data), count, divisor);
  }
}

}  // namespace cohort::collective
