#include "collective/algorithms/op_context.h"

#include <algorithm>

namespace cohort::collective {

Segments::Segments(size_t count, int parts)
    : base_(count / static_cast<size_t>(parts)),
      extra_(count % static_cast<size_t>(parts)) {}

size_t Segments::offset(int i) const {
  const size_t index = static_cast<size_t>(i);
  return index * base_ + std::min(index, extra_);
}

size_t Segments::length(int i) const {
  return base_ + (static_cast<size_t>(i) < extra_ ? 1 : 0);
}

}  // namespace cohort::collective
