#pragma once

// How cohortctl names, parses and shows jobs: flag values to enums, the
// `jobs` table, the `job` details and JSON. Pure functions: no I/O, and the
// current time is a parameter.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cohort/client.h"
#include "cohort/v1/job.pb.h"
#include "proto/job_state.h"

namespace cohort::ctl {

// --strategy and --communication values; errors list the valid names.
absl::StatusOr<StrategyKind> ParseStrategy(const std::string& name);
absl::StatusOr<Communication> ParseCommunication(const std::string& name);
std::string StrategyNames();       // "multi_worker_mirrored, mirrored, ..."
std::string CommunicationNames();  // "auto, ring, nccl, hierarchical"

// "RUNNING" for JOB_RUNNING: the enum name without its prefix.
std::string JobStateName(v1::JobState state);

// "120/600", or for a job whose client schedules its calls, "120/130 calls".
std::string StepOfSteps(const v1::JobStatus& job);

// "loss=0.0213 accuracy=0.981", sorted by name, `digits` significant digits.
std::string FormatMetrics(const v1::JobStatus& job, int digits = 4);

// "950ms", "11.5s", "3m05s", "2h04m", "3d02h": short and at most two units.
std::string ShortDuration(absl::Duration d);

// How long the job has run: submit to end, or to `now` while it runs.
absl::Duration JobDuration(const v1::JobStatus& job, absl::Time now);

// The `jobs` table: ID, NAME, STATE, STEP, STEPS/S, ATTEMPT, AGE, DURATION,
// ERROR (shortened), one row per job, columns aligned.
std::string JobsTable(const std::vector<v1::JobStatus>& jobs, absl::Time now);

// The `job JOB` view: spec, progress, metrics, placement, checkpoint,
// restart history and error, times in `zone`.
std::string JobDetails(const v1::JobStatus& job, absl::Time now,
                       absl::TimeZone zone);

// A fetched variable's elements as doubles; empty for a dtype it does not
// know.
std::vector<double> ValuesAsDoubles(const HostTensor& tensor);

// The `variables JOB` table: NAME, DTYPE, SHAPE, NORM (L2) and the first
// `shown` values, one row per variable, by name.
std::string VariablesTable(const std::map<std::string, HostTensor>& variables,
                           int shown = 6);

// The message as JSON with every field (zeros too), proto field names.
absl::StatusOr<std::string> ProtoToJson(
    const google::protobuf::Message& message);

}  // namespace cohort::ctl
