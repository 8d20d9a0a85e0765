// cohortctl trace: a traced job's timeline as a Chrome trace-event file.

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client_lib/cohortctl/commands.h"
#include "client_lib/cohortctl/trace_format.h"
#include "common/file_util.h"

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
  if (absl::Status written =
          WriteFileAtomically(out, ChromeTrace(*trace).dump() + "\n");
      !written.ok()) {
    PrintError(written);
    return 1;
  }
  int64_t spans = 0;
  for (const v1::ReplicaTrace& replica : trace->replicas()) {
    spans += replica.spans_size();
  }
  std::printf(
      "wrote %lld spans of %d replica tracks to %s "
      "(open it in https://ui.perfetto.dev or chrome://tracing)\n",
      static_cast<long long>(spans), trace->replicas_size(), out.c_str());
  for (const v1::ClockOffset& clock : trace->clocks()) {
    std::printf("  %s: clock %+.3f ms from the coordinator's (+/- %.3f ms)\n",
                clock.task().c_str(), clock.offset_ns() / 1e6,
                clock.uncertainty_ns() / 1e6);
  }
  return 0;
}

}  // namespace cohort::ctl
