#include "worker_agent/ps_variable_client.h"

#include "absl/strings/str_cat.h"
#include "ps_client/dtype.h"

namespace cohort::agent {
namespace {

constexpr absl::Duration kDefaultRecovery = absl::Seconds(60);

v1::PsOptimizer ToPs(const OptimizerOptions& o) {
  v1::PsOptimizer ps;
  switch (o.kind) {
    case OptimizerKind::kSgd:
      ps.set_kind(v1::PsOptimizer::SGD);
      break;
    case OptimizerKind::kAdagrad:
      ps.set_kind(v1::PsOptimizer::ADAGRAD);
      break;
    case OptimizerKind::kAdam:
      ps.set_kind(v1::PsOptimizer::ADAM);
      break;
    case OptimizerKind::kMomentum:  // refused by create_optimizer
      break;
  }
  ps.set_learning_rate(o.learning_rate);
  ps.set_beta1(o.beta1);
  ps.set_beta2(o.beta2);
  ps.set_epsilon(o.epsilon);
  ps.set_initial_accumulator_value(o.initial_accumulator_value);
  return ps;
}

v1::PsAggregation ToPs(const VariableOptions& v) {
  if (v.sync == VariableSync::kOnWrite) return v1::PS_AGGREGATION_NONE;
  switch (v.aggregation) {
    case Aggregation::kSum:
      return v1::PS_AGGREGATION_SUM;
    case Aggregation::kMean:
      return v1::PS_AGGREGATION_MEAN;
    case Aggregation::kOnlyFirstReplica:
      return v1::PS_AGGREGATION_ONLY_FIRST_WORKER;
  }
  return v1::PS_AGGREGATION_MEAN;
}

absl::StatusOr<ps::PartitionerOptions> Partitioner(
    const v1::ParameterServerOptions& o) {
  ps::PartitionerOptions p;
  switch (o.partitioner()) {
    case v1::ParameterServerOptions::PARTITIONER_NONE:
      p.policy = ps::PartitionPolicy::kNone;
      break;
    case v1::ParameterServerOptions::PARTITIONER_FIXED:
      p.policy = ps::PartitionPolicy::kFixedShards;
      p.num_shards = o.num_shards();
      break;
    case v1::ParameterServerOptions::PARTITIONER_MIN_SIZE:
      p.policy = ps::PartitionPolicy::kMinSize;
      if (o.min_shard_bytes() > 0) p.min_shard_bytes = o.min_shard_bytes();
      break;
    case v1::ParameterServerOptions::PARTITIONER_MAX_SIZE:
      p.policy = ps::PartitionPolicy::kMaxSize;
      p.max_shard_bytes = o.max_shard_bytes();
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown partitioner ", o.partitioner()));
  }
  return p;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsVariableClient>> PsVariableClient::Create(
    const v1::AgentJobAssignment& assignment, const rpc::Security& security,
    const std::string& worker) {
  const v1::ParameterServerOptions& o = assignment.spec().ps();
  absl::StatusOr<ps::PartitionerOptions> partitioner = Partitioner(o);
  if (!partitioner.ok()) return partitioner.status();
  ps::PsClientOptions options;
  options.ps_addresses.assign(assignment.ps_addresses().begin(),
                              assignment.ps_addresses().end());
  options.job_id = assignment.job_id();
  options.job_sequence = assignment.job_sequence();
  options.job_uid = assignment.job_uid();
  options.cluster_uid = assignment.cluster_uid();
  options.worker = worker;
  options.security = security;
  options.recovery_timeout =
      o.ps_recovery_timeout_ms() > 0
          ? absl::Milliseconds(o.ps_recovery_timeout_ms())
          : kDefaultRecovery;
  absl::StatusOr<std::unique_ptr<ps::PsClient>> client =
      ps::PsClient::Create(std::move(options));
  if (!client.ok()) return client.status();
  return std::unique_ptr<PsVariableClient>(new PsVariableClient(
      *std::move(client), *partitioner, assignment.ps_addresses_size()));
}

PsVariableClient::PsVariableClient(std::unique_ptr<ps::PsClient> client,
                                   ps::PartitionerOptions partitioner,
                                   int num_ps)
    : client_(std::move(client)), partitioner_(partitioner), num_ps_(num_ps) {}

absl::Status PsVariableClient::Create(
    const std::vector<ServerVariable>& variables) {
  std::vector<std::string> names;
  for (const ServerVariable& v : variables) names.push_back(v.options.name);
  absl::MutexLock lock(&mu_);
  if (!declared_.empty() || variables.empty()) {
    if (names != declared_) {
      return absl::FailedPreconditionError(
          "the variables were declared once already, and differently");
    }
    return absl::OkStatus();
  }
  std::vector<ps::VariableDecl> decls;
  std::vector<ps::PsVariableOptions> options;
  for (const ServerVariable& v : variables) {
    decls.push_back({v.options.name, v.options.shape,
                     static_cast<int64_t>(DTypeSize(v.options.dtype)),
                     v.options.colocate_with});
    ps::PsVariableOptions o;
    o.dtype = ps::ToWire(v.options.dtype);
    if (v.trained) o.optimizer = ToPs(v.optimizer);
    o.aggregation = ToPs(v.options);
    o.initial = absl::MakeConstSpan(v.initial.data(), v.initial.size());
    options.push_back(std::move(o));
  }
  absl::StatusOr<ps::Placement> placement =
      ps::PlaceVariables(decls, num_ps_, partitioner_);
  if (!placement.ok()) return placement.status();
  if (absl::Status created = client_->CreateVariables(*placement, options);
      !created.ok()) {
    return Failure(created);
  }
  declared_ = std::move(names);
  return absl::OkStatus();
}

absl::Status PsVariableClient::Pull(const std::vector<HostSlice>& slices) {
  std::vector<ps::PullBuffer> buffers;
  for (const HostSlice& s : slices) {
    buffers.push_back(
        {s.name, absl::MakeSpan(static_cast<char*>(s.data), s.bytes)});
  }
  return Failure(client_->Pull(buffers));
}

absl::Status PsVariableClient::Push(const std::vector<HostSlice>& slices) {
  std::vector<ps::PushBuffer> buffers;
  for (const HostSlice& s : slices) {
    buffers.push_back({s.name, absl::MakeConstSpan(
                                   static_cast<const char*>(s.data), s.bytes)});
  }
  return Failure(client_->Push(buffers));
}

std::vector<v1::PsRecovery> PsVariableClient::TakeRecoveries() {
  std::vector<v1::PsRecovery> out;
  for (const ps::PsRecoveryEvent& e : client_->TakeRecoveryEvents()) {
    v1::PsRecovery r;
    r.set_ps_index(e.shard);
    r.set_incarnation(e.new_incarnation);
    r.set_restored_updates(e.restored_updates);
    r.set_updates_seen(e.updates_seen);
    out.push_back(std::move(r));
  }
  return out;
}

void PsVariableClient::Abort(const absl::Status& status) {
  {
    absl::MutexLock lock(&abort_mu_);
    if (aborted_.ok()) aborted_ = status;
  }
  client_->Shutdown();
}

absl::Status PsVariableClient::Failure(absl::Status failed) const {
  if (failed.ok()) return failed;
  absl::MutexLock lock(&abort_mu_);
  return aborted_.ok() ? failed : aborted_;
}

}  // namespace cohort::agent
