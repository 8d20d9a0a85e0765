#pragma once

// A ps variable's spec: its checks, its normal form, and how it reads in
// messages. Pure functions; thread-compatible.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "cohort/v1/ps.pb.h"

namespace cohort::ps {

// No variable may exceed what one protobuf bytes field can carry, as its
// snapshot stores it in one.
inline constexpr int64_t kMaxVariableBytes = (int64_t{1} << 31) - 1;
// TensorFlow's limit on a tensor's rank; a spec's shape is held and counted
// beside its values.
inline constexpr int kMaxRank = 254;

// Checks `in` and returns it with the optimizer's defaults filled in and
// without `initial`; `elements` gets the element count. INVALID_ARGUMENT
// naming the variable and the field.
absl::StatusOr<v1::PsVariableSpec> NormalizeSpec(const v1::PsVariableSpec& in,
                                                 int64_t* elements);

// Whether two normalized specs declare the same variable.
bool SameSpec(const v1::PsVariableSpec& a, const v1::PsVariableSpec& b);

// "shape [8,16] float32, optimizer SGD(lr=0.1), aggregation NONE"
std::string SpecString(const v1::PsVariableSpec& spec);

}  // namespace cohort::ps
