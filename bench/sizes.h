#pragma once

// Byte sizes on benchmark command lines and in their tables: "4K", "16M".

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort::bench {

// "4K,1M,16M" (K, M, G are powers of 1024). INVALID_ARGUMENT naming `flag`
// for an empty list or a size that is not positive.
absl::StatusOr<std::vector<size_t>> ParseSizes(
    const std::string& text, const std::string& flag = "--sizes");

// 4096 -> "4K", 16777216 -> "16M", 1000 -> "1000".
std::string SizeName(size_t bytes);

}  // namespace cohort::bench
