// cohort-trace-bench: what a trace span costs a replica's thread, with
// tracing off (the default: no recorder installed) and on.
//
//   cohort-trace-bench [--spans=N]
//
// Each iteration opens and closes one span with two args, as a collective's
// span does. Prints ns per span for both, best of 5 rounds.

#include <algorithm>
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/flags.h"
#include "common/trace.h"

ABSL_FLAG(int64_t, spans, 2'000'000, "Spans per round.");

namespace cohort {
namespace {

constexpr char kUsage[] =
    "the cost of a trace span, off and on.\n\n  cohort-trace-bench "
    "[--spans=N]";

// Nanoseconds per span over `n` spans on the calling thread.
double TimeSpans(int64_t n) {
  const absl::Time start = absl::Now();
  for (int64_t i = 0; i < n; ++i) {
    ScopedSpan span("allreduce");
    if (span.active()) {
      span.Arg("bytes", absl::StrCat(i));
      span.Arg("algorithm", "ring");
    }
  }
  return absl::ToDoubleNanoseconds(absl::Now() - start) /
         static_cast<double>(n);
}

int Main(int argc, char** argv) {
  ParseFlagsOnlyCommandLine(argc, argv, kUsage);
  const int64_t n = absl::GetFlag(FLAGS_spans);
  if (n <= 0) {
    std::fprintf(stderr, "cohort-trace-bench: --spans must be positive\n");
    return 2;
  }
  double off = 1e30, on = 1e30;
  for (int round = 0; round < 5; ++round) {
    off = std::min(off, TimeSpans(n));
    TraceRecorder recorder(static_cast<size_t>(n));
    TraceRecorder::Scope scope(&recorder);
    on = std::min(on, TimeSpans(n));
  }
  std::printf("span, tracing off: %8.2f ns\n", off);
  std::printf("span, tracing on:  %8.2f ns\n", on);
  return 0;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) { return cohort::Main(argc, argv); }
