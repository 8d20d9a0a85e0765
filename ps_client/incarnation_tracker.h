#pragma once

// Which incarnation of a ps task a client is talking to, learned from the
// answers to its calls.
//
// A ps task that restarts comes back with a new, random incarnation. Calls
// run concurrently, so answers can arrive out of order: one sent before a
// restart may be answered by the old incarnation after the new one has
// already answered another call. Such a late answer must not be taken for a
// restart, or the client would name a dead incarnation in its pushes.
//
// The rule: an answer from an incarnation other than the current one is late
// when its call started before the current one was first seen; otherwise
// that incarnation answered after the current one did, so the current one is
// gone. Incarnations need no order, and a mistaken verdict cannot stick: the
// next call answered by the live incarnation makes it current again.
//
// Not thread-safe: PsClient::Shard guards it with its mutex.

#include <cstdint>

namespace cohort::ps {

class IncarnationTracker {
 public:
  enum class Verdict {
    kCurrent,  // the current incarnation (or the first ever seen)
    kLate,     // an earlier incarnation's answer: ignore what it says
    kNew,      // a restart: `incarnation` is now the current one
  };

  // Numbers a call. Taken before the call is sent.
  uint64_t StartCall() { return ++started_; }

  // Classifies an answer from `incarnation` to call `call`.
  Verdict Answer(uint64_t incarnation, uint64_t call) {
    if (current_ == 0 || incarnation == current_) {
      if (current_ == 0) Adopt(incarnation);
      return Verdict::kCurrent;
    }
    if (call <= current_since_) return Verdict::kLate;
    Adopt(incarnation);
    return Verdict::kNew;
  }

  // The current incarnation; 0 before any answer.
  uint64_t current() const { return current_; }

 private:
  void Adopt(uint64_t incarnation) {
    current_ = incarnation;
    current_since_ = started_;
  }

  uint64_t started_ = 0;        // calls numbered so far
  uint64_t current_ = 0;        // 0: nothing answered yet
  uint64_t current_since_ = 0;  // calls started when current_ was adopted
};

}  // namespace cohort::ps
