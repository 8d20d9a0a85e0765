#pragma once

// Where the variables of a ParameterServer job live: which ps task holds each
// variable, or each part of a variable split along axis 0. This is the rule
// of TF's ParameterServerStrategy with its tf.distribute.experimental
// partitioners, so that a model laid out here is laid out as TF would:
//
//   - every variable, or every part of a split one, goes to the next ps task
//     of one running round-robin counter, in creation order (the first to
//     ps 0);
//   - a variable split into n parts gives the first (dim0 % n) parts one row
//     more than the others; part i is named "<name>/part_<i>", an unsplit
//     variable keeps its name;
//   - scalars (rank 0) are never split; a variable with a zero dimension
//     is refused, as no ps shard holds an empty one;
//   - a variable colocated with an earlier one (colocate_vars_with) is
//     never split, sits with that one's first part, and takes no turn.
//
// Pure logic: no gRPC, no proto types. The workers and the benchmark compute
// the same placement from the same inputs, so it needs no coordination.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort::ps {

// How many parts a variable is split into, along axis 0.
enum class PartitionPolicy {
  // Whole variables, round-robin over the ps tasks (TF's default placement).
  kNone,
  // FixedShardsPartitioner(num_shards): min(num_shards, dim0) parts.
  kFixedShards,
  // MinSizePartitioner(min_shard_bytes, max_shards): as many parts as keep
  // about min_shard_bytes each, ceil(total / min_shard_bytes) as TF computes
  // it, clamped to [1, min(max_shards, dim0)].
  kMinSize,
  // MaxSizePartitioner(max_shard_bytes, max_shards): the fewest parts whose
  // whole rows fit in max_shard_bytes, as TF computes it: rows per part =
  // max(1, floor(max_shard_bytes / row bytes)), parts = ceil(dim0 / rows per
  // part), capped by max_shards when set. A row larger than max_shard_bytes
  // still makes a part of its own. For rows that divide evenly this is
  // ceil(total / max_shard_bytes).
  kMaxSize,
};

struct PartitionerOptions {
  PartitionPolicy policy = PartitionPolicy::kNone;
  int num_shards = 1;                   // kFixedShards; >= 1
  int64_t min_shard_bytes = 256 << 10;  // kMinSize; > 0
  int64_t max_shard_bytes = 0;          // kMaxSize; > 0, required
  // kMinSize: 0 means the number of ps tasks (TF's own default is 1).
  // kMaxSize: 0 means no limit.
  int max_shards = 0;
};

// A variable as the model declares it. Shape dimensions are >= 0; the
// element size (4 for float32) is > 0.
struct VariableDecl {
  std::string name;
  std::vector<int64_t> shape;
  int64_t element_bytes = 4;
  // TF's colocate_vars_with: the variable goes whole to the ps task of this
  // earlier variable's first part, and takes no turn of the round-robin.
  std::string colocate_with;
};

// One stored piece of a variable: rows [first_row, first_row + rows) of it,
// which are bytes [byte_offset, byte_offset + bytes) of its row-major value.
struct VariablePart {
  std::string name;  // "<variable>" when unsplit, else "<variable>/part_<i>"
  int ps = 0;        // the ps task index, which is the shard id
  int64_t first_row = 0;
  int64_t rows = 0;  // for a scalar: 0, and the part is the whole value
  int64_t byte_offset = 0;
  int64_t bytes = 0;
  std::vector<int64_t> shape;  // the part's own shape: {rows, dims 1..}
};

struct VariablePlacement {
  VariableDecl variable;
  int64_t bytes = 0;                // of the whole variable
  std::vector<VariablePart> parts;  // in row order; at least one
};

// The placement of a model's variables. A value type.
struct Placement {
  int num_ps = 0;
  std::vector<VariablePlacement> variables;  // in declaration order

  // The variable named `name`; nullptr if there is none.
  const VariablePlacement* Find(const std::string& name) const;
};

// Places `variables` (in order) over `num_ps` ps tasks. INVALID_ARGUMENT,
// naming the variable or the option, for no ps task, a bad option, an empty
// or duplicate name, a negative dimension, a bad element size, or a size
// that overflows 64 bits.
absl::StatusOr<Placement> PlaceVariables(
    const std::vector<VariableDecl>& variables, int num_ps,
    const PartitionerOptions& options = {});

// How many parts `policy` makes of a variable of `shape` and `total_bytes`,
// before the split (exposed for tests and for messages).
absl::StatusOr<int64_t> NumPartitions(const std::vector<int64_t>& shape,
                                      int64_t total_bytes, int num_ps,
                                      const PartitionerOptions& options);

// "none", "fixed", "min_size", "max_size"; and back (INVALID_ARGUMENT).
const char* PartitionPolicyName(PartitionPolicy policy);
absl::StatusOr<PartitionPolicy> ParsePartitionPolicy(const std::string& name);

}  // namespace cohort::ps
