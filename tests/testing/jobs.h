#pragma once

// Helpers for tests that run jobs: the example libraries, the spirals MLP
// job, and waits on a job's status with a deadline.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cohort/client.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {

// An example step library: build/lib/lib<name>.so.
std::string ExampleLibrary(const std::string& name);
// The test step functions' library (tests/testing/test_steps.cc).
std::string TestStepsLibrary();

// The MLP example on the spirals record files in `data_dir`, global batch
// 128, seed 3, 2 devices per agent (the PS strategy ignores that).
JobSpec MlpJob(const std::string& data_dir, StrategyKind strategy,
               int64_t steps, const std::string& shard_policy);

// The held-out accuracy the MLP must reach (chance is 0.5). Synchronous
// strategies reach it at every run.
inline constexpr double kMlpAccuracyBar = 0.95;
// The bar for ParameterServer jobs, which FinalMlpAccuracy measures. Their
// updates are asynchronous (gradients computed on variables a few updates
// old), so the final model varies from run to run where a synchronous
// job's does not.
inline constexpr double kMlpAsyncAccuracyBar = 0.90;

// The held-out accuracy of an MLP ParameterServer job's final variables,
// read from its ps tasks after it ended and evaluated here: the model that
// every push made. The job's own "accuracy" is its last closure's, on the
// variables that closure pulled, before its own push and while the pushes
// of the closures beside it were landing: one noisy sample of a model in
// motion. -1 after a test failure.
double FinalMlpAccuracy(Client& client, const std::string& job_id,
                        const JobSpec& spec);

// The linear-regression example (float64, 4 weights), global batch 96 (a
// multiple of 1, 2, 3, 4, 6 and 8 replicas),
// every step slowed by `step_sleep_ms`, so that a job lasts long enough for
// a fault to land in it. Its "max_weight_error" metric says how well it
// learnt.
JobSpec SlowLinearJob(StrategyKind strategy, int64_t steps, int step_sleep_ms);

// The linear example's trained parameters, w then b, from the job's latest
// checkpoint; a test failure (and what was found) when it lacks them.
std::vector<double> LinearParameters(const v1::JobStatus& status);

// Writes the MLP's spirals (4 record files) into `dir` with
// cohort-example-mlp-data; its output when it fails.
absl::Status WriteSpirals(const std::string& dir);

// Polls the job until `condition` holds or `timeout` passes; its last status.
v1::JobStatus WaitForJob(
    Client& client, const std::string& id,
    const std::function<bool(const v1::JobStatus&)>& condition,
    absl::Duration timeout);
// Until it has done `step` steps (or ended); its last status.
v1::JobStatus WaitForStep(Client& client, const std::string& id, int64_t step,
                          absl::Duration timeout);
// Until the evaluator has reported the checkpoint at `step`; its last
// status.
v1::JobStatus WaitForEvaluation(Client& client, const std::string& id,
                                int64_t step, absl::Duration timeout);
// Until it SUCCEEDED, FAILED or was CANCELLED.
v1::JobStatus WaitForJobEnd(Client& client, const std::string& id,
                            absl::Duration timeout);
bool JobEnded(const v1::JobStatus& status);

// Runs `spec` on one host, in a cluster of a chief and `workers` workers of
// 2 CPU devices each, under `dir`, and returns how it ended: the reference
// a job across hosts is compared with.
v1::JobStatus RunOnOneHost(const JobSpec& spec, int workers,
                           const ScratchDir& dir);
// Every variable and slot of `a`'s last checkpoint has the bits of `b`'s.
void ExpectSameVariables(const v1::JobStatus& a, const v1::JobStatus& b,
                         const std::string& what);

}  // namespace cohort::testing
