#pragma once

// What every benchmark's command line shares: byte sizes ("4K", "16M"),
// also in their tables, and the output format.

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

// --format: true for "csv", false for "table"; INVALID_ARGUMENT otherwise.
absl::StatusOr<bool> ParseCsvFormat(const std::string& format);

}  // namespace cohort::bench
