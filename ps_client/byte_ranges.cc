#include "ps_client/byte_ranges.h"

#include <iterator>

namespace cohort::ps {

bool ByteRanges::Overlaps(int64_t begin, int64_t end) const {
  if (begin >= end) return false;
  auto next = ranges_.lower_bound(begin);
  if (next != ranges_.end() && next->first < end) return true;
  return next != ranges_.begin() && std::prev(next)->second > begin;
}

bool ByteRanges::Touches(int64_t begin, int64_t end) const {
  auto next = ranges_.lower_bound(begin);
  if (next != ranges_.end() && next->first == end) return true;
  return next != ranges_.begin() && std::prev(next)->second == begin;
}

void ByteRanges::Add(int64_t begin, int64_t end) {
  if (begin >= end) return;
  auto next = ranges_.lower_bound(begin);
  if (next != ranges_.end() && next->first == end) {
    end = next->second;
    next = ranges_.erase(next);
  }
  if (next != ranges_.begin() && std::prev(next)->second == begin) {
    std::prev(next)->second = end;
    return;
  }
  ranges_.emplace(begin, end);
}

}  // namespace cohort::ps
