#include "ps_server/ps_optimizers.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "optimizer/update_math.h"
#include "ps_client/dtype.h"

namespace cohort::ps {
namespace {

// Elements are read and written through memcpy: the buffers are byte
// strings, and this keeps every access well-defined whatever their
// alignment. Compilers turn it into plain loads and stores.
template <typename T>
T Load(const char* data, int64_t i) {
  T x;
  std::memcpy(&x, data + i * sizeof(T), sizeof(T));
  return x;
}

template <typename T>
void Store(char* data, int64_t i, T x) {
  std::memcpy(data + i * sizeof(T), &x, sizeof(T));
}

// The update's hyperparameters in T; Adam's bias correction for update t.
template <typename T>
optimizer::Coefficients<T> CoefficientsFor(const v1::PsOptimizer& opt,
                                           int64_t t) {
  return optimizer::MakeCoefficients<T>(
      opt.learning_rate(), /*momentum=*/0, /*nesterov=*/false, opt.beta1(),
      opt.beta2(), opt.epsilon(), opt.kind() == v1::PsOptimizer::ADAM ? t : 0);
}

template <typename T>
void Sgd(const optimizer::Coefficients<T>& c, const char* g, char* w,
         int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T var = Load<T>(w, i);
    optimizer::SgdUpdate(c, Load<T>(g, i), var);
    Store<T>(w, i, var);
  }
}

template <typename T>
void Adagrad(const optimizer::Coefficients<T>& c, const char* g, char* w,
             char* acc, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T var = Load<T>(w, i), a = Load<T>(acc, i);
    optimizer::AdagradUpdate(c, Load<T>(g, i), var, a);
    Store<T>(acc, i, a);
    Store<T>(w, i, var);
  }
}

template <typename T>
void Adam(const optimizer::Coefficients<T>& c, const char* g, char* w, char* m,
          char* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T var = Load<T>(w, i), m_i = Load<T>(m, i), v_i = Load<T>(v, i);
    optimizer::AdamUpdate(c, Load<T>(g, i), var, m_i, v_i);
    Store<T>(m, i, m_i);
    Store<T>(v, i, v_i);
    Store<T>(w, i, var);
  }
}

template <typename T>
void ApplyTyped(const v1::PsOptimizer& opt, std::string_view update,
                const OptimizerState& state) {
  const int64_t n = static_cast<int64_t>(state.value->size() / sizeof(T));
  char* w = state.value->data();
  const char* g = update.data();
  const optimizer::Coefficients<T> c = CoefficientsFor<T>(opt, *state.step + 1);
  switch (opt.kind()) {
    case v1::PsOptimizer::SGD:
      Sgd<T>(c, g, w, n);
      break;
    case v1::PsOptimizer::ADAGRAD:
      Adagrad<T>(c, g, w, (*state.slots)[0].data(), n);
      break;
    case v1::PsOptimizer::ADAM:
      Adam<T>(c, g, w, (*state.slots)[0].data(), (*state.slots)[1].data(), n);
      break;
    default:
      break;
  }
}

template <typename T>
std::string Filled(double value, int64_t elements) {
  std::string out(elements * sizeof(T), '\0');
  const T x = static_cast<T>(value);
  for (int64_t i = 0; i < elements; ++i) Store<T>(out.data(), i, x);
  return out;
}

absl::Status Bad(absl::string_view variable, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer of variable '", variable, "': ", what));
}

}  // namespace

v1::PsOptimizer WithDefaults(const v1::PsOptimizer& optimizer) {
  v1::PsOptimizer out = optimizer;
  switch (out.kind()) {
    case v1::PsOptimizer::ADAM:
      if (out.beta1() == 0) out.set_beta1(0.9);
      if (out.beta2() == 0) out.set_beta2(0.999);
      if (out.epsilon() == 0) out.set_epsilon(1e-7);
      break;
    case v1::PsOptimizer::ADAGRAD:
      if (out.epsilon() == 0) out.set_epsilon(1e-7);
      if (out.initial_accumulator_value() == 0) {
        out.set_initial_accumulator_value(0.1);
      }
      break;
    default:
      break;
  }
  return out;
}

absl::Status ValidateOptimizer(const v1::PsOptimizer& optimizer,
                               v1::PsDType dtype, absl::string_view variable) {
  const v1::PsOptimizer::Kind kind = optimizer.kind();
  if (kind == v1::PsOptimizer::KIND_UNSPECIFIED) return absl::OkStatus();
  if (!v1::PsOptimizer::Kind_IsValid(kind)) {
    return Bad(variable, absl::StrCat("unknown kind ", kind));
  }
  if (!IsFloatDType(dtype)) {
    return Bad(variable,
               absl::StrCat(v1::PsOptimizer::Kind_Name(kind), " needs a float ",
                            "variable, not ", DTypeName(dtype)));
  }
  // The update computes in the variable's type: a value that is in range
  // as a double may not be once rounded (a beta of 0.99999999 is 1 in
  // float32, and Adam's bias correction divides by 1 - beta1).
  const bool float32 = dtype == v1::PS_FLOAT32;
  auto in_type = [float32](double x) {
    return float32 ? static_cast<double>(static_cast<float>(x)) : x;
  };
  // Ten digits: enough to tell 0.99999999 from 1.
  auto number = [](double x) { return absl::StrFormat("%.10g", x); };
  auto rounded = [&](double x) {
    return in_type(x) == x || std::isnan(x)
               ? std::string()
               : absl::StrCat(" (", number(in_type(x)), " in ",
                              DTypeName(dtype), ")");
  };
  // Written as !(x > 0) so that NaN fails too.
  const double lr = optimizer.learning_rate();
  if (!(in_type(lr) > 0) || !std::isfinite(in_type(lr))) {
    return Bad(variable,
               absl::StrCat("learning_rate must be positive and finite, got ",
                            number(lr), rounded(lr)));
  }
  if (kind == v1::PsOptimizer::ADAM) {
    for (const double beta : {optimizer.beta1(), optimizer.beta2()}) {
      if (!(beta >= 0 && in_type(beta) < 1)) {
        return Bad(variable,
                   absl::StrCat("Adam's betas must be in [0, 1), got ",
                                number(beta), rounded(beta)));
      }
    }
  }
  if (kind == v1::PsOptimizer::ADAM || kind == v1::PsOptimizer::ADAGRAD) {
    const double epsilon = optimizer.epsilon();
    if (!(in_type(epsilon) > 0) || !std::isfinite(in_type(epsilon))) {
      return Bad(variable, absl::StrCat("epsilon must be positive, got ",
                                        number(epsilon), rounded(epsilon)));
    }
  }
  if (kind == v1::PsOptimizer::ADAGRAD) {
    const double acc = optimizer.initial_accumulator_value();
    if (!(acc >= 0) || !std::isfinite(acc)) {
      return Bad(variable, absl::StrCat("initial_accumulator_value must be "
                                        "non-negative, got ",
                                        acc));
    }
  }
  return absl::OkStatus();
}

int NumSlots(v1::PsOptimizer::Kind kind) {
  switch (kind) {
    case v1::PsOptimizer::ADAGRAD:
      return 1;
    case v1::PsOptimizer::ADAM:
      return 2;
    default:
      return 0;
  }
}

std::vector<std::string> InitialSlots(const v1::PsOptimizer& optimizer,
                                      v1::PsDType dtype, int64_t elements) {
  std::vector<std::string> slots;
  const int64_t bytes = elements * DTypeSize(dtype);
  switch (optimizer.kind()) {
    case v1::PsOptimizer::ADAGRAD:
      slots.push_back(
          dtype == v1::PS_FLOAT64
              ? Filled<double>(optimizer.initial_accumulator_value(), elements)
              : Filled<float>(optimizer.initial_accumulator_value(), elements));
      break;
    case v1::PsOptimizer::ADAM:
      slots.assign(2, std::string(bytes, '\0'));
      break;
    default:
      break;
  }
  return slots;
}

void ApplyUpdate(const v1::PsOptimizer& optimizer, v1::PsDType dtype,
                 std::string_view update, const OptimizerState& state) {
  if (optimizer.kind() == v1::PsOptimizer::KIND_UNSPECIFIED) {
    state.value->assign(update.data(), update.size());
  } else if (dtype == v1::PS_FLOAT64) {
    ApplyTyped<double>(optimizer, update, state);
  } else {
    ApplyTyped<float>(optimizer, update, state);
  }
  ++*state.step;
}

}  // namespace cohort::ps
