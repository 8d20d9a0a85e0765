#pragma once

// The element-wise optimizer updates, written once for every place that
// trains a variable: the agent's host loops and CUDA kernels, the ps
// shards, and the examples' test runtime. Keras/TensorFlow formulas:
//
//   SGD:       var -= lr * g
//   Momentum:  m = momentum * m - lr * g
//              var += m                  (nesterov: var += momentum * m
//                                         - lr * g, with the new m)
//   Adagrad:   acc += g * g
//              var -= lr * g / (sqrt(acc) + epsilon)
//   Adam:      lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
//              m = beta1 * m + (1 - beta1) * g
//              v = beta2 * v + (1 - beta2) * g * g
//              var -= lr_t * m / (sqrt(v) + epsilon)
//
// Each operation rounds once, in T: on the host through plain operators, on
// a GPU through the round-to-nearest intrinsics that nvcc never fuses into
// multiply-adds, so that CPU and GPU replicas of one job stay bitwise equal.
//
// Compiles as host C++17 and as CUDA, so it sees neither Abseil nor step.h.
// Pure functions of their arguments: thread-safe.

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define COHORT_HOST_DEVICE __host__ __device__
#else
#define COHORT_HOST_DEVICE
#endif

namespace cohort::optimizer {

// One rounding per operation, the same on both sides.
struct Arithmetic {
#if defined(__CUDA_ARCH__)
  __device__ static float Add(float a, float b) { return __fadd_rn(a, b); }
  __device__ static float Sub(float a, float b) { return __fsub_rn(a, b); }
  __device__ static float Mul(float a, float b) { return __fmul_rn(a, b); }
  __device__ static float Div(float a, float b) { return __fdiv_rn(a, b); }
  __device__ static float Sqrt(float a) { return __fsqrt_rn(a); }
  __device__ static double Add(double a, double b) { return __dadd_rn(a, b); }
  __device__ static double Sub(double a, double b) { return __dsub_rn(a, b); }
  __device__ static double Mul(double a, double b) { return __dmul_rn(a, b); }
  __device__ static double Div(double a, double b) { return __ddiv_rn(a, b); }
  __device__ static double Sqrt(double a) { return __dsqrt_rn(a); }
#else
  template <typename T>
  static T Add(T a, T b) {
    return a + b;
  }
  template <typename T>
  static T Sub(T a, T b) {
    return a - b;
  }
  template <typename T>
  static T Mul(T a, T b) {
    return a * b;
  }
  template <typename T>
  static T Div(T a, T b) {
    return a / b;
  }
  template <typename T>
  static T Sqrt(T a) {
    return std::sqrt(a);
  }
#endif
};

// The hyperparameters, rounded to the variable's type once per update.
template <typename T>
struct Coefficients {
  T lr, momentum, beta1, beta2, epsilon;
  T lr_t;  // Adam's bias-corrected rate for update t; 0 for the others
  bool nesterov;
};

// `adam_t` is Adam's 1-based update count (its bias correction); 0 skips
// lr_t. Host only: pow runs once per update, not per element.
template <typename T>
Coefficients<T> MakeCoefficients(double lr, double momentum, bool nesterov,
                                 double beta1, double beta2, double epsilon,
                                 int64_t adam_t) {
  Coefficients<T> c{static_cast<T>(lr),
                    static_cast<T>(momentum),
                    static_cast<T>(beta1),
                    static_cast<T>(beta2),
                    static_cast<T>(epsilon),
                    T(0),
                    nesterov};
  if (adam_t > 0) {
    const T step = static_cast<T>(adam_t);
    const T beta1_power = std::pow(c.beta1, step);
    const T beta2_power = std::pow(c.beta2, step);
    c.lr_t = c.lr * std::sqrt(T(1) - beta2_power) / (T(1) - beta1_power);
  }
  return c;
}

template <typename T>
COHORT_HOST_DEVICE inline void SgdUpdate(const Coefficients<T>& c, T g,
                                         T& var) {
  using A = Arithmetic;
  var = A::Sub(var, A::Mul(c.lr, g));
}

template <typename T>
COHORT_HOST_DEVICE inline void MomentumUpdate(const Coefficients<T>& c, T g,
                                              T& var, T& m) {
  using A = Arithmetic;
  const T lr_g = A::Mul(c.lr, g);
  m = A::Sub(A::Mul(c.momentum, m), lr_g);
  var = A::Add(var, c.nesterov ? A::Sub(A::Mul(c.momentum, m), lr_g) : m);
}

template <typename T>
COHORT_HOST_DEVICE inline void AdagradUpdate(const Coefficients<T>& c, T g,
                                             T& var, T& acc) {
  using A = Arithmetic;
  acc = A::Add(acc, A::Mul(g, g));
  var = A::Sub(var, A::Div(A::Mul(c.lr, g), A::Add(A::Sqrt(acc), c.epsilon)));
}

template <typename T>
COHORT_HOST_DEVICE inline void AdamUpdate(const Coefficients<T>& c, T g, T& var,
                                          T& m, T& v) {
  using A = Arithmetic;
  m = A::Add(A::Mul(c.beta1, m), A::Mul(A::Sub(T(1), c.beta1), g));
  v = A::Add(A::Mul(c.beta2, v), A::Mul(A::Mul(A::Sub(T(1), c.beta2), g), g));
  var = A::Sub(var, A::Div(A::Mul(c.lr_t, m), A::Add(A::Sqrt(v), c.epsilon)));
}

}  // namespace cohort::optimizer
