#include "common/steady_time.h"

#include <chrono>

#include "absl/time/clock.h"

namespace cohort {

absl::Time SteadyNow() {
  struct Anchor {
    absl::Time wall;
    std::chrono::steady_clock::time_point steady;
  };
  static const Anchor anchor{absl::Now(), std::chrono::steady_clock::now()};
  return anchor.wall +
         absl::FromChrono(std::chrono::steady_clock::now() - anchor.steady);
}

}  // namespace cohort
