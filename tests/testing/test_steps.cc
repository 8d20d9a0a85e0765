// Step functions for the job tests: ones that fail or crash on purpose, the
// near-empty steps that measure the runtime's own per-step cost, and ones
// that drive the training loop from the step (reductions, merge_call
// results, stop_training).

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cohort/step.h"
#include "nlohmann/json.hpp"

namespace {

// Fails at step 3, on every replica.
absl::Status FailStep(cohort::ReplicaContext& ctx, const cohort::Batch&) {
  if (ctx.step() == 3) {
    return absl::InternalError(
        absl::StrCat("the loss became NaN at step ", ctx.step()));
  }
  return absl::OkStatus();
}

// Reports a metric, then fails at step 3, both in text that is not UTF-8
// (as raw bytes of a corrupt input record might be).
absl::Status GarbledStep(cohort::ReplicaContext& ctx, const cohort::Batch&) {
  ctx.report("acc\xc3", 1.0);
  if (ctx.step() == 3) {
    return absl::DataLossError("record header \xff\xfe at step 3");
  }
  return absl::OkStatus();
}

// Replica 1 crashes its agent's process at step 3; the others wait for it in
// a collective.
absl::Status CrashStep(cohort::ReplicaContext& ctx, const cohort::Batch&) {
  if (ctx.step() == 3 &&
      ctx.replica_id_in_sync_group() == ctx.num_replicas_in_sync() - 1) {
    std::raise(SIGSEGV);
  }
  double x = 1;
  return ctx.all_reduce(cohort::ReduceOp::kSum,
                        cohort::Tensor{&x, 1, cohort::DType::kFloat64});
}

// Replica N-1 throws at step 3, as a library that reports an error by an
// exception instead of a status might.
absl::Status ThrowStep(cohort::ReplicaContext& ctx, const cohort::Batch&) {
  if (ctx.step() == 3 &&
      ctx.replica_id_in_sync_group() == ctx.num_replicas_in_sync() - 1) {
    throw std::runtime_error("shape mismatch at step 3");
  }
  double x = 1;
  return ctx.all_reduce(cohort::ReduceOp::kSum,
                        cohort::Tensor{&x, 1, cohort::DType::kFloat64});
}

// Nothing at all: the cost of the step loop itself.
absl::Status EmptyStep(cohort::ReplicaContext&, const cohort::Batch&) {
  return absl::OkStatus();
}

// One 1-element all-reduce: the cost of a synchronous step.
absl::Status SyncStep(cohort::ReplicaContext& ctx, const cohort::Batch&) {
  float x = 1;
  return ctx.all_reduce(cohort::ReduceOp::kSum,
                        cohort::Tensor{&x, 1, cohort::DType::kFloat32});
}

// What a step sees of where it runs, and of the other replicas: the runtime
// sums "replicas" and "on_chief" over every replica; merge_call's result
// must reach every replica; at step 4 the last replica ends training.
absl::Status ControlStep(cohort::ReplicaContext& ctx, const cohort::Batch&) {
  const int me = ctx.replica_id_in_sync_group();
  const int n = ctx.num_replicas_in_sync();
  ctx.report("replicas", 1, cohort::ReduceOp::kSum);
  ctx.report("on_chief", ctx.task_type() == "chief" ? 1 : 0,
             cohort::ReduceOp::kSum);
  ctx.report("task_id_max", ctx.task_id(), cohort::ReduceOp::kMax);
  if (ctx.strategy() != cohort::StrategyKind::kMultiWorkerMirrored) {
    return absl::FailedPreconditionError(absl::StrCat(
        "control_step runs under MultiWorkerMirroredStrategy; this is ",
        cohort::StrategyName(ctx.strategy())));
  }
  int32_t id = me;
  absl::StatusOr<std::string> ids = ctx.merge_call(
      [n](const cohort::PerReplica& values, std::string* result) {
        for (int r = 0; r < n; ++r) {
          absl::StrAppend(result, r > 0 ? "," : "", *values.as<int32_t>(0, r));
        }
        return absl::OkStatus();
      },
      std::vector<cohort::Tensor>{{&id, 1, cohort::DType::kInt32}});
  if (!ids.ok()) return ids.status();
  std::string expected;
  for (int r = 0; r < n; ++r) absl::StrAppend(&expected, r > 0 ? "," : "", r);
  if (*ids != expected) {
    return absl::InternalError(absl::StrCat("merge_call handed replica ", me,
                                            " \"", *ids, "\", not \"", expected,
                                            "\""));
  }
  if (ctx.step() == 4 && me == n - 1) ctx.stop_training("it has seen enough");
  return absl::OkStatus();
}

// ParameterServer: the closure for step 20 and later end training.
absl::Status StopPsStep(cohort::ReplicaContext& ctx, const cohort::Batch&) {
  ctx.report("closure", static_cast<double>(ctx.step()));
  if (ctx.step() >= 20) ctx.stop_training("closure 20 was reached");
  return absl::OkStatus();
}

// ParameterServer: a worker's first call leaves a marker file in the job
// config's "park_dir" and parks (until its process is killed; 10 minutes at
// most); later calls, those of a restarted worker whose marker exists, and
// every call elsewhere return at once. A test can then kill a worker that
// certainly holds a call.
absl::Status ParkOnWorkerStep(cohort::ReplicaContext& ctx,
                              const cohort::Batch&) {
  if (ctx.task_type() != "worker") return absl::OkStatus();
  const nlohmann::json config =
      nlohmann::json::parse(ctx.config_json(), nullptr, false);
  if (!config.is_object() || !config.contains("park_dir") ||
      !config["park_dir"].is_string()) {
    return absl::InvalidArgumentError(
        "park_on_worker_step needs a string \"park_dir\" in the job's config");
  }
  const std::string marker = absl::StrCat(config["park_dir"].get<std::string>(),
                                          "/worker-", ctx.task_id());
  if (std::filesystem::exists(marker)) return absl::OkStatus();
  std::ofstream(marker) << ctx.step() << "\n";
  std::this_thread::sleep_for(std::chrono::minutes(10));
  return absl::OkStatus();
}

// A table split over the ps tasks, and the variable that must sit with it
// (colocate_vars_with), then one more that takes the next turn.
absl::Status ColocatedInit(cohort::ReplicaContext& ctx) {
  for (const cohort::VariableOptions& options :
       {cohort::VariableOptions{.name = "table", .shape = {8, 4}},
        cohort::VariableOptions{
            .name = "table_norm", .shape = {4}, .colocate_with = "table"},
        cohort::VariableOptions{.name = "other", .shape = {6}}}) {
    absl::StatusOr<cohort::Variable*> v = ctx.create_variable(options, nullptr);
    if (!v.ok()) return v.status();
  }
  return absl::OkStatus();
}

// A data set whose elements cannot be read: Get throws, as a reader of a
// torn file written by a library that reports errors by exceptions might.
class TornDataset final : public cohort::Dataset {
 public:
  int64_t size() const override { return 16; }
  std::string_view Get(int64_t index) const override {
    throw std::runtime_error(absl::StrCat("record ", index, " is torn"));
  }
  cohort::DatasetOptions options() const override { return {}; }
};

absl::StatusOr<std::unique_ptr<cohort::Dataset>> TornData(
    const cohort::InputContext&) {
  return std::make_unique<TornDataset>();
}

// distribute_datasets_from_function with the user's own batching: 6
// batches, each one replica's whole batch of per_replica_batch_size int32
// values, marked with the input pipeline that made it.
absl::StatusOr<std::unique_ptr<cohort::Dataset>> BatchedData(
    const cohort::InputContext& input) {
  constexpr int64_t kGlobalBatch = 8;  // the job's, which the test submits
  const int64_t per = input.per_replica_batch_size(kGlobalBatch);
  std::vector<std::string> batches;
  for (int b = 0; b < 6; ++b) {
    std::vector<int32_t> values = {input.input_pipeline_id(),
                                   static_cast<int32_t>(per)};
    values.resize(static_cast<size_t>(2 + per), b);
    batches.emplace_back(reinterpret_cast<const char*>(values.data()),
                         values.size() * sizeof(int32_t));
  }
  return std::make_unique<cohort::InMemoryDataset>(
      std::move(batches), cohort::DatasetOptions{.per_replica_batches = true});
}

// Checks that its batch is one whole per-replica batch, unsplit, and sums
// over the replicas the examples and the pipelines that made them.
absl::Status BatchedStep(cohort::ReplicaContext& ctx,
                         const cohort::Batch& batch) {
  const int64_t per = ctx.global_batch_size() / ctx.num_replicas_in_sync();
  if (batch.size() != 1) {
    return absl::InternalError(
        absl::StrCat("a user-batched step got ", batch.size(), " elements"));
  }
  const std::span<const int32_t> values = batch.As<int32_t>(0);
  if (values.size() != static_cast<size_t>(2 + per) || values[1] != per) {
    return absl::InternalError(absl::StrCat("a user batch of ", values.size(),
                                            " values; expected ", 2 + per));
  }
  ctx.report("examples", static_cast<double>(per), cohort::ReduceOp::kSum);
  ctx.report("pipelines", values[0], cohort::ReduceOp::kSum);
  return absl::OkStatus();
}

// 64 int32 elements, 0 to 63, in order.
absl::StatusOr<std::unique_ptr<cohort::Dataset>> CountingData(
    const cohort::InputContext&) {
  std::vector<std::string> elements;
  for (int32_t i = 0; i < 64; ++i) {
    elements.emplace_back(reinterpret_cast<const char*>(&i), sizeof(i));
  }
  return std::make_unique<cohort::InMemoryDataset>(std::move(elements),
                                                   cohort::DatasetOptions{});
}

// Over counting_data under ParameterServer: fails unless closure k's batch
// is global batch k of the data set's one order, whichever worker runs it.
absl::Status CountingStep(cohort::ReplicaContext& ctx,
                          const cohort::Batch& batch) {
  const int64_t size = static_cast<int64_t>(batch.size());
  for (int64_t i = 0; i < size; ++i) {
    const int64_t want = (ctx.step() * size + i) % 64;
    const int32_t got = batch.As<int32_t>(static_cast<size_t>(i))[0];
    if (got != want) {
      return absl::InternalError(
          absl::StrCat("closure ", ctx.step(), " got element ", got, " at ", i,
                       "; global batch ", ctx.step(), " has element ", want));
    }
  }
  ctx.report("examples", static_cast<double>(size));
  return absl::OkStatus();
}

// An eval function over batched_data: reports which of its batches it got,
// so that a pass over all of them averages 2.5.
absl::Status BatchedEval(cohort::ReplicaContext& ctx,
                         const cohort::Batch& batch) {
  if (batch.size() != 1) {
    return absl::InternalError(
        absl::StrCat("a user-batched eval got ", batch.size(), " elements"));
  }
  const std::span<const int32_t> values = batch.As<int32_t>(0);
  if (values.size() < 3) {
    return absl::InternalError("a user batch without examples");
  }
  ctx.report("batch", values[2]);
  return absl::OkStatus();
}

}  // namespace

COHORT_REGISTER_STEP("batched_eval", BatchedEval);
COHORT_REGISTER_DATASET("batched_data", BatchedData);
COHORT_REGISTER_DATASET("torn_data", TornData);
COHORT_REGISTER_DATASET("counting_data", CountingData);
COHORT_REGISTER_STEP("counting_step", CountingStep);
COHORT_REGISTER_STEP("batched_step", BatchedStep);
COHORT_REGISTER_INIT("colocated_init", ColocatedInit);
COHORT_REGISTER_STEP("control_step", ControlStep);
COHORT_REGISTER_STEP("stop_ps_step", StopPsStep);
COHORT_REGISTER_STEP("park_on_worker_step", ParkOnWorkerStep);
COHORT_REGISTER_STEP("fail_step", FailStep);
COHORT_REGISTER_STEP("garbled_step", GarbledStep);
COHORT_REGISTER_STEP("crash_step", CrashStep);
COHORT_REGISTER_STEP("throw_step", ThrowStep);
COHORT_REGISTER_STEP("empty_step", EmptyStep);
COHORT_REGISTER_STEP("sync_step", SyncStep);
