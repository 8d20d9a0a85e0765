#pragma once

// Inputs and reference results for collective tests, shared by the
// in-process tests and the multi-process rank program: rank r's element i is
// a small value whose sums are exact in every dtype, so any summation order
// gives the reference bits.

#include <cstddef>
#include <string>
#include <vector>

#include "collective/types.h"

namespace cohort::testing {

// Writes `value` at `out` as one element of `dtype` (integers truncated).
void StoreAs(double value, collective::DType dtype, char* out);

// One element of rank `rank`'s input.
double ReferenceInput(int rank, size_t i, collective::DType dtype);
// Rank `rank`'s input buffer of `count` elements.
std::vector<char> ReferenceInputs(int rank, size_t count,
                                  collective::DType dtype);
// The reduction over `ranks` ranks of their inputs.
std::vector<char> ReferenceReduction(int ranks, size_t count,
                                     collective::DType dtype,
                                     collective::ReduceOp op);

// Whether the `bytes` at `a` and `b` are equal; unlike memcmp, valid for
// null pointers (an empty vector's data()) when `bytes` is 0.
bool SameBytes(const void* a, const void* b, size_t bytes);

struct DTypeOp {
  collective::DType dtype;
  collective::ReduceOp op;
};
// Every supported dtype x op pair.
std::vector<DTypeOp> AllDTypeOps();

}  // namespace cohort::testing
