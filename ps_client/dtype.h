#pragma once

// Element types and shapes of ps variables. The element types are
// cohort::DType (cohort/step.h); the ps protocol carries them as its wire
// enum v1::PsDType, mapped here and nowhere else. Shapes: sizes, and the
// names messages use ("[8,16]").

#include <cstdint>
#include <optional>
#include <string>

#include "absl/types/span.h"
#include "cohort/step.h"
#include "cohort/v1/ps.pb.h"

namespace cohort::ps {

// The element type a wire value names; nullopt for PS_DTYPE_UNSPECIFIED or
// a value this build does not know.
std::optional<DType> FromWire(v1::PsDType dtype);
// The wire value of `dtype`; PS_DTYPE_UNSPECIFIED for the 16-bit floats,
// which no variable holds.
v1::PsDType ToWire(DType dtype);

// cohort::DType's size, name and kind for a wire value: 0, "unspecified"
// and false when FromWire has no type for it.
int DTypeSize(v1::PsDType dtype);
std::string DTypeName(v1::PsDType dtype);
bool IsFloatDType(v1::PsDType dtype);

// "[8,16]"; "[]" for a scalar.
std::string ShapeString(absl::Span<const int64_t> shape);

// The product of the dimensions (1 for a scalar), or -1 when a dimension is
// not positive or the product exceeds `max_elements`.
int64_t NumElements(absl::Span<const int64_t> shape, int64_t max_elements);

}  // namespace cohort::ps
