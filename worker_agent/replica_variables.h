#pragma once

// The runtime's variables and optimizers, behind cohort::Variable and
// cohort::Optimizer. Internal to the replica runtime.

#include <memory>
#include <vector>

#include "cohort/step.h"
#include "worker_agent/device_memory.h"

namespace cohort::agent {

class ReplicaContextImpl;

// Owns its device buffer, or, under central storage, aliases the one that
// local replica 0's variable owns. One replica's; not thread-safe.
class VariableImpl final : public Variable {
 public:
  VariableImpl(VariableOptions options, DeviceBuffer buffer)
      : options_(std::move(options)),
        buffer_(std::move(buffer)),
        data_(buffer_.data()) {}
  // Not owning: `shared` belongs to another replica's variable, which
  // outlives this one.
  VariableImpl(VariableOptions options, void* shared)
      : options_(std::move(options)), data_(shared) {}

  const VariableOptions& options() const override { return options_; }
  Tensor tensor() override { return {data_, count(), options_.dtype}; }

 private:
  const VariableOptions options_;
  DeviceBuffer buffer_;  // empty for an alias
  void* const data_;
};

// Owns its slots; `context` and the variables are its replica's. One
// replica's; not thread-safe.
class OptimizerImpl final : public Optimizer {
 public:
  // slots[i] holds SlotCount(options.kind) buffers shaped as variables[i].
  OptimizerImpl(ReplicaContextImpl* context, OptimizerOptions options,
                std::vector<VariableImpl*> variables,
                std::vector<std::vector<std::unique_ptr<VariableImpl>>> slots)
      : context_(context),
        options_(options),
        variables_(std::move(variables)),
        slots_(std::move(slots)) {}

  // Under central storage every replica all-reduces, and local replica 0
  // alone applies the update to the one copy, between two local barriers.
  absl::Status apply_gradients(std::span<const Tensor> gradients) override;

  // For checkpoints: the slots as variables named "<variable>/<slot>", and
  // the number of updates applied (Adam's t).
  const std::vector<std::vector<std::unique_ptr<VariableImpl>>>& slots() const {
    return slots_;
  }
  int64_t& iterations() { return iterations_; }

 private:
  // The update itself, from the reduced gradients.
  absl::Status Update(std::span<const Tensor> gradients);

  ReplicaContextImpl* const context_;
  const OptimizerOptions options_;
  const std::vector<VariableImpl*> variables_;
  std::vector<std::vector<std::unique_ptr<VariableImpl>>> slots_;
  int64_t iterations_ = 0;
};

}  // namespace cohort::agent
