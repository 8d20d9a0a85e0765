#pragma once

// The smallest valid job spec, for the coordinator's unit tests: a step
// function in a library the tests never load (a made-up digest).

#include <cstdint>

#include "cohort/v1/job.pb.h"

namespace cohort::coordinator {

inline v1::JobSpec TestJobSpec(v1::Strategy strategy, int64_t steps) {
  v1::JobSpec spec;
  spec.set_strategy(strategy);
  spec.set_library_digest(
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  spec.set_step_fn("step");
  spec.set_steps(steps);
  spec.set_global_batch_size(8);
  return spec;
}

}  // namespace cohort::coordinator
