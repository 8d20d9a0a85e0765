#include "tests/testing/collective_reference.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "collective/reduce.h"

namespace cohort::testing {

using collective::DType;
using collective::ReduceOp;

void StoreAs(double value, DType dtype, char* out) {
  switch (dtype) {
    case DType::kFloat32: {
      const float v = static_cast<float>(value);
      std::memcpy(out, &v, sizeof(v));
      return;
    }
    case DType::kFloat64:
      std::memcpy(out, &value, sizeof(value));
      return;
    case DType::kInt32: {
      const int32_t v = static_cast<int32_t>(value);
      std::memcpy(out, &v, sizeof(v));
      return;
    }
    case DType::kInt64: {
      const int64_t v = static_cast<int64_t>(value);
      std::memcpy(out, &v, sizeof(v));
      return;
    }
    case DType::kFloat16: {
      const uint16_t v = collective::FloatToHalf(static_cast<float>(value));
      std::memcpy(out, &v, sizeof(v));
      return;
    }
    case DType::kBFloat16: {
      const uint16_t v = collective::FloatToBFloat16(static_cast<float>(value));
      std::memcpy(out, &v, sizeof(v));
      return;
    }
  }
}

double ReferenceInput(int rank, size_t i, DType dtype) {
  // In [-3, 7], with halves for floating types (sums stay within bfloat16's
  // 8 significant bits for up to 8 ranks). Signs vary for MIN and MAX.
  const double base =
      static_cast<double>((rank * 7 + static_cast<int>(i % 17) * 3) % 11) - 3;
  const bool integral = dtype == DType::kInt32 || dtype == DType::kInt64;
  return integral ? base : base + 0.5 * static_cast<double>(i % 2);
}

std::vector<char> ReferenceInputs(int rank, size_t count, DType dtype) {
  const size_t element = collective::DTypeSize(dtype);
  std::vector<char> data(count * element);
  for (size_t i = 0; i < count; ++i) {
    StoreAs(ReferenceInput(rank, i, dtype), dtype, data.data() + i * element);
  }
  return data;
}

std::vector<char> ReferenceReduction(int ranks, size_t count, DType dtype,
                                     ReduceOp op) {
  const size_t element = collective::DTypeSize(dtype);
  std::vector<char> out(count * element);
  for (size_t i = 0; i < count; ++i) {
    double acc = ReferenceInput(0, i, dtype);
    for (int r = 1; r < ranks; ++r) {
      const double x = ReferenceInput(r, i, dtype);
      acc = op == ReduceOp::kMin   ? std::min(acc, x)
            : op == ReduceOp::kMax ? std::max(acc, x)
                                   : acc + x;
    }
    StoreAs(acc, dtype, out.data() + i * element);
  }
  if (op == ReduceOp::kMean) {
    collective::DivideForMean(out.data(), count, dtype, ranks);
  }
  return out;
}

std::vector<DTypeOp> AllDTypeOps() {
  std::vector<DTypeOp> pairs;
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32,
                      DType::kInt64, DType::kFloat16, DType::kBFloat16}) {
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMin, ReduceOp::kMax}) {
      if (collective::CheckSupported(dtype, op).ok())
        pairs.push_back({dtype, op});
    }
  }
  return pairs;
}

bool SameBytes(const void* a, const void* b, size_t bytes) {
  return bytes == 0 || std::memcmp(a, b, bytes) == 0;
}

}  // namespace cohort::testing
