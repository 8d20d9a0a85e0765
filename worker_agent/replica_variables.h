#pragma once

// The runtime's variables and optimizers, behind cohort::Variable and
// cohort::Optimizer. Internal to the replica runtime.

#include <memory>
#include <vector>

#include "cohort/step.h"
#include "worker_agent/device_memory.h"

namespace cohort::agent {

class ReplicaContextImpl;

// Owns its device buffer. One replica's; not thread-safe.
class VariableImpl final : public Variable {
 public:
  VariableImpl(VariableOptions options, DeviceBuffer buffer)
      : options_(std::move(options)), buffer_(std::move(buffer)) {}

  const VariableOptions& options() const override { return options_; }
  Tensor tensor() override {
    return {buffer_.data(), count(), options_.dtype};
  }

 private:
  const VariableOptions options_;
  DeviceBuffer buffer_;
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

  absl::Status apply_gradients(std::span<const Tensor> gradients) override;

  // For checkpoints: the slots as variables named "<variable>/<slot>", and
  // the number of updates applied (Adam's t).
  const std::vector<std::vector<std::unique_ptr<VariableImpl>>>& slots() const {
    return slots_;
  }
  int64_t& iterations() { return iterations_; }

 private:
  ReplicaContextImpl* const context_;
  const OptimizerOptions options_;
  const std::vector<VariableImpl*> variables_;
  std::vector<std::vector<std::unique_ptr<VariableImpl>>> slots_;
  int64_t iterations_ = 0;
};

}  // namespace cohort::agent
