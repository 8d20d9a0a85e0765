#pragma once

// Element types and shapes of ps variables: sizes, and the names messages
// use ("float32", "[8,16]").

#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "cohort/v1/ps.pb.h"

namespace cohort::ps {

// Bytes per element; 0 for PS_DTYPE_UNSPECIFIED or an unknown value.
int DTypeSize(v1::PsDType dtype);

// "float32", "float64", "int32", "int64", or "unspecified".
std::string DTypeName(v1::PsDType dtype);

bool IsFloatDType(v1::PsDType dtype);

// "[8,16]"; "[]" for a scalar.
std::string ShapeString(absl::Span<const int64_t> shape);

// The product of the dimensions (1 for a scalar), or -1 when a dimension is
// not positive or the product exceeds `max_elements`.
int64_t NumElements(absl::Span<const int64_t> shape, int64_t max_elements);

}  // namespace cohort::ps
