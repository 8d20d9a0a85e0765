#pragma once

// The byte ranges of one buffer that chunks have filled so far, for the two
// ends that put a tensor back together from chunks (a worker's pull, a
// shard's push): each chunk must land on bytes no other chunk wrote.

#include <cstddef>
#include <cstdint>
#include <map>

namespace cohort::ps {

// Disjoint [begin, end) ranges, touching ones merged: chunks that arrive in
// order, however many, are one range. Not thread-safe.
class ByteRanges {
 public:
  // Whether [begin, end) shares a byte with a range added before.
  bool Overlaps(int64_t begin, int64_t end) const;
  // Whether [begin, end) would join a range added before, adding no piece.
  bool Touches(int64_t begin, int64_t end) const;
  // Adds [begin, end), which must not overlap. An empty range adds nothing.
  void Add(int64_t begin, int64_t end);
  // The separate ranges held.
  size_t pieces() const { return ranges_.size(); }

 private:
  std::map<int64_t, int64_t> ranges_;  // begin -> end
};

}  // namespace cohort::ps
