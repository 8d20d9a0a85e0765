#include "collective/reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace cohort::collective {
namespace {

// Elements are read and written with memcpy: buffers need no alignment
// (received bytes sit wherever the transport put them), and the compiler
// still emits plain, vectorised loads and stores.
template <typename T>
T Load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

template <typename T>
void Store(char* p, T value) {
  std::memcpy(p, &value, sizeof(T));
}

// dst[i] = combine(dst[i], src[i]), or combine(src[i], dst[i]) when
// kSrcFirst.
template <typename T, bool kSrcFirst, typename Combine>
void CombineEach(char* dst, const char* src, size_t count, Combine combine) {
  for (size_t i = 0; i < count; ++i) {
    char* d = dst + i * sizeof(T);
    const T s = Load<T>(src + i * sizeof(T));
    Store<T>(d, kSrcFirst ? combine(s, Load<T>(d)) : combine(Load<T>(d), s));
  }
}

template <typename T, bool kSrcFirst>
void AccumulateTyped(void* dst_ptr, const void* src_ptr, size_t count,
                     ReduceOp op) {
  char* dst = static_cast<char*>(dst_ptr);
  const char* src = static_cast<const char*>(src_ptr);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean:
      return CombineEach<T, kSrcFirst>(dst, src, count,
                                       [](T a, T b) { return a + b; });
    case ReduceOp::kMin:
      return CombineEach<T, kSrcFirst>(dst, src, count,
                                       [](T a, T b) { return std::min(a, b); });
    case ReduceOp::kMax:
      return CombineEach<T, kSrcFirst>(dst, src, count,
                                       [](T a, T b) { return std::max(a, b); });
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float),
          bool kSrcFirst>
void AccumulateHalf(void* dst, const void* src, size_t count) {
  CombineEach<uint16_t, kSrcFirst>(static_cast<char*>(dst),
                                   static_cast<const char*>(src), count,
                                   [](uint16_t a, uint16_t b) {
                                     return FromFloat(ToFloat(a) + ToFloat(b));
                                   });
}

template <typename T>
void DivideTyped(void* data_ptr, size_t count, int divisor) {
  char* data = static_cast<char*>(data_ptr);
  const T d = static_cast<T>(divisor);
  for (size_t i = 0; i < count; ++i) {
    char* p = data + i * sizeof(T);
    Store<T>(p, static_cast<T>(Load<T>(p) / d));
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void DivideHalf(void* data_ptr, size_t count, int divisor) {
  char* data = static_cast<char*>(data_ptr);
  const float d = static_cast<float>(divisor);
  for (size_t i = 0; i < count; ++i) {
    char* p = data + i * sizeof(uint16_t);
    Store<uint16_t>(p, FromFloat(ToFloat(Load<uint16_t>(p)) / d));
  }
}

template <bool kSrcFirst>
void AccumulateOrdered(void* dst, const void* src, size_t count, DType dtype,
                       ReduceOp op) {
  switch (dtype) {
    case DType::kFloat32:
      return AccumulateTyped<float, kSrcFirst>(dst, src, count, op);
    case DType::kFloat64:
      return AccumulateTyped<double, kSrcFirst>(dst, src, count, op);
    case DType::kInt32:
      return AccumulateTyped<int32_t, kSrcFirst>(dst, src, count, op);
    case DType::kInt64:
      return AccumulateTyped<int64_t, kSrcFirst>(dst, src, count, op);
    case DType::kFloat16:
      return AccumulateHalf<HalfToFloat, FloatToHalf, kSrcFirst>(dst, src,
                                                                 count);
    case DType::kBFloat16:
      return AccumulateHalf<BFloat16ToFloat, FloatToBFloat16, kSrcFirst>(
          dst, src, count);
  }
}

template <bool kSrcFirst>
void AccumulateOrdered(void* dst, const absl::Cord& src, DType dtype,
                       ReduceOp op) {
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
      AccumulateOrdered<kSrcFirst>(target, split, 1, dtype, op);
      target += element;
      held = 0;
    }
    const size_t whole = piece.size() / element;
    AccumulateOrdered<kSrcFirst>(target, piece.data(), whole, dtype, op);
    target += whole * element;
    piece.remove_prefix(whole * element);
    std::memcpy(split, piece.data(), piece.size());
    held = piece.size();
  }
}

}  // namespace

void Accumulate(void* dst, const void* src, size_t count, DType dtype,
                ReduceOp op) {
  AccumulateOrdered<false>(dst, src, count, dtype, op);
}

void Accumulate(void* dst, const absl::Cord& src, DType dtype, ReduceOp op) {
  AccumulateOrdered<false>(dst, src, dtype, op);
}

void AccumulateSrcFirst(void* dst, const absl::Cord& src, DType dtype,
                        ReduceOp op) {
  AccumulateOrdered<true>(dst, src, dtype, op);
}

void DivideForMean(void* data, size_t count, DType dtype, int divisor) {
  if (divisor == 1) return;  // x / 1 is x, in every type
  switch (dtype) {
    case DType::kFloat32:
      return DivideTyped<float>(data, count, divisor);
    case DType::kFloat64:
      return DivideTyped<double>(data, count, divisor);
    case DType::kInt32:
      return DivideTyped<int32_t>(data, count, divisor);
    case DType::kInt64:
      return DivideTyped<int64_t>(data, count, divisor);
    case DType::kFloat16:
      return DivideHalf<HalfToFloat, FloatToHalf>(data, count, divisor);
    case DType::kBFloat16:
      return DivideHalf<BFloat16ToFloat, FloatToBFloat16>(data, count, divisor);
  }
}

}  // namespace cohort::collective
