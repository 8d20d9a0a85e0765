#pragma once

// What a ps shard applies when a worker pushes a trained variable's
// gradient: SGD, Adagrad and Adam as TensorFlow formulates them (the element
// math is optimizer/update_math.h's, the agents' own), or a plain assignment
// when the variable has no optimizer. Computed in the variable's own dtype
// (float32 or float64).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "cohort/v1/ps.pb.h"

namespace cohort::ps {

// TensorFlow's defaults for what the proto leaves at zero: Adam beta1 0.9,
// beta2 0.999, epsilon 1e-7; Adagrad epsilon 1e-7 and
// initial_accumulator_value 0.1.
v1::PsOptimizer WithDefaults(const v1::PsOptimizer& optimizer);

// INVALID_ARGUMENT naming `variable` unless `optimizer` (defaults filled in)
// suits a variable of `dtype`: a positive learning rate, betas in [0, 1),
// positive epsilon, a non-negative initial accumulator, and a float dtype for
// every kind but KIND_UNSPECIFIED.
absl::Status ValidateOptimizer(const v1::PsOptimizer& optimizer,
                               v1::PsDType dtype, absl::string_view variable);

// Slots the optimizer keeps beside a variable, each the variable's size:
// Adagrad 1 (the accumulator), Adam 2 (m, v), the others none.
int NumSlots(v1::PsOptimizer::Kind kind);

// The optimizer's slots for a new variable of `elements` elements: the
// accumulator at initial_accumulator_value; Adam's m and v at zero.
std::vector<std::string> InitialSlots(const v1::PsOptimizer& optimizer,
                                      v1::PsDType dtype, int64_t elements);

// A variable's optimizer state. Pointers are not owned.
struct OptimizerState {
  std::string* value;               // the variable's bytes
  std::vector<std::string>* slots;  // NumSlots(kind) buffers, value's size
  int64_t* step;                    // Adam's t, updates applied so far
};

// Applies one push: `update` is a gradient (SGD, Adagrad, Adam) or the new
// value (KIND_UNSPECIFIED). Preconditions, checked by the caller: the
// optimizer was validated for `dtype`, `update` and every slot have the
// value's size.
void ApplyUpdate(const v1::PsOptimizer& optimizer, v1::PsDType dtype,
                 std::string_view update, const OptimizerState& state);

}  // namespace cohort::ps
