// ReplicaContextImpl's collective handling of a job's state: the starting
// values of every replica, and checkpoints.

#include <algorithm>
#include <functional>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/checkpoint.h"
#include "common/status_macros.h"
#include "ps_client/dtype.h"
#include "spdlog/spdlog.h"
#include "worker_agent/group_keepalive.h"
#include "worker_agent/replica_context.h"
#include "worker_agent/replica_variables.h"

namespace cohort::agent {
namespace {

std::string IterationsName(size_t optimizer) {
  return absl::StrCat("optimizer", optimizer, "/iterations");
}

absl::Status LoadInto(const std::map<std::string, SavedTensor>& saved,
                      VariableImpl& variable, const Device& device,
                      const std::string& where) {
  const VariableOptions& vo = variable.options();
  auto it = saved.find(vo.name);
  if (it == saved.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint ", where, " has no tensor \"", vo.name,
        "\", which the init function creates: it belongs to another model"));
  }
  const Tensor tensor = variable.tensor();
  // Equal sizes are not enough: a [2, 3] saved into a [3, 2] scrambles it.
  if (it->second.dtype != DTypeName(vo.dtype) || it->second.shape != vo.shape ||
      it->second.bytes.size() != tensor.bytes()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint ", where, " holds \"", vo.name, "\" as ",
        it->second.dtype, " ", ps::ShapeString(it->second.shape), " (",
        it->second.bytes.size(), " bytes); the init function creates ",
        DTypeName(vo.dtype), " ", ps::ShapeString(vo.shape), " (",
        tensor.bytes(), " bytes)"));
  }
  return CopyToDevice(device, tensor.data, it->second.bytes.data(),
                      tensor.bytes());
}

}  // namespace

absl::StatusOr<void*> ReplicaContextImpl::DeviceStage(size_t bytes) {
  if (device_stage_.bytes() < bytes) {
    COHORT_ASSIGN_OR_RETURN(device_stage_,
                            DeviceBuffer::Allocate(device_, bytes));
  }
  return device_stage_.data();
}

absl::Status ReplicaContextImpl::BroadcastHost(void* host, size_t count,
                                               DType dtype, int root) {
  if (!device_.is_cuda()) {
    return Collective(comm_->Broadcast(host, count, dtype, root));
  }
  const size_t bytes = count * DTypeSize(dtype);
  COHORT_ASSIGN_OR_RETURN(void* stage, DeviceStage(bytes));
  COHORT_RETURN_IF_ERROR(CopyToDevice(device_, stage, host, bytes));
  COHORT_RETURN_IF_ERROR(broadcast({stage, count, dtype}, root));
  return CopyToHost(device_, host, stage, bytes);
}

absl::Status ReplicaContextImpl::AllReduceHost(void* host, size_t count,
                                               DType dtype, ReduceOp op) {
  if (!collective_status_.ok()) return collective_status_;
  if (!device_.is_cuda()) {
    return Collective(comm_->AllReduce(host, count, dtype, op));
  }
  const size_t bytes = count * DTypeSize(dtype);
  COHORT_ASSIGN_OR_RETURN(void* stage, DeviceStage(bytes));
  COHORT_RETURN_IF_ERROR(CopyToDevice(device_, stage, host, bytes));
  COHORT_RETURN_IF_ERROR(all_reduce(op, Tensor{stage, count, dtype}));
  return CopyToHost(device_, host, stage, bytes);
}

absl::StatusOr<int64_t> ReplicaContextImpl::OwnLatestCheckpoint() const {
  if (!KeepsAgentCopy()) return -1;
  absl::StatusOr<int64_t> latest = NewestCheckpointStep(job_->checkpoint_dir);
  if (latest.ok()) return *latest;
  if (absl::IsNotFound(latest.status())) return -1;
  return latest.status();
}

absl::Status ReplicaContextImpl::LoadCheckpoint(
    int64_t step, std::vector<SavedTensor> tensors) {
  const std::string where =
      absl::StrCat(job_->checkpoint_dir, " (step ", step, ")");
  std::map<std::string, SavedTensor> saved;
  for (SavedTensor& t : tensors) saved[t.name] = std::move(t);
  for (auto& variable : variables_) {
    COHORT_RETURN_IF_ERROR(LoadInto(saved, *variable, device_, where));
  }
  for (size_t k = 0; k < optimizers_.size(); ++k) {
    for (const auto& slots : optimizers_[k]->slots()) {
      for (const auto& slot : slots) {
        COHORT_RETURN_IF_ERROR(LoadInto(saved, *slot, device_, where));
      }
    }
    // The update count is state like the slots: Adam's bias correction
    // starting again from 0 would make the first update after a resume far
    // too large.
    auto it = saved.find(IterationsName(k));
    if (it == saved.end() || it->second.bytes.size() != sizeof(int64_t)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the checkpoint ", where, " has no int64 tensor \"",
          IterationsName(k), "\", which the init function's optimizer ", k,
          " needs: it belongs to another model"));
    }
    std::memcpy(&optimizers_[k]->iterations(), it->second.bytes.data(),
                sizeof(int64_t));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ReplicaContextImpl::RestoreOrSync() {
  // Central storage: replica 0 may restore into the one copy only once no
  // replica's init function can still be reading it.
  if (central_ != nullptr) COHORT_RETURN_IF_ERROR(CentralBarrier());
  // Agree on the newest checkpoint any agent holds, then on its holder: no
  // agent's disk is needed, so a job survives the loss of any one host.
  absl::StatusOr<int64_t> own = OwnLatestCheckpoint();
  // An agent that cannot tell its newest checkpoint (a damaged record, and
  // no checkpoint beside it) offers none; another agent's copy may serve.
  int64_t damaged_record = std::numeric_limits<int64_t>::max();
  if (!own.ok()) {
    spdlog::warn("replica {} offers no checkpoint: {}", replica_id_,
                 own.status().ToString());
    damaged_record = replica_id_;
  }
  COHORT_RETURN_IF_ERROR(
      AllReduceHost(&damaged_record, 1, DType::kInt64, ReduceOp::kMin));
  // A holder whose copy cannot be read (a damaged or vanished file) says
  // so and offers its next older checkpoint instead, and the agreement runs
  // again: another agent's copy of the same step, or the next newest, is
  // restored. Each round drops one copy, so the rounds are bounded by the
  // copies the agents keep.
  int64_t candidate = own.ok() ? *own : -1;
  // "step S on rank R" of each copy that failed, and the first damaged
  // record.
  std::string unreadable;
  if (damaged_record != std::numeric_limits<int64_t>::max()) {
    unreadable = absl::StrCat("the checkpoint record on rank ", damaged_record);
  }
  int64_t newest = -1;
  int root = 0;
  bool own_unreadable = false;  // this replica's newest copy failed to read
  while (true) {
    newest = candidate;
    COHORT_RETURN_IF_ERROR(
        AllReduceHost(&newest, 1, DType::kInt64, ReduceOp::kMax));
    int64_t holder = newest >= 0 && candidate == newest
                         ? replica_id_
                         : std::numeric_limits<int64_t>::max();
    COHORT_RETURN_IF_ERROR(
        AllReduceHost(&holder, 1, DType::kInt64, ReduceOp::kMin));
    if (newest < 0) break;
    root = static_cast<int>(holder);
    int64_t loaded = 1;
    absl::StatusOr<std::vector<SavedTensor>> tensors;
    std::function<absl::Status()> read_copy;
    if (replica_id_ == root) {
      read_copy = [&] {
        tensors = ReadCheckpoint(job_->checkpoint_dir, newest);
        return absl::OkStatus();
      };
    }
    COHORT_RETURN_IF_ERROR(WhileGroupWaits(
        std::move(read_copy), absl::StrCat("reading checkpoint ", newest)));
    if (replica_id_ == root) {
      if (tensors.ok()) {
        // What does not fit the model is the job's own error, not the copy's.
        if (absl::Status load = LoadCheckpoint(newest, *std::move(tensors));
            !load.ok()) {
          comm_->Abort(load);
          return load;
        }
      } else {
        spdlog::warn(
            "replica {} cannot read its copy of checkpoint {}: {}; the "
            "replicas look for another copy",
            replica_id_, newest, tensors.status().ToString());
        own_unreadable = own_unreadable || (own.ok() && *own == newest);
        candidate = -1;
        for (const int64_t step : CheckpointSteps(job_->checkpoint_dir)) {
          if (step < newest) {
            candidate = step;
            break;
          }
        }
        loaded = 0;
      }
    }
    COHORT_RETURN_IF_ERROR(
        AllReduceHost(&loaded, 1, DType::kInt64, ReduceOp::kMin));
    if (loaded == 1) break;
    absl::StrAppend(&unreadable, unreadable.empty() ? "" : ", ", "step ",
                    newest, " on rank ", root);
  }
  const bool restore = newest >= 0;
  if (!restore) root = 0;
  // Starting afresh would throw the job's progress away unasked.
  if (!restore && !unreadable.empty()) {
    return absl::DataLossError(
        absl::StrCat("no copy of the job's checkpoints could be read (",
                     unreadable, "; the holders' logs say why)"));
  }
  if (!restore && job_->checkpoint_step > 0) {
    return absl::DataLossError(absl::StrCat(
        "the job checkpointed step ", job_->checkpoint_step,
        ", but no agent holds a copy of any of its checkpoints (the chief's "
        "checkpoint_dir and every other agent's local copy are empty or "
        "gone); resubmit the job to train it again from step 0"));
  }
  if (restore && newest < job_->checkpoint_step && replica_id_ == 0) {
    spdlog::warn(
        "the newest checkpoint any agent holds is step {}, older than step "
        "{}, which the job checkpointed: {} more steps run again",
        newest, job_->checkpoint_step, job_->checkpoint_step - newest);
  }
  if (restore) {
    restored_from_rank_ = root;
    // A copy this agent offered but could not read is not held.
    holds_restored_ = own.ok() && *own == newest && !own_unreadable;
  }
  int64_t header[2] = {restore ? 1 : 0, restore ? newest : 0};

  // Under central storage ON_WRITE variables and slots are one copy already:
  // only ON_READ variables, per replica by definition, need the broadcast.
  // Without a checkpoint every ON_READ variable starts from the first
  // replica's value too, as tf.distribute's do.
  const bool mirrored = central_ == nullptr;
  for (auto& variable : variables_) {
    const VariableOptions& vo = variable->options();
    if (vo.sync == VariableSync::kOnWrite && !mirrored) continue;
    COHORT_RETURN_IF_ERROR(broadcast(variable->tensor(), root));
    if (restore && vo.sync == VariableSync::kOnRead &&
        vo.aggregation == Aggregation::kSum && replica_id_ != 0) {
      // The saved value is the sum: replica 0 carries it, the others none.
      const Tensor t = variable->tensor();
      std::vector<char> zeros(t.bytes(), 0);
      COHORT_RETURN_IF_ERROR(
          CopyToDevice(device_, t.data, zeros.data(), zeros.size()));
    }
  }
  for (auto& optimizer : optimizers_) {
    for (const auto& slots : optimizer->slots()) {
      for (const auto& slot : slots) {
        if (mirrored) COHORT_RETURN_IF_ERROR(broadcast(slot->tensor(), root));
      }
    }
    // Every replica counts the updates (Adam's t), central or not.
    COHORT_RETURN_IF_ERROR(
        BroadcastHost(&optimizer->iterations(), 1, DType::kInt64, root));
  }
  return header[0] == 1 ? header[1] : 0;
}

absl::Status ReplicaContextImpl::SaveCheckpoint(int64_t step) {
  // Each agent's first replica writes its agent's copy.
  const bool writer = KeepsAgentCopy();
  std::vector<SavedTensor> tensors;
  auto add = [&](Variable& variable) -> absl::Status {
    const VariableOptions& vo = variable.options();
    const bool collective = vo.sync == VariableSync::kOnRead;
    if (!writer && !collective) return absl::OkStatus();
    std::string bytes(variable.tensor().bytes(), '\0');
    COHORT_RETURN_IF_ERROR(read_value(variable, bytes.data()));
    if (writer) {
      tensors.push_back(
          {vo.name, DTypeName(vo.dtype), vo.shape, std::move(bytes)});
    }
    return absl::OkStatus();
  };
  for (auto& variable : variables_) COHORT_RETURN_IF_ERROR(add(*variable));
  for (size_t k = 0; k < optimizers_.size(); ++k) {
    for (const auto& slots : optimizers_[k]->slots()) {
      for (const auto& slot : slots) COHORT_RETURN_IF_ERROR(add(*slot));
    }
    if (writer) {
      std::string bytes(sizeof(int64_t), '\0');
      std::memcpy(bytes.data(), &optimizers_[k]->iterations(), bytes.size());
      tensors.push_back(
          {IterationsName(k), DTypeName(DType::kInt64), {1}, std::move(bytes)});
    }
  }
  absl::Status written;
  std::function<absl::Status()> write;
  if (writer) {
    write = [&] {
      written = WriteCheckpoint(job_->checkpoint_dir, step, tensors);
      return absl::OkStatus();
    };
  }
  COHORT_RETURN_IF_ERROR(WhileGroupWaits(
      std::move(write), absl::StrCat("writing checkpoint ", step)));
  // The others would otherwise go on, and a later attempt could resume from
  // their copies at a step the failed agent's directory never holds. They
  // fail with the failed write's code, so that every replica's report is
  // as permanent as the write's error (a directory refused for good).
  constexpr int64_t kCodes = 64;  // above every absl::StatusCode
  int64_t failed =
      written.ok() ? -1
                   : replica_id_ * kCodes + static_cast<int>(written.code());
  COHORT_RETURN_IF_ERROR(
      AllReduceHost(&failed, 1, DType::kInt64, ReduceOp::kMax));
  if (!written.ok()) {
    spdlog::error("replica {} could not write its copy of checkpoint {}: {}",
                  replica_id_, step, written.ToString());
    return written;
  }
  if (failed >= 0) {
    return absl::Status(static_cast<absl::StatusCode>(failed % kCodes),
                        absl::StrCat("replica ", failed / kCodes,
                                     " could not write its copy of checkpoint ",
                                     step, " (its agent's log says why)"));
  }
  return absl::OkStatus();
}

absl::Status ReplicaContextImpl::SaveWhereMissing(int64_t step) {
  const bool writer = KeepsAgentCopy();
  int64_t missing = writer && !holds_restored_ ? 1 : 0;
  COHORT_RETURN_IF_ERROR(
      AllReduceHost(&missing, 1, DType::kInt64, ReduceOp::kMax));
  if (missing == 0) return absl::OkStatus();
  if (replica_id_ == 0) {
    spdlog::info("checkpoint {} is written again: some agent holds no copy",
                 step);
  }
  return SaveCheckpoint(step);
}

absl::Status ReplicaContextImpl::WhileGroupWaits(
    std::function<absl::Status()> work, std::string what) {
  return KeepGroupAliveDuring(
      std::move(work),
      [this](int64_t* round) {
        return AllReduceHost(round, 1, DType::kInt64, ReduceOp::kMax);
      },
      {.interval = std::min(absl::Seconds(1), job_->collective_timeout / 4),
       .what = std::move(what),
       .rank = replica_id_});
}

}  // namespace cohort::agent
