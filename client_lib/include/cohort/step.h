#pragma once

// The replica API that step libraries are written against: the C++ face of
// tf.distribute's ReplicaContext, mirrored variables and optimizers. Names
// that mirror tf.distribute keep its spelling (all_reduce, merge_call).
//
// A step library is a shared library with three kinds of registered
// functions:
//
//   absl::Status Init(cohort::ReplicaContext& ctx);   // creates variables
//   absl::Status Step(cohort::ReplicaContext& ctx, const cohort::Batch& b);
//   absl::StatusOr<std::unique_ptr<cohort::Dataset>> Data(
//       const cohort::InputContext& input);            // see dataset.h
//   (or a DataStream function, registered with COHORT_REGISTER_STREAM)
//
//   COHORT_REGISTER_INIT("linear_init", Init);
//   COHORT_REGISTER_STEP("linear_step", Step);
//   COHORT_REGISTER_DATASET("linear_data", Data);
//
// The agent runs Init once per replica, makes every variable equal to
// replica 0's (or restores the last checkpoint), then runs Step once per
// replica per step, each replica on its own thread and device. Every replica
// must issue the same collectives in the same order.
//
// Build with: add_library(my_steps MODULE my_steps.cc) linked to
// cohort::step (headers and Abseil only; the runtime lives in the agent).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cohort/dataset.h"
#include "cohort/strategy.h"

// The agent refuses a library built against another version of this header.
#ifndef COHORT_STEP_API_VERSION
#define COHORT_STEP_API_VERSION 4
#endif

namespace cohort {

// Element types: the one vocabulary of the step API, the collectives, the
// checkpoints and the ps (whose wire enum maps onto it in ps_client/dtype.h).
// The 16-bit floats reduce (SUM and MEAN) but hold no variables.
enum class DType { kFloat32, kFloat64, kInt32, kInt64, kFloat16, kBFloat16 };

inline size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
  }
  return 0;
}

// "float32", as checkpoints and messages spell it.
inline const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
  }
  return "unknown";
}

// The DType whose DTypeName is `name`; false when there is none.
inline bool ParseDType(std::string_view name, DType* dtype) {
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kInt32,
                  DType::kInt64, DType::kFloat16, DType::kBFloat16}) {
    if (name == DTypeName(d)) {
      *dtype = d;
      return true;
    }
  }
  return false;
}

inline bool IsFloatDType(DType dtype) {
  return dtype != DType::kInt32 && dtype != DType::kInt64;
}

// tf.distribute.ReduceOp (SUM, MEAN) plus MIN and MAX.
enum class ReduceOp { kSum, kMean, kMin, kMax };

// tf.VariableSynchronization: ON_WRITE variables are mirrored (every replica
// holds the same value, kept equal by applying the same all-reduced update);
// ON_READ variables are per replica and aggregated when read or saved.
// Under CentralStorage an ON_WRITE variable is instead one copy that every
// replica of the agent reads (the same memory) and the optimizer updates
// once: change it only through an optimizer. Under ParameterServer it lives
// on the ps tasks: each closure starts from a fresh pull into the replica's
// host copy, and the optimizer's update is applied by the ps.
enum class VariableSync { kOnWrite, kOnRead };

// tf.VariableAggregation, for ON_READ variables.
enum class Aggregation { kSum, kMean, kOnlyFirstReplica };

// Where a replica runs. Its tensors and variables live there.
struct Device {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int index = 0;           // cpu:N, or the CUDA ordinal
  void* stream = nullptr;  // the replica's cudaStream_t on CUDA devices

  bool is_cuda() const { return kind == Kind::kCuda; }
};

// A view of `count` elements in the replica's device memory. Not owning.
struct Tensor {
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;

  size_t bytes() const { return count * DTypeSize(dtype); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

struct VariableOptions {
  std::string name;  // unique in the job; names it in checkpoints
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  VariableSync sync = VariableSync::kOnWrite;
  Aggregation aggregation = Aggregation::kMean;  // ON_READ only
  // TPUStrategy's experimental_assign_to_logical_device: the logical device
  // of the replica (0..num_logical_devices()-1) whose memory holds the
  // variable and its optimizer slots. The optimizer updates it there.
  int logical_device = 0;
  // tf.distribute's colocate_vars_with: the name of a variable created
  // before this one, whose ps task this one shares whole (a variable and
  // the state that goes with it). Only ParameterServer places variables
  // apart; elsewhere the name is still checked.
  std::string colocate_with;
};

// One replica's copy of a variable, on its device. Owned by the runtime;
// valid for the whole job. Used from its replica's thread only.
class Variable {
 public:
  virtual ~Variable() = default;

  virtual const VariableOptions& options() const = 0;
  virtual Tensor tensor() = 0;

  size_t count() const {
    size_t n = 1;
    for (int64_t d : options().shape) n *= static_cast<size_t>(d);
    return n;
  }
  template <typename T>
  T* data() {
    return tensor().as<T>();
  }
};

// kAdagrad is applied by parameter servers (ParameterServer jobs) only;
// kMomentum by the mirrored strategies only.
enum class OptimizerKind { kSgd, kMomentum, kAdam, kAdagrad };

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  double learning_rate = 0.01;
  double momentum = 0.9;  // kMomentum
  bool nesterov = false;  // kMomentum
  double beta1 = 0.9;     // kAdam
  double beta2 = 0.999;
  double epsilon = 1e-7;
  double initial_accumulator_value = 0.1;  // kAdagrad
  // How the replicas' gradients combine, as tf.distribute's loss reduction:
  // kMean when each replica's loss is a mean over its own batch, kSum when
  // losses are already scaled by the global batch size. Nothing else.
  ReduceOp loss_reduction = ReduceOp::kMean;
};

// Updates a fixed list of ON_WRITE variables. Its slots (momentum, Adam's
// moments and step count) are checkpointed with the variables. Owned by the
// runtime; used from its replica's thread only.
class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // All-reduces `gradients` (with the options' loss_reduction, MEAN by
  // default, over the replicas, one fused collective), then applies the
  // update; gradients[i] matches the i-th variable in
  // count and dtype. Every replica applies the same update to the same
  // values, so mirrored variables stay bitwise equal.
  virtual absl::Status apply_gradients(std::span<const Tensor> gradients) = 0;
};

// Gathered per-replica values given to a merge_call function: values[i][r]
// is replica r's copy of the i-th tensor passed to merge_call, in host
// memory.
struct PerReplica {
  std::vector<std::vector<std::vector<char>>> values;
  template <typename T>
  const T* as(size_t i, int replica) const {
    return reinterpret_cast<const T*>(values[i][replica].data());
  }
};

// The runtime's handle for one replica, as tf.distribute.ReplicaContext.
// Each replica's context is used from that replica's thread only.
class ReplicaContext {
 public:
  virtual ~ReplicaContext() = default;

  virtual int replica_id_in_sync_group() const = 0;
  virtual int num_replicas_in_sync() const = 0;
  // The replica's first logical device: where the step runs and where its
  // collectives' tensors may live.
  virtual const Device& device() const = 0;

  // --- Logical devices (TPUStrategy's model parallelism inside a replica):
  // with JobSpec.logical_devices_per_replica = n, a replica spans n devices
  // of its agent. Variables go on one with VariableOptions::logical_device,
  // scratch tensors with allocate(), and work with run_on().
  virtual int num_logical_devices() const = 0;
  // Logical device k; OUT_OF_RANGE naming k and the count for a bad id, as
  // the seed's ValueError does.
  virtual absl::StatusOr<Device> logical_device(int k) const = 0;
  // Runs `fn` on logical device k, and waits for it: device 0's work on
  // the replica's thread, another's on that device's own executor thread
  // (with it current, on CUDA, and its stream in the Device given). The
  // replica's thread waits meanwhile, so `fn` may use this context as the
  // step does. Returns fn's status; OUT_OF_RANGE for a bad k.
  virtual absl::Status run_on(
      int k, const std::function<absl::Status(const Device&)>& fn) = 0;
  // `count` zeroed elements in logical device k's memory, owned by the
  // replica for the rest of the job. OUT_OF_RANGE for a bad k.
  virtual absl::StatusOr<Tensor> allocate(int k, size_t count, DType dtype) = 0;

  // 0-based: the step being run; for a call scheduled from the client
  // (Client::Schedule), the call's id.
  virtual int64_t step() const = 0;
  virtual int64_t total_steps() const = 0;  // the job's steps
  virtual int64_t global_batch_size() const = 0;
  virtual uint64_t seed() const = 0;
  virtual const std::string& config_json() const = 0;
  // The task running this replica, as TF_CONFIG names it ("chief",
  // "worker") and its index, and the job's strategy: the cluster
  // resolver's task_type and task_id, and tf.distribute.get_strategy().
  virtual const std::string& task_type() const = 0;
  virtual int task_id() const = 0;
  virtual StrategyKind strategy() const = 0;
  // The arguments of a call scheduled from the client (ClusterCoordinator's
  // schedule(fn, args)); empty for a job's own steps.
  virtual std::span<const double> args() const = 0;

  // --- Variables and optimizers: create them in the init function, in the
  // same order on every replica. `initial` is host memory holding count()
  // elements of the variable's dtype, or null for zeros. Unless a
  // checkpoint is restored, every variable, ON_READ ones too, then starts
  // from replica 0's value on every replica.
  virtual absl::StatusOr<Variable*> create_variable(
      const VariableOptions& options, const void* initial) = 0;
  virtual Variable* find_variable(std::string_view name) = 0;
  virtual absl::StatusOr<Optimizer*> create_optimizer(
      const OptimizerOptions& options, std::vector<Variable*> variables) = 0;
  // The value of `variable` as a checkpoint would hold it, into host memory
  // (count() elements): an ON_WRITE variable's own copy, an ON_READ
  // variable's aggregate. Collective for ON_READ: every replica calls it.
  virtual absl::Status read_value(Variable& variable, void* host_out) = 0;

  // --- Collectives over every replica of the job, on device memory.
  // In place, several tensors in one fused operation.
  virtual absl::Status all_reduce(ReduceOp op,
                                  std::span<const Tensor> tensors) = 0;
  absl::Status all_reduce(ReduceOp op, Tensor tensor) {
    return all_reduce(op, std::span<const Tensor>(&tensor, 1));
  }
  // Replica `root`'s values into every replica's `tensor`.
  virtual absl::Status broadcast(Tensor tensor, int root) = 0;
  // `output` holds num_replicas_in_sync() * input.count elements, replica
  // r's block at r * input.count.
  virtual absl::Status all_gather(Tensor input, Tensor output) = 0;
  // strategy.reduce: reduces `values` (host memory) over every replica, in
  // place; every replica gets the same bits.
  virtual absl::Status reduce(ReduceOp op, std::span<double> values) = 0;
  absl::StatusOr<double> reduce(ReduceOp op, double value) {
    absl::Status status = reduce(op, std::span<double>(&value, 1));
    if (!status.ok()) return status;
    return value;
  }
  // Runs `fn` in cross-replica context, once in the whole job: on replica 0,
  // after every replica reached the call, with every replica's copy of
  // `tensors`. What it writes to `result` is handed back to every replica
  // (merge_call's return value); so is its error.
  virtual absl::StatusOr<std::string> merge_call(
      const std::function<absl::Status(const PerReplica&, std::string* result)>&
          fn,
      std::span<const Tensor> tensors) = 0;
  // The same, for a function that returns only a status.
  absl::Status merge_call(
      const std::function<absl::Status(const PerReplica&)>& fn,
      std::span<const Tensor> tensors) {
    return merge_call([&fn](const PerReplica& values,
                            std::string*) { return fn(values); },
                      tensors)
        .status();
  }

  // A metric for this step (loss, accuracy); replica 0's values are shown
  // by `cohortctl job`.
  virtual void report(std::string_view metric, double value) = 0;
  // A metric reduced over every replica at the end of the step, as
  // strategy.reduce(op, per_replica_value) would: `cohortctl job` and the
  // job's early-stopping rule see the reduced value. One fused collective
  // per step carries them all, so every replica must report the same
  // reduced metrics each step.
  virtual void report(std::string_view metric, double value, ReduceOp op) = 0;
  // Ends training after this step, as Keras' model.stop_training: any one
  // replica may call it; every replica finishes the step, the final
  // checkpoint is written, and the job ends SUCCEEDED at this step with
  // `reason`.
  virtual void stop_training(std::string_view reason) = 0;
  // tf.distribute.get_loss_reduction(): the loss_reduction of the last
  // apply_gradients on this replica; kMean before any.
  virtual ReduceOp get_loss_reduction() const = 0;

  // --- The library's own state for this replica (its optimizer, scratch
  // buffers): set it in the init function, read it in the step function.
  // The context owns it and destroys it with the replica.
  virtual void set_user_state(std::shared_ptr<void> state) = 0;
  virtual void* user_state() const = 0;
  template <typename T>
  T* state() const {
    return static_cast<T*>(user_state());
  }
};

using InitFn = absl::Status (*)(ReplicaContext&);
using StepFn = absl::Status (*)(ReplicaContext&, const Batch&);
using DatasetFn =
    absl::StatusOr<std::unique_ptr<Dataset>> (*)(const InputContext&);
using StreamFn =
    absl::StatusOr<std::unique_ptr<DataStream>> (*)(const InputContext&);

namespace internal {

// The functions a library registered, by name. One per library: hidden
// visibility keeps each library's registry its own.
struct Registry {
  std::map<std::string, InitFn> inits;
  std::map<std::string, StepFn> steps;
  std::map<std::string, DatasetFn> datasets;
  std::map<std::string, StreamFn> streams;
};

__attribute__((visibility("hidden"))) inline Registry& LibraryRegistry() {
  static Registry registry;
  return registry;
}

template <typename Fn>
struct Registrar {
  Registrar(std::map<std::string, Fn>& table, const char* name, Fn fn) {
    table.emplace(name, fn);
  }
};

}  // namespace internal
}  // namespace cohort

#define COHORT_INTERNAL_CONCAT2(a, b) a##b
#define COHORT_INTERNAL_CONCAT(a, b) COHORT_INTERNAL_CONCAT2(a, b)
#define COHORT_INTERNAL_REGISTER(table, type, name, fn)                        \
  static ::cohort::internal::Registrar<::cohort::type> COHORT_INTERNAL_CONCAT( \
      cohort_registrar_, __COUNTER__)(                                         \
      ::cohort::internal::LibraryRegistry().table, name, fn)

#define COHORT_REGISTER_INIT(name, fn) \
  COHORT_INTERNAL_REGISTER(inits, InitFn, name, fn)
#define COHORT_REGISTER_STEP(name, fn) \
  COHORT_INTERNAL_REGISTER(steps, StepFn, name, fn)
#define COHORT_REGISTER_DATASET(name, fn) \
  COHORT_INTERNAL_REGISTER(datasets, DatasetFn, name, fn)
#define COHORT_REGISTER_STREAM(name, fn) \
  COHORT_INTERNAL_REGISTER(streams, StreamFn, name, fn)

// The library's entry points, looked up by the agent with dlsym. The version
// is a plain C call, checked before anything else is touched. Weak, so that
// every translation unit may define them; the agent's own code, which
// includes this header too, defines COHORT_STEP_RUNTIME and omits them.
#ifndef COHORT_STEP_RUNTIME
extern "C" __attribute__((weak, visibility("default"))) int
cohort_step_api_version() {
  return COHORT_STEP_API_VERSION;
}
extern "C" __attribute__((weak, visibility("default")))
const ::cohort::internal::Registry*
cohort_step_registry() {
  return &::cohort::internal::LibraryRegistry();
}
#endif
