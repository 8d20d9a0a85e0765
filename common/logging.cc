#include "common/logging.h"

#include <mutex>

#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_color_sinks.h"

namespace cohort {
namespace {

std::mutex& DaemonMutex() {
  static std::mutex mu;
  return mu;
}
std::string& DaemonName() {
  static std::string name = "cohort";
  return name;
}

void ApplyPattern(absl::string_view identity) {
  std::string prefix = DaemonName();
  if (!identity.empty()) absl::StrAppend(&prefix, " ", identity);
  spdlog::set_pattern(
      absl::StrCat("%Y-%m-%dT%H:%M:%S.%e %L [", prefix, "] %v"));
}

}  // namespace

absl::Status InitLogging(absl::string_view daemon, absl::string_view identity,
                         absl::string_view level) {
  const spdlog::level::level_enum parsed =
      spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log_level: unknown level \"", level,
                     "\" (expected trace, debug, info, warn, error or off)"));
  }
  std::lock_guard<std::mutex> lock(DaemonMutex());
  DaemonName() = std::string(daemon);
  auto logger = spdlog::stderr_color_mt(std::string(daemon));
  spdlog::set_default_logger(logger);
  spdlog::set_level(parsed);
  spdlog::flush_on(spdlog::level::info);
  ApplyPattern(identity);
  return absl::OkStatus();
}

void SetLogIdentity(absl::string_view identity) {
  std::lock_guard<std::mutex> lock(DaemonMutex());
  ApplyPattern(identity);
}

}  // namespace cohort
