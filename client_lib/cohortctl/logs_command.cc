// cohortctl logs: a task's, the coordinator's or a job's log lines, read
// through the coordinator.

#include <cstdio>
#include <iostream>

#include "absl/flags/flag.h"
#include "client_lib/cohortctl/commands.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(bool, follow, false,
          "logs: keep printing new lines (a task's until interrupted, a "
          "job's until it ends).");
ABSL_FLAG(int, tail, 0,
          "logs: only the last N lines of each task (0: every line held).");

namespace cohort::ctl {

int LogsCommand(const CommonOptions& options, const std::string& target) {
  const int tail = absl::GetFlag(FLAGS_tail);
  if (tail < 0) {
    std::fprintf(stderr, "cohortctl logs: --tail must not be negative\n");
    return kUsageError;
  }
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kUsageError;
  const absl::Status streamed = client->StreamLogs(
      target, {.tail_lines = tail, .follow = absl::GetFlag(FLAGS_follow)},
      [&](const v1::LogChunk& chunk) {
        if (chunk.dropped() > 0) {
          std::fprintf(stderr,
                       "cohortctl logs: %lld lines were no longer held\n",
                       static_cast<long long>(chunk.dropped()));
        }
        for (const v1::LogLine& line : chunk.lines()) {
          if (options.json) {
            std::cout << nlohmann::json{{"task", line.task()},
                                        {"seq", line.seq()},
                                        {"time_unix_ms", line.time_unix_ms()},
                                        {"text", line.text()}}
                             .dump()
                      << '\n';
          } else {
            // Each line already names its daemon and task.
            std::cout << line.text() << '\n';
          }
        }
        std::cout.flush();
        return static_cast<bool>(std::cout);
      });
  if (!streamed.ok()) {
    PrintError(streamed);
    return 1;
  }
  return 0;
}

}  // namespace cohort::ctl
