// cohort-example-ps-schedule: a user program that owns the training loop of
// a ParameterServer job, as a TF program drives ParameterServerStrategy
// through a ClusterCoordinator. It submits the MLP example with
// ps.schedule_from_client, schedules one training call per step (the n-th
// takes global batch n of the dataset), schedules a held-out evaluation
// every --eval_every steps and prints each result as it lands, joins, reads
// the trained variables from the ps tasks, and finishes the job.

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <thread>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "cohort/client.h"
#include "cohort/cluster_coordinator.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/signals.h"

ABSL_FLAG(std::string, coordinator, "",
          "HOST:PORT of the coordinator; default $COHORT_COORDINATOR.");
ABSL_FLAG(std::string, data_dir, "",
          "Where cohort-example-mlp-data wrote the training files. Required.");
ABSL_FLAG(std::string, library, "",
          "The MLP step library; default: ../lib/libcohort_example_mlp.so "
          "beside this binary.");
ABSL_FLAG(int64_t, steps, 600, "Training calls to schedule.");
ABSL_FLAG(int64_t, eval_every, 100,
          "Schedule a held-out evaluation after every this many steps.");
ABSL_FLAG(int64_t, global_batch, 128, "Examples per training call.");
ABSL_FLAG(int, max_inflight, 1, "Calls each worker runs at once.");
ABSL_FLAG(double, min_accuracy, 0,
          "Exit 1 when the last held-out accuracy is below this.");
ABSL_FLAG(std::string, auth_token_file, "",
          "Bearer token file, for a cluster that requires one.");

namespace {

constexpr char kUsage[] =
    "trains the MLP example under ParameterServer from a program that owns\n"
    "the loop: it schedules each training step and a held-out evaluation\n"
    "every N steps onto the workers, as tf.distribute's ClusterCoordinator.\n"
    "\n"
    "  build/bin/cohort-example-mlp-data --out=/tmp/spirals\n"
    "  build/bin/cohort-example-ps-schedule --coordinator=127.0.0.1:7070 \\\n"
    "      --data_dir=/tmp/spirals [--steps=600] [--eval_every=100]\n"
    "\n"
    "The cluster needs ps tasks (the default local cluster has one).";

struct PendingEval {
  int64_t step;
  cohort::RemoteValue value;
};

// Prints an evaluation; returns its accuracy.
double PrintEval(int64_t step, const std::map<std::string, double>& metrics) {
  const auto it = metrics.find("accuracy");
  const double accuracy = it == metrics.end() ? 0 : it->second;
  std::printf("step %5lld: held-out accuracy %.4f\n",
              static_cast<long long>(step), accuracy);
  std::fflush(stdout);
  return accuracy;
}

// Ctrl-C or SIGTERM (blocked in main, for this thread alone to take) ends
// the program at once, whatever it waits on; the job it guards is cancelled
// first, or it would hold the cluster until the coordinator gives up on its
// client. Thread-safe.
class InterruptHandler {
 public:
  InterruptHandler() : thread_([this] { Run(); }) {}
  ~InterruptHandler() {
    waiter_.RequestStop("the program ended");
    thread_.join();
  }
  InterruptHandler(const InterruptHandler&) = delete;
  InterruptHandler& operator=(const InterruptHandler&) = delete;

  // The job to cancel on an interrupt. `client` must outlive this handler.
  void Guard(const cohort::Client* client, const std::string& job_id) {
    absl::MutexLock lock(&mu_);
    client_ = client;
    job_id_ = job_id;
  }

 private:
  void Run() {
    if (waiter_.Wait() == 0) return;  // RequestStop: no interrupt came
    absl::MutexLock lock(&mu_);
    if (client_ != nullptr) {
      std::fprintf(stderr,
                   "cohort-example-ps-schedule: interrupted; cancelling job "
                   "%s\n",
                   job_id_.c_str());
      (void)client_->CancelJob(job_id_);
    } else {
      std::fprintf(stderr, "cohort-example-ps-schedule: interrupted\n");
    }
    std::_Exit(1);
  }

  absl::Mutex mu_;
  const cohort::Client* client_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string job_id_ ABSL_GUARDED_BY(mu_);
  cohort::TerminationWaiter waiter_;
  std::thread thread_;  // last: it starts once the members above exist
};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "cohort-example-ps-schedule: %s\n",
               status.ToString().c_str());
  return 1;
}

int Run() {
  std::string address = absl::GetFlag(FLAGS_coordinator);
  if (address.empty() && std::getenv("COHORT_COORDINATOR") != nullptr) {
    address = std::getenv("COHORT_COORDINATOR");
  }
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  const int64_t eval_every = absl::GetFlag(FLAGS_eval_every);
  if (address.empty() || data_dir.empty()) {
    cohort::ExitWithConfigError(absl::InvalidArgumentError(
        "--coordinator (or $COHORT_COORDINATOR) and --data_dir are required "
        "(see --help)"));
  }
  if (steps < 1 || eval_every < 1) {
    cohort::ExitWithConfigError(absl::InvalidArgumentError(
        "--steps and --eval_every must be at least 1"));
  }
  std::string library = absl::GetFlag(FLAGS_library);
  if (library.empty()) {
    library =
        cohort::ExecutableDirectory() + "/../lib/libcohort_example_mlp.so";
  }

  absl::StatusOr<std::unique_ptr<cohort::Client>> client =
      cohort::Client::Connect(
          address, {.auth_token_file = absl::GetFlag(FLAGS_auth_token_file)});
  if (!client.ok()) return Fail(client.status());
  // After `client`, so that it ends before the client does.
  InterruptHandler interrupts;
  cohort::JobSpec spec{
      .name = "mlp-scheduled",
      .strategy = cohort::StrategyKind::kParameterServer,
      .library_path = library,
      .init_fn = "mlp_init",
      .dataset_fn = "mlp_data",
      .global_batch_size = absl::GetFlag(FLAGS_global_batch),
      .seed = 3,
      // The held-out evaluation is this program's to schedule.
      .config_json = absl::StrCat(R"({"data_dir": ")", data_dir,
                                  R"(", "eval_every": 1000000000})")};
  spec.ps.schedule_from_client = true;
  spec.ps.max_inflight = absl::GetFlag(FLAGS_max_inflight);
  absl::StatusOr<std::string> id = (*client)->SubmitJob(spec);
  if (!id.ok()) return Fail(id.status());
  // Until Finish, the job waits for this program's calls: on any failure
  // here, or an interrupt, it is cancelled, so that it does not hold the
  // cluster (one job runs at a time) until the coordinator gives up on its
  // client.
  interrupts.Guard(client->get(), *id);
  absl::Cleanup cancel = [&] {
    if (absl::StatusOr<cohort::v1::JobStatus> cancelled =
            (*client)->CancelJob(*id);
        !cancelled.ok()) {
      std::fprintf(stderr,
                   "cohort-example-ps-schedule: cancelling job %s: %s\n",
                   id->c_str(), cancelled.status().ToString().c_str());
    }
  };
  std::printf(
      "job %s: scheduling %lld training calls, a held-out "
      "evaluation every %lld\n",
      id->c_str(), static_cast<long long>(steps),
      static_cast<long long>(eval_every));
  std::fflush(stdout);

  cohort::ClusterCoordinator coordinator(client->get(), *id);
  std::deque<PendingEval> evals;
  double accuracy = 0;
  for (int64_t step = 1; step <= steps; ++step) {
    absl::StatusOr<cohort::RemoteValue> call =
        coordinator.Schedule("mlp_step", {}, {.takes_batch = true});
    if (!call.ok()) return Fail(call.status());
    if (step % eval_every == 0 || step == steps) {
      absl::StatusOr<cohort::RemoteValue> eval =
          coordinator.Schedule("mlp_held_out", {static_cast<double>(step)});
      if (!eval.ok()) return Fail(eval.status());
      evals.push_back({step, *eval});
    }
    // Results print as they land, without holding up the schedule.
    while (!evals.empty()) {
      absl::StatusOr<cohort::v1::CallStatus> polled =
          evals.front().value.Poll();
      if (!polled.ok()) return Fail(polled.status());
      if (polled->state() != cohort::v1::CallStatus::DONE &&
          polled->state() != cohort::v1::CallStatus::FAILED) {
        break;
      }
      absl::StatusOr<std::map<std::string, double>> metrics =
          evals.front().value.Fetch(absl::ZeroDuration());
      if (!metrics.ok()) return Fail(metrics.status());
      accuracy = PrintEval(evals.front().step, *metrics);
      evals.pop_front();
    }
  }
  if (absl::Status joined = coordinator.Join(absl::Minutes(10)); !joined.ok()) {
    return Fail(joined);
  }
  for (const PendingEval& eval : evals) {
    absl::StatusOr<std::map<std::string, double>> metrics =
        eval.value.Fetch(absl::Minutes(1));
    if (!metrics.ok()) return Fail(metrics.status());
    accuracy = PrintEval(eval.step, *metrics);
  }

  absl::StatusOr<std::map<std::string, cohort::HostTensor>> variables =
      coordinator.FetchVariables();
  if (!variables.ok()) return Fail(variables.status());
  for (const auto& [name, tensor] : *variables) {
    std::printf("variable %-16s %s [%s]\n", name.c_str(), tensor.dtype.c_str(),
                absl::StrJoin(tensor.shape, ",").c_str());
  }
  if (absl::Status finished = coordinator.Finish(); !finished.ok()) {
    return Fail(finished);
  }
  std::move(cancel).Cancel();
  absl::StatusOr<cohort::v1::JobStatus> final_status = (*client)->WatchJob(
      *id, [](const cohort::v1::JobStatus&) { return true; });
  if (!final_status.ok()) return Fail(final_status.status());
  std::printf("job %s %s after %lld calls\n", id->c_str(),
              cohort::v1::JobState_Name(final_status->state()).c_str(),
              static_cast<long long>(final_status->step()));
  if (final_status->state() != cohort::v1::JOB_SUCCEEDED) return 1;
  if (accuracy < absl::GetFlag(FLAGS_min_accuracy)) {
    std::fprintf(stderr,
                 "cohort-example-ps-schedule: held-out accuracy %.4f is below "
                 "--min_accuracy=%.4f\n",
                 accuracy, absl::GetFlag(FLAGS_min_accuracy));
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args =
      cohort::ParseCommandLine(argc, argv, kUsage);
  if (!args.empty()) {
    cohort::ExitWithConfigError(absl::InvalidArgumentError(
        "unexpected argument \"" + args[0] + "\" (see --help)"));
  }
  // Before any thread starts: the InterruptHandler's alone takes them.
  cohort::BlockTerminationSignals();
  return Run();
}
