#include "bench/sizes.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace cohort::bench {

absl::StatusOr<std::vector<size_t>> ParseSizes(const std::string& text,
                                               const std::string& flag) {
  std::vector<size_t> sizes;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    size_t multiplier = 1;
    const char suffix = part.empty() ? '\0' : part.back();
    if (suffix == 'K' || suffix == 'k') multiplier = size_t{1} << 10;
    if (suffix == 'M' || suffix == 'm') multiplier = size_t{1} << 20;
    if (suffix == 'G' || suffix == 'g') multiplier = size_t{1} << 30;
    if (multiplier != 1) part.remove_suffix(1);
    uint64_t value = 0;
    if (!absl::SimpleAtoi(part, &value) || value == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": \"", part, "\" is not a positive size"));
    }
    sizes.push_back(value * multiplier);
  }
  if (sizes.empty()) return absl::InvalidArgumentError(flag + " is empty");
  return sizes;
}

std::string SizeName(size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
    return absl::StrCat(bytes >> 20, "M");
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0)
    return absl::StrCat(bytes >> 10, "K");
  return absl::StrCat(bytes);
}

absl::StatusOr<bool> ParseCsvFormat(const std::string& format) {
  if (format == "csv") return true;
  if (format == "table") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("--format must be table or csv, not \"", format, "\""));
}

}  // namespace cohort::bench
