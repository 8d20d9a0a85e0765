// cohortctl trace: a traced job's timeline as a Chrome trace-event file.

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client_lib/cohortctl/commands.h"
#include "client_lib/cohortctl/trace_format.h"

ABSL_FLAG(std::string, out, "",
          "trace: the file to write (Chrome trace-event JSON). Default: "
          "JOB.trace.json.");

namespace cohort::ctl {

int TraceCommand(const CommonOptions& options, const std::string& job_id) {
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kUsageError;
  absl::StatusOr<v1::TraceData> trace = client->GetTrace(job_id);
  if (!trace.ok()) {
    PrintError(trace.status());
    return 1;
  }
  std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) out = absl::StrCat(job_id, ".trace.json");
  // Written through, not replaced: --out may be a pipe or /dev/stdout.
  const std::string json = ChromeTrace(*trace).dump() + "\n";
  std::FILE* file = std::fopen(out.c_str(), "w");
  const bool written =
      file != nullptr &&
      std::fwrite(json.data(), 1, json.size(), file) == json.size();
  const int error = errno;
  if (file == nullptr || std::fclose(file) != 0 || !written) {
    std::fprintf(stderr, "cohortctl: cannot write %s: %s\n", out.c_str(),
                 std::strerror(written ? errno : error));
    return 1;
  }
  int64_t spans = 0;
  for (const v1::ReplicaTrace& replica : trace->replicas()) {
    spans += replica.spans_size();
  }
  // On stderr: stdout may be where the trace went.
  std::fprintf(stderr,
               "wrote %lld spans of %d replica tracks to %s "
               "(open it in https://ui.perfetto.dev or chrome://tracing)\n",
               static_cast<long long>(spans), trace->replicas_size(),
               out.c_str());
  for (const v1::ClockOffset& clock : trace->clocks()) {
    std::fprintf(stderr,
                 "  %s: clock %+.3f ms from the coordinator's (+/- %.3f ms)\n",
                 clock.task().c_str(), clock.offset_ns() / 1e6,
                 clock.uncertainty_ns() / 1e6);
  }
  for (const std::string& missing : trace->missing()) {
    std::fprintf(stderr, "cohortctl: warning: not in the trace: %s\n",
                 missing.c_str());
  }
  return 0;
}

}  // namespace cohort::ctl
