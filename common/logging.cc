#include "common/logging.h"

#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log_buffer.h"
#include "spdlog/sinks/base_sink.h"
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

// Copies each formatted line into LogBuffer::Default(), for Logs.ReadLog.
class LogBufferSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    std::string text(formatted.data(), formatted.size());
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
      text.pop_back();
    }
    LogBuffer::Default().Append(absl::FromChrono(msg.time), std::move(text));
  }
  void flush_() override {}
};

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
  // stderr for the journal or the log file; the buffer for ReadLog.
  auto logger = std::make_shared<spdlog::logger>(
      std::string(daemon),
      spdlog::sinks_init_list{
          std::make_shared<spdlog::sinks::stderr_color_sink_mt>(),
          std::make_shared<LogBufferSink>()});
  spdlog::drop(std::string(daemon));
  spdlog::register_logger(logger);
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
