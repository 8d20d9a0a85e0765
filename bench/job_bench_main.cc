// cohort-job-bench: throughput of whole jobs on a running cluster.
//
//   cohort-job-bench --coordinator=127.0.0.1:7070 --mlp_data=/tmp/spirals
//
// Runs, one after the other, the MLP example with 1, 2 and 4 replicas and
// the runtime's near-empty steps (no work at all, and one 4-byte
// all-reduce) on 1 agent x 2 devices and 2 agents x 1 device. Prints one
// line per run: steps/s, and µs/step for the empty steps. The rate is
// measured over the steps between the first and the last progress seen, so
// start-up (loading, rendezvous) is left out; progress is pushed at most
// every 100 ms, so the default step counts keep each run seconds long.

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/sizes.h"
#include "cohort/client.h"
#include "common/file_util.h"
#include "common/flags.h"

ABSL_FLAG(std::string, coordinator, "127.0.0.1:7070", "The cluster.");
ABSL_FLAG(std::string, mlp_data, "",
          "Record files of cohort-example-mlp-data; empty: skip the MLP.");
ABSL_FLAG(int64_t, mlp_steps, 6000, "Steps of each MLP run.");
ABSL_FLAG(int64_t, empty_steps, 200000,
          "Steps of each empty_step and sync_step run.");
ABSL_FLAG(std::string, format, "table", "table, or csv.");
ABSL_FLAG(int64_t, trace, 0,
          "Trace each run's first N steps (JobSpec::trace_steps), to "
          "measure what tracing costs; 0: off, as by default.");

namespace cohort {
namespace {

constexpr char kUsage[] =
    "job throughput on a running Cohort cluster (agents with >= 2 CPU "
    "devices).\n\n  cohort-job-bench --coordinator=HOST:PORT "
    "--mlp_data=DIR";

struct Measured {
  double steps_per_second = 0;
  int64_t steps = 0;
};

// Runs `spec` to the end, timing the steps after the first progress report.
absl::StatusOr<Measured> Measure(const Client& client, const JobSpec& spec) {
  absl::StatusOr<std::string> id = client.SubmitJob(spec);
  if (!id.ok()) return id.status();
  int64_t first_step = -1, last_step = 0;
  absl::Time first_time, last_time;
  absl::StatusOr<v1::JobStatus> final_status =
      client.WatchJob(*id, [&](const v1::JobStatus& status) {
        if (status.step() <= 0) return true;
        const absl::Time now = absl::Now();
        if (first_step < 0) {
          first_step = status.step();
          first_time = now;
        }
        last_step = status.step();
        last_time = now;
        return true;
      });
  if (!final_status.ok()) return final_status.status();
  if (final_status->state() != v1::JOB_SUCCEEDED) {
    return absl::InternalError(absl::StrCat(
        "job ", *id, " ended ", v1::JobState_Name(final_status->state()), ": ",
        final_status->error()));
  }
  if (last_step <= first_step || first_step < 0) {
    return absl::InternalError(
        "too few progress reports to time; raise the step count");
  }
  return Measured{
      .steps_per_second = static_cast<double>(last_step - first_step) /
                          absl::ToDoubleSeconds(last_time - first_time),
      .steps = last_step - first_step};
}

int Main(int argc, char** argv) {
  ParseFlagsOnlyCommandLine(argc, argv, kUsage);
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(absl::GetFlag(FLAGS_coordinator));
  if (!client.ok()) {
    std::fprintf(stderr, "cohort-job-bench: %s\n",
                 client.status().ToString().c_str());
    return 1;
  }
  // One error when the cluster is not there, not one per run.
  absl::Status ready = (*client)->GetClusterState().status();
  if (ready.ok()) ready = (*client)->WaitForReady(absl::Minutes(1)).status();
  if (!ready.ok()) {
    std::fprintf(stderr,
                 "cohort-job-bench: the cluster at %s is not ready: %s\n",
                 (*client)->address().c_str(), ready.ToString().c_str());
    return 1;
  }
  const std::string lib = ExecutableDirectory() + "/../lib/";
  const std::string tests = ExecutableDirectory() + "/../tests/";
  const absl::StatusOr<bool> format =
      bench::ParseCsvFormat(absl::GetFlag(FLAGS_format));
  if (!format.ok()) ExitWithConfigError(format.status());
  const bool csv = *format;
  if (csv) std::printf("run,replicas,topology,steps_per_second,us_per_step\n");
  auto print = [&](const std::string& run, int replicas,
                   const std::string& topology, const Measured& m) {
    if (csv) {
      std::printf("%s,%d,%s,%.1f,%.1f\n", run.c_str(), replicas,
                  topology.c_str(), m.steps_per_second,
                  1e6 / m.steps_per_second);
    } else {
      std::printf("%-12s %2d replicas  %-22s %10.1f steps/s  %9.1f us/step\n",
                  run.c_str(), replicas, topology.c_str(), m.steps_per_second,
                  1e6 / m.steps_per_second);
    }
    std::fflush(stdout);
  };

  struct Topology {
    StrategyKind strategy;
    int devices;
    int replicas;
    std::string name;
  };
  int failures = 0;
  auto run = [&](const std::string& name, JobSpec spec, const Topology& t) {
    spec.strategy = t.strategy;
    spec.devices_per_agent = t.devices;
    spec.trace_steps = absl::GetFlag(FLAGS_trace);
    absl::StatusOr<Measured> m = Measure(**client, spec);
    if (!m.ok()) {
      std::fprintf(stderr, "%s on %s: %s\n", name.c_str(), t.name.c_str(),
                   m.status().ToString().c_str());
      ++failures;
      return;
    }
    print(name, t.replicas, t.name, *m);
  };

  const std::string data = absl::GetFlag(FLAGS_mlp_data);
  if (!data.empty()) {
    const JobSpec mlp{
        .name = "bench-mlp",
        .library_path = lib + "libcohort_example_mlp.so",
        .init_fn = "mlp_init",
        .step_fn = "mlp_step",
        .dataset_fn = "mlp_data",
        .steps = absl::GetFlag(FLAGS_mlp_steps),
        .global_batch_size = 128,
        .seed = 1,
        .config_json = absl::StrCat(R"({"data_dir": ")", data,
                                    R"(", "eval_every": 1000000})")};
    for (const Topology& t :
         {Topology{StrategyKind::kOneDevice, 0, 1, "1 agent x 1 device"},
          Topology{StrategyKind::kMirrored, 2, 2, "1 agent x 2 devices"},
          Topology{StrategyKind::kMultiWorkerMirrored, 2, 4,
                   "2 agents x 2 devices"}}) {
      run("mlp", mlp, t);
    }
  }
  for (const char* step : {"empty_step", "sync_step"}) {
    const JobSpec empty{.name = std::string("bench-") + step,
                        .library_path = tests + "libcohort_test_steps.so",
                        .step_fn = step,
                        .steps = absl::GetFlag(FLAGS_empty_steps),
                        .global_batch_size = 2};
    for (const Topology& t :
         {Topology{StrategyKind::kMirrored, 2, 2, "1 agent x 2 devices"},
          Topology{StrategyKind::kMultiWorkerMirrored, 1, 2,
                   "2 agents x 1 device"}}) {
      run(step, empty, t);
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) { return cohort::Main(argc, argv); }
