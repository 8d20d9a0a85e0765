#pragma once

// Helpers shared by the ps tests: typed values to and from the byte strings
// the ps protocol carries, variable specs, and pushes.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/v1/ps.pb.h"
#include "ps_server/variable_store.h"

namespace cohort::ps::test_util {

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(T));
}

template <typename T>
std::vector<T> Values(const std::string& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

// One push of one variable, applied and counted as the service does.
inline absl::Status Push(VariableStore& store, const JobRef& job,
                         const std::string& worker, const std::string& name,
                         std::string_view bytes) {
  absl::Status applied = store.Apply(job, worker, name, bytes);
  if (applied.ok()) store.CountPush();
  return applied;
}

inline v1::PsVariableSpec Spec(const std::string& name,
                               std::vector<int64_t> shape,
                               v1::PsDType dtype = v1::PS_FLOAT32) {
  v1::PsVariableSpec spec;
  spec.set_name(name);
  for (int64_t dim : shape) spec.add_shape(dim);
  spec.set_dtype(dtype);
  return spec;
}

}  // namespace cohort::ps::test_util
