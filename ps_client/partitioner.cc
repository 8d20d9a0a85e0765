#include "ps_client/partitioner.h"

#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace cohort::ps {
namespace {

absl::Status Invalid(const std::string& variable, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("variable \"", variable, "\": ", what));
}

// Elements times element size, refusing what does not fit in int64.
absl::StatusOr<int64_t> VariableBytes(const VariableDecl& v) {
  if (v.element_bytes <= 0) {
    return Invalid(v.name, absl::StrCat("element size must be > 0, got ",
                                        v.element_bytes));
  }
  int64_t bytes = v.element_bytes;
  for (int64_t dim : v.shape) {
    // A ps shard holds no empty variable: refused here, naming it, rather
    // than by the shard along with every other variable of its request.
    if (dim <= 0) {
      return Invalid(v.name, absl::StrCat(dim < 0 ? "negative" : "zero",
                                          " dimension in shape [",
                                          absl::StrJoin(v.shape, ","),
                                          "]: a ps variable holds at least one "
                                          "element"));
    }
    if (__builtin_mul_overflow(bytes, dim, &bytes)) {
      return Invalid(v.name,
                     absl::StrCat("shape [", absl::StrJoin(v.shape, ","),
                                  "] overflows 64-bit sizes"));
    }
  }
  return bytes;
}

int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

absl::Status ValidateOptions(const PartitionerOptions& o) {
  switch (o.policy) {
    case PartitionPolicy::kNone:
      return absl::OkStatus();
    case PartitionPolicy::kFixedShards:
      if (o.num_shards < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "FixedShardsPartitioner: num_shards must be >= 1, got ",
            o.num_shards));
      }
      return absl::OkStatus();
    case PartitionPolicy::kMinSize:
      if (o.min_shard_bytes <= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "MinSizePartitioner: min_shard_bytes must be > 0, got ",
            o.min_shard_bytes));
      }
      if (o.max_shards < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "MinSizePartitioner: max_shards must be >= 0 (0: the number of "
            "ps tasks), got ",
            o.max_shards));
      }
      return absl::OkStatus();
    case PartitionPolicy::kMaxSize:
      if (o.max_shard_bytes <= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "MaxSizePartitioner: max_shard_bytes must be > 0, got ",
            o.max_shard_bytes));
      }
      if (o.max_shards < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "MaxSizePartitioner: max_shards must be >= 0 (0: no limit), got ",
            o.max_shards));
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("unknown partition policy");
}

}  // namespace

const VariablePlacement* Placement::Find(const std::string& name) const {
  for (const VariablePlacement& v : variables) {
    if (v.variable.name == name) return &v;
  }
  return nullptr;
}

absl::StatusOr<int64_t> NumPartitions(const std::vector<int64_t>& shape,
                                      int64_t total_bytes, int num_ps,
                                      const PartitionerOptions& options) {
  COHORT_RETURN_IF_ERROR(ValidateOptions(options));
  if (shape.empty() || shape[0] == 0) return 1;  // nothing to split
  const int64_t dim0 = shape[0];
  int64_t parts = 1;
  switch (options.policy) {
    case PartitionPolicy::kNone:
      parts = 1;
      break;
    case PartitionPolicy::kFixedShards:
      parts = options.num_shards;
      break;
    case PartitionPolicy::kMinSize: {
      const int64_t max_shards =
          options.max_shards > 0 ? options.max_shards : std::max(num_ps, 1);
      parts = std::clamp<int64_t>(CeilDiv(total_bytes, options.min_shard_bytes),
                                  1, max_shards);
      break;
    }
    case PartitionPolicy::kMaxSize: {
      const int64_t row_bytes = total_bytes / dim0;
      const int64_t rows_per_part =
          row_bytes == 0
              ? dim0
              : std::max<int64_t>(1, options.max_shard_bytes / row_bytes);
      parts = CeilDiv(dim0, rows_per_part);
      if (options.max_shards > 0)
        parts = std::min<int64_t>(parts, options.max_shards);
      break;
    }
  }
  return std::clamp<int64_t>(parts, 1, dim0);
}

absl::StatusOr<Placement> PlaceVariables(
    const std::vector<VariableDecl>& variables, int num_ps,
    const PartitionerOptions& options) {
  if (num_ps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placing variables needs at least one ps task, got ", num_ps));
  }
  COHORT_RETURN_IF_ERROR(ValidateOptions(options));

  Placement placement;
  placement.num_ps = num_ps;
  // Variable and part names: a shard holds both under one namespace.
  std::set<std::string> names;
  int64_t counter = 0;  // TF's running round-robin variable count
  for (const VariableDecl& v : variables) {
    if (v.name.empty()) {
      return absl::InvalidArgumentError("a variable has an empty name");
    }
    COHORT_ASSIGN_OR_RETURN(const int64_t bytes, VariableBytes(v));
    std::optional<int> colocated;  // the ps task it must share
    if (!v.colocate_with.empty()) {
      const VariablePlacement* with = placement.Find(v.colocate_with);
      if (with == nullptr) {
        return Invalid(v.name,
                       absl::StrCat("colocate_with names \"", v.colocate_with,
                                    "\", which is not a variable "
                                    "created before it"));
      }
      colocated = with->parts.front().ps;
    }
    COHORT_ASSIGN_OR_RETURN(
        const int64_t parts,
        colocated.has_value() ? absl::StatusOr<int64_t>(1)
                              : NumPartitions(v.shape, bytes, num_ps, options));

    VariablePlacement out{.variable = v, .bytes = bytes, .parts = {}};
    const int64_t dim0 = v.shape.empty() ? 0 : v.shape[0];
    const int64_t row_bytes = dim0 > 0 ? bytes / dim0 : 0;
    const int64_t base = dim0 / parts, extra = dim0 % parts;
    int64_t row = 0;
    for (int64_t i = 0; i < parts; ++i) {
      VariablePart part;
      part.name = parts == 1 ? v.name : absl::StrCat(v.name, "/part_", i);
      part.ps = colocated.has_value() ? *colocated
                                      : static_cast<int>(counter++ % num_ps);
      part.first_row = row;
      part.rows = base + (i < extra ? 1 : 0);
      part.byte_offset = row * row_bytes;
      part.bytes = v.shape.empty() ? bytes : part.rows * row_bytes;
      part.shape = v.shape;
      if (!part.shape.empty()) part.shape[0] = part.rows;
      row += part.rows;
      if (!names.insert(part.name).second) {
        return Invalid(
            v.name, absl::StrCat("the name \"", part.name, "\" is used twice"));
      }
      out.parts.push_back(std::move(part));
    }
    placement.variables.push_back(std::move(out));
  }
  return placement;
}

const char* PartitionPolicyName(PartitionPolicy policy) {
  switch (policy) {
    case PartitionPolicy::kNone:
      return "none";
    case PartitionPolicy::kFixedShards:
      return "fixed";
    case PartitionPolicy::kMinSize:
      return "min_size";
    case PartitionPolicy::kMaxSize:
      return "max_size";
  }
  return "unknown";
}

absl::StatusOr<PartitionPolicy> ParsePartitionPolicy(const std::string& name) {
  for (PartitionPolicy p :
       {PartitionPolicy::kNone, PartitionPolicy::kFixedShards,
        PartitionPolicy::kMinSize, PartitionPolicy::kMaxSize}) {
    if (name == PartitionPolicyName(p)) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown partition policy \"", name,
                   "\"; expected none, fixed, min_size or max_size"));
}

}  // namespace cohort::ps
