// `cohortctl watch`, `jobs`, `job`, `cancel` and `variables`, and the live
// view that `submit --wait` shares.

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client_lib/cohortctl/commands.h"
#include "client_lib/cohortctl/job_format.h"
#include "client_lib/cohortctl/progress.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::vector<std::string>, names, {},
          "variables: the variables to read, comma-separated; default all.");

namespace cohort::ctl {
namespace {

constexpr int kDefaultColumns = 80;

// What Ctrl-C during a watch writes, composed before the handler is set so
// that the handler only calls write(2). A live bar's line (on bar_fd) is
// ended first, so the note and the shell's prompt start on fresh lines.
char interrupt_note[256];
volatile std::sig_atomic_t interrupt_note_size = 0;
volatile std::sig_atomic_t bar_fd = -1;

// Ctrl-C while following a job: say that the job goes on and how to reach
// it (a script must not take the exit for the job's end), then die of the
// signal as usual.
void NoteJobGoesOnAndDie(int signal_number) {
  if (bar_fd >= 0) {
    const ssize_t ignored = write(bar_fd, "\n", 1);
    (void)ignored;
  }
  if (interrupt_note_size > 0) {
    const ssize_t ignored =
        write(STDERR_FILENO, interrupt_note, interrupt_note_size);
    (void)ignored;
  }
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

// Sets the Ctrl-C note for `job_id` while it lives; `live_bar_fd` is the
// terminal a bar is drawn on, or -1.
class InterruptNote {
 public:
  InterruptNote(const std::string& job_id, int live_bar_fd) {
    const int size = std::snprintf(
        interrupt_note, sizeof(interrupt_note),
        "cohortctl: interrupted; job %s goes on: `cohortctl watch %s` "
        "follows it, `cohortctl cancel %s` stops it\n",
        job_id.c_str(), job_id.c_str(), job_id.c_str());
    interrupt_note_size =
        std::clamp(size, 0, static_cast<int>(sizeof(interrupt_note)) - 1);
    bar_fd = live_bar_fd;
    // A SIGINT ignored (a job of a shell without job control) stays so.
    struct sigaction note {};
    note.sa_handler = NoteJobGoesOnAndDie;
    sigemptyset(&note.sa_mask);
    if (sigaction(SIGINT, nullptr, &previous_) == 0 &&
        previous_.sa_handler != SIG_IGN) {
      installed_ = sigaction(SIGINT, &note, nullptr) == 0;
    }
  }
  ~InterruptNote() {
    if (installed_) sigaction(SIGINT, &previous_, nullptr);
    interrupt_note_size = 0;
    bar_fd = -1;
  }
  InterruptNote(const InterruptNote&) = delete;
  InterruptNote& operator=(const InterruptNote&) = delete;

 private:
  struct sigaction previous_ {};
  bool installed_ = false;
};

bool IsLiveTerminal(int fd) {
  if (!isatty(fd)) return false;
  const char* term = std::getenv("TERM");
  return term == nullptr || std::strcmp(term, "dumb") != 0;
}

int TerminalColumns(int fd) {
  winsize size{};
  if (ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  if (const char* columns = std::getenv("COLUMNS"); columns != nullptr) {
    if (const int n = std::atoi(columns); n > 0) return n;
  }
  return kDefaultColumns;
}

void Write(std::FILE* stream, const std::string& text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
}

int PrintJson(const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = ProtoToJson(message);
  if (!json.ok()) {
    PrintError(json.status());
    return 1;
  }
  std::cout << *json << std::endl;
  return 0;
}

}  // namespace

int WatchUntilEnd(const Client& client, const std::string& job_id, bool json,
                  bool exists) {
  // With --json stdout carries one document; the view goes to stderr.
  std::FILE* stream = json ? stderr : stdout;
  const int fd = fileno(stream);
  const bool terminal = IsLiveTerminal(fd);
  WatchView view(terminal, terminal ? TerminalColumns(fd) : kDefaultColumns);
  bool seen = exists;  // the job is known to exist
  absl::StatusOr<v1::JobStatus> job;
  {
    InterruptNote note(job_id, terminal ? fd : -1);
    job = client.WatchJob(job_id, [&](const v1::JobStatus& status) {
      seen = true;
      Write(stream, view.Update(status, absl::Now()));
      return true;
    });
  }
  if (!job.ok()) {
    Write(stream, view.Interrupt());
    PrintError(job.status());
    if (!absl::IsUnavailable(job.status()) &&
        !absl::IsDeadlineExceeded(job.status())) {
      return 1;
    }
    // Not a failed job: a script must not take it for one and submit again,
    // whether the coordinator went silent mid-watch or (restarting, say)
    // never answered.
    if (seen) {
      std::fprintf(stderr,
                   "cohortctl: job %s may still be running; `cohortctl watch "
                   "%s` follows it again\n",
                   job_id.c_str(), job_id.c_str());
    } else {
      std::fprintf(stderr,
                   "cohortctl: job %s was not seen: whether it runs is unknown "
                   "until the coordinator answers; `cohortctl watch %s` "
                   "tries again\n",
                   job_id.c_str(), job_id.c_str());
    }
    return kOutcomeUnknown;
  }
  Write(stream, view.Finish(*job, absl::Now()));
  if (json && PrintJson(*job) != 0) return 1;
  if (job->state() == v1::JOB_SUCCEEDED) return 0;
  std::fprintf(
      stderr, "cohortctl: job %s %s: %s\n", job_id.c_str(),
      JobStateName(job->state()).c_str(),
      job->error().empty() ? "(no error reported)" : job->error().c_str());
  return 1;
}

int WatchCommand(const CommonOptions& options, const std::string& job_id) {
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kUsageError;
  return WatchUntilEnd(*client, job_id, options.json);
}

int JobsCommand(const CommonOptions& options) {
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kUsageError;
  absl::StatusOr<std::vector<v1::JobStatus>> jobs = client->ListJobs();
  if (!jobs.ok()) {
    PrintError(jobs.status());
    return 1;
  }
  if (options.json) {
    v1::ListJobsResponse response;
    for (v1::JobStatus& job : *jobs) *response.add_jobs() = std::move(job);
    return PrintJson(response);
  }
  std::cout << JobsTable(*jobs, absl::Now());
  return 0;
}

int JobCommand(const CommonOptions& options, const std::string& job_id) {
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kUsageError;
  absl::StatusOr<v1::JobStatus> job = client->GetJob(job_id);
  if (!job.ok()) {
    PrintError(job.status());
    return 1;
  }
  if (options.json) return PrintJson(*job);
  std::cout << JobDetails(*job, absl::Now(), absl::LocalTimeZone());
  return 0;
}

int CancelCommand(const CommonOptions& options, const std::string& job_id) {
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kUsageError;
  absl::StatusOr<v1::JobStatus> job = client->CancelJob(job_id);
  if (!job.ok()) {
    PrintError(job.status());
    return 1;
  }
  if (options.json) return PrintJson(*job);
  std::string line =
      absl::StrCat("job ", job_id, " ", JobStateName(job->state()));
  if (job->state() == v1::JOB_SUCCEEDED || job->state() == v1::JOB_FAILED) {
    absl::StrAppend(&line, " (it had already ended)");
  } else if (!IsTerminal(job->state())) {
    absl::StrAppend(&line, " (cancellation requested)");
  }
  std::cout << line << std::endl;
  return 0;
}

int VariablesCommand(const CommonOptions& options, const std::string& job_id) {
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kUsageError;
  absl::StatusOr<std::map<std::string, HostTensor>> variables =
      client->FetchVariables(job_id, absl::GetFlag(FLAGS_names));
  if (!variables.ok()) {
    PrintError(variables.status());
    return 1;
  }
  if (!options.json) {
    std::cout << VariablesTable(*variables);
    return 0;
  }
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, tensor] : *variables) {
    // JSON numbers are doubles; int64 beyond 2^53 would not survive anyway.
    nlohmann::json values = ValuesAsDoubles(tensor);
    out[name] = {{"dtype", tensor.dtype},
                 {"shape", tensor.shape},
                 {"values", std::move(values)}};
  }
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace cohort::ctl
