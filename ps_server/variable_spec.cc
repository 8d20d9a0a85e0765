#include "ps_server/variable_spec.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ps_client/dtype.h"
#include "ps_server/ps_optimizers.h"

namespace cohort::ps {
namespace {

std::string OptimizerString(const v1::PsOptimizer& opt) {
  switch (opt.kind()) {
    case v1::PsOptimizer::SGD:
      return absl::StrFormat("SGD(lr=%g)", opt.learning_rate());
    case v1::PsOptimizer::ADAGRAD:
      return absl::StrFormat("ADAGRAD(lr=%g, eps=%g, initial=%g)",
                             opt.learning_rate(), opt.epsilon(),
                             opt.initial_accumulator_value());
    case v1::PsOptimizer::ADAM:
      return absl::StrFormat("ADAM(lr=%g, beta1=%g, beta2=%g, eps=%g)",
                             opt.learning_rate(), opt.beta1(), opt.beta2(),
                             opt.epsilon());
    default:
      return "none";
  }
}

absl::Status BadSpec(absl::string_view name, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("variable '", name, "': ", what));
}

}  // namespace

std::string SpecString(const v1::PsVariableSpec& spec) {
  std::string aggregation = v1::PsAggregation_Name(spec.aggregation());
  if (absl::StartsWith(aggregation, "PS_AGGREGATION_")) {
    aggregation = aggregation.substr(strlen("PS_AGGREGATION_"));
  }
  return absl::StrCat("shape ", ShapeString(spec.shape()), " ",
                      DTypeName(spec.dtype()), ", optimizer ",
                      OptimizerString(spec.optimizer()), ", aggregation ",
                      aggregation);
}

bool SameOptimizer(const v1::PsOptimizer& a, const v1::PsOptimizer& b) {
  return a.kind() == b.kind() && a.learning_rate() == b.learning_rate() &&
         a.beta1() == b.beta1() && a.beta2() == b.beta2() &&
         a.epsilon() == b.epsilon() &&
         a.initial_accumulator_value() == b.initial_accumulator_value();
}

bool SameSpec(const v1::PsVariableSpec& a, const v1::PsVariableSpec& b) {
  return a.dtype() == b.dtype() && a.aggregation() == b.aggregation() &&
         std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(),
                    b.shape().end()) &&
         SameOptimizer(a.optimizer(), b.optimizer());
}

absl::StatusOr<v1::PsVariableSpec> NormalizeSpec(const v1::PsVariableSpec& in,
                                                 int64_t* elements) {
  const std::string& name = in.name();
  if (name.empty()) {
    return absl::InvalidArgumentError("a variable spec has no name");
  }
  const int size = DTypeSize(in.dtype());
  if (size == 0) {
    return BadSpec(name, in.dtype() == v1::PS_DTYPE_UNSPECIFIED
                             ? "dtype is required"
                             : absl::StrCat("unknown dtype ",
                                            static_cast<int>(in.dtype())));
  }
  if (in.shape_size() > kMaxRank) {
    return BadSpec(name, absl::StrCat("shape has ", in.shape_size(),
                                      " dimensions; at most ", kMaxRank));
  }
  *elements = NumElements(in.shape(), kMaxVariableBytes / size);
  if (*elements < 0) {
    return BadSpec(name, absl::StrCat("shape ", ShapeString(in.shape()),
                                      " needs positive dimensions and at "
                                      "most ",
                                      kMaxVariableBytes, " bytes"));
  }
  const int64_t bytes = *elements * size;
  if (!in.initial().empty() &&
      static_cast<int64_t>(in.initial().size()) != bytes) {
    return BadSpec(name,
                   absl::StrCat("initial has ", in.initial().size(),
                                " bytes; shape ", ShapeString(in.shape()), " ",
                                DTypeName(in.dtype()), " has ", bytes));
  }
  if (!v1::PsAggregation_IsValid(in.aggregation())) {
    return BadSpec(name, absl::StrCat("unknown aggregation ",
                                      static_cast<int>(in.aggregation())));
  }
  if (in.aggregation() != v1::PS_AGGREGATION_NONE &&
      in.optimizer().kind() != v1::PsOptimizer::KIND_UNSPECIFIED) {
    return BadSpec(name,
                   "an aggregated variable holds the workers' values and "
                   "takes no optimizer");
  }
  v1::PsVariableSpec out = in;
  out.clear_initial();
  *out.mutable_optimizer() = WithDefaults(in.optimizer());
  if (absl::Status valid =
          ValidateOptimizer(out.optimizer(), out.dtype(), name);
      !valid.ok()) {
    return valid;
  }
  return out;
}

}  // namespace cohort::ps
