#pragma once

// Timeline tracing of a replica's work: named spans (a step, its input, a
// collective, the optimizer) recorded by the thread that does the work into
// the TraceRecorder installed on it. With no recorder installed, which is
// the default, a span costs one thread-local load and a branch.
//
//   TraceRecorder::Scope scope(recorder);   // this thread records
//   {
//     ScopedSpan span("allreduce");
//     span.Arg("bytes", "4096");
//     ...                                   // the work
//   }                                       // recorded here, on its end

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace cohort {

struct TraceEvent {
  const char* name = "";  // a string literal
  int64_t start_unix_ns = 0;
  int64_t duration_ns = 0;
  std::vector<std::pair<const char*, std::string>> args;
};

// One replica's spans, up to a capacity. Thread-safe: its thread adds while
// a reader (Agent.GetTrace) may copy.
class TraceRecorder {
 public:
  explicit TraceRecorder(size_t max_events);
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  void Add(TraceEvent event);
  // A copy of the events so far, in the order they ended, and how many were
  // not kept.
  std::vector<TraceEvent> Events(int64_t* dropped) const;

  // Installs `recorder` (may be null: record nothing) on the calling thread
  // until destroyed; restores what was there before.
  class Scope {
   public:
    explicit Scope(TraceRecorder* recorder);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    TraceRecorder* const previous_;
  };
  // The calling thread's recorder; null when it records nothing.
  static TraceRecorder* Current();

 private:
  const size_t max_events_;
  mutable absl::Mutex mu_;
  std::vector<TraceEvent> events_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// A span of the calling thread's recorder, from construction to
// destruction. Does nothing (and keeps no args) when there is none.
class ScopedSpan {
 public:
  explicit ScopedSpan(const char* name);
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

  bool active() const { return recorder_ != nullptr; }
  // `key` must be a string literal.
  void Arg(const char* key, std::string value) {
    if (recorder_ != nullptr) event_.args.emplace_back(key, std::move(value));
  }

 private:
  TraceRecorder* const recorder_;
  TraceEvent event_;
};

}  // namespace cohort
