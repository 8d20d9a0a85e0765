// cohortctl: the command-line client of a Cohort cluster.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client_lib/cohortctl/commands.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/host_port.h"
#include "rpc/security.h"
#include "rpc/security_flags.h"

ABSL_FLAG(std::string, coordinator, "",
          "The coordinator's HOST:PORT. Default: the cluster `cohortctl up` "
          "started in --state_dir when that is given, else "
          "$COHORT_COORDINATOR, else the default local cluster.");
ABSL_FLAG(bool, json, false,
          "status, submit, watch, jobs, job, cancel, variables, logs: print "
          "JSON instead of text. With submit --wait and watch: the final "
          "JobStatus, the live view going to stderr.");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(5),
          "Deadline of each RPC. A submission gets the larger of --timeout "
          "and 60 s, plus a second per MiB of step library.");
ABSL_DECLARE_FLAG(std::string, state_dir);  // up_command.cc

namespace cohort::ctl {
namespace {

constexpr char kUsage[] =
    "control a Cohort cluster.\n"
    "\n"
    "Commands:\n"
    "  up [--cluster_spec=FILE] [--cpu_devices=N]\n"
    "                     run a coordinator (and its local tasks) in the\n"
    "                     foreground; without a spec, the saved one with\n"
    "                     --resume, else TF_CONFIG's cluster when set, else\n"
    "                     a default local cluster: one chief, one worker,\n"
    "                     one ps\n"
    "  status [--json]    the cluster's tasks and their state\n"
    "  submit --library=PATH --step=NAME --steps=N --global_batch=B\n"
    "         [--init=NAME] [--dataset=NAME] [--strategy=S]\n"
    "         [--communication=C] [--seed=S] [--checkpoint_every=N]\n"
    "         [--checkpoint_interval=10m] [--max_restarts=N]\n"
    "         [--placement_timeout=10m]\n"
    "         [--devices_per_agent=N]\n"
    "         [--logical_devices_per_replica=N]\n"
    "         [--checkpoint_dir=DIR] [--config=JSON|@FILE] [--name=TEXT]\n"
    "         [--collective_timeout=60s] [--early_stop_metric=M\n"
    "         [--early_stop_target=X] [--early_stop_patience=N]\n"
    "         [--early_stop_min_delta=D] [--early_stop_maximize]]\n"
    "         [--eval=FN --eval_dataset=FN [--eval_steps=N]] [--trace=N]\n"
    "         [--ps_partitioner=P --ps_shards=N --ps_min_shard_bytes=B\n"
    "         --ps_max_shard_bytes=B --max_inflight=N\n"
    "         --ps_recovery_timeout=D]\n"
    "         [--submission_id=ID] [--wait] [--json]\n"
    "                     upload a step library and run it; prints the job\n"
    "                     id, or with --wait shows it live until it ends\n"
    "                     (exit 0 only if it SUCCEEDED)\n"
    "  watch JOB [--json] show a job live until it ends\n"
    "  jobs [--json]      every job, oldest first\n"
    "  job JOB [--json]   one job: progress, metrics, placement, restarts\n"
    "  cancel JOB [--json] cancel a job; prints its state\n"
    "  variables JOB [--names=A,B] [--json]\n"
    "                     a ParameterServer job's variables, read from its\n"
    "                     ps tasks while it runs or after it ended\n"
    "  trace JOB [--out=FILE]\n"
    "                     a job submitted with --trace=N as a Chrome trace\n"
    "                     (Perfetto, chrome://tracing): a track per replica\n"
    "                     with input, compute, collectives, optimizer,\n"
    "                     checkpoints and waits on stragglers\n"
    "  logs TARGET [--follow] [--tail=N] [--json]\n"
    "                     log lines of a task (worker:0, ps:1), of the\n"
    "                     coordinator, or of a job (its tasks' lines while\n"
    "                     it ran), read through the coordinator from any\n"
    "                     host; --follow keeps printing new ones\n"
    "\n"
    "Exit codes: 0 success, 1 a failure (or a job that did not succeed),\n"
    "2 bad usage (or a job this cluster cannot run), 3 a job's fate\n"
    "unknown: a submission whose answer was lost, or a watched job whose\n"
    "end was not seen (the coordinator went silent; the job may still run:\n"
    "submit it again only with the same --submission_id).\n"
    "\n"
    "Examples:\n"
    "  cohortctl up\n"
    "  cohortctl status\n"
    "  cohortctl submit --library=./libmnist_steps.so --step=train_step \\\n"
    "      --init=init --dataset=mnist --steps=1000 --global_batch=64 --wait\n"
    "  cohortctl jobs\n"
    "  cohortctl logs 1 --follow\n"
    "  cohortctl --coordinator=10.0.0.1:7070 --auth_token_file=token status "
    "--json";

// How many positional arguments (after the command) each command takes;
// -1: no such command.
int PositionalArguments(const std::string& command) {
  if (command == "watch" || command == "job" || command == "cancel" ||
      command == "variables" || command == "logs" || command == "trace") {
    return 1;
  }
  if (command == "up" || command == "status" || command == "submit" ||
      command == "jobs") {
    return 0;
  }
  return -1;
}

// A flag whose help names other commands ("submit: ...", "submit,
// parameter_server: ...") and that is set for `command` would be ignored
// without a word: `status --cluster_spec=X` checks no cluster X. Returns
// the first such flag's complaint, or "".
std::string MisplacedFlag(const std::string& command) {
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->CurrentValue() == flag->DefaultValue()) continue;
    const std::string help = flag->Help();
    const size_t colon = help.find(':');
    if (colon == std::string::npos) continue;
    std::vector<std::string> commands;
    for (absl::string_view word :
         absl::StrSplit(absl::string_view(help).substr(0, colon), ", ")) {
      if (PositionalArguments(std::string(word)) >= 0) {
        commands.emplace_back(word);
      }
    }
    if (commands.empty() || std::find(commands.begin(), commands.end(),
                                      command) != commands.end()) {
      continue;
    }
    return absl::StrCat("--", name, " is for `cohortctl ",
                        absl::StrJoin(commands, "` and `cohortctl "),
                        "`, not `cohortctl ", command, "`");
  }
  return "";
}

// The coordinator's address, and where it came from into `*source`.
std::string ResolveCoordinator(std::string* source) {
  std::string address = absl::GetFlag(FLAGS_coordinator);
  *source = "--coordinator";
  if (!address.empty()) return address;
  // An explicit --state_dir names the cluster; the environment does not
  // override it.
  std::string state_dir = absl::GetFlag(FLAGS_state_dir);
  if (const char* env = std::getenv("COHORT_COORDINATOR");
      env != nullptr && state_dir.empty()) {
    *source = "$COHORT_COORDINATOR";
    return env;
  }
  if (state_dir.empty()) state_dir = DefaultLocalStateDir();
  *source = state_dir + "/coordinator.port";
  absl::StatusOr<std::string> port_text = ReadFile(*source);
  if (!port_text.ok() || port_text->empty()) return "";
  // The port file holds only the port. The host is the one the coordinator
  // saved with its state (it keeps that host when it must change port), so
  // that `up --listen=HOST:PORT` is found there; loopback when none is saved.
  HostPort local{SavedCoordinatorHost(state_dir).value_or("127.0.0.1"), 0};
  const absl::string_view port = absl::StripAsciiWhitespace(*port_text);
  if (!absl::SimpleAtoi(port, &local.port)) {
    // Left unparsed, for the connection to refuse naming the file's text.
    const bool v6 = absl::StrContains(local.host, ':');
    return absl::StrCat(v6 ? "[" : "", local.host, v6 ? "]:" : ":", port);
  }
  return local.ToString();
}

int Main(int argc, char** argv) {
  const std::vector<std::string> args = ParseCommandLine(argc, argv, kUsage);
  if (args.empty()) {
    std::fprintf(stderr, "cohortctl: no command given (try --help)\n");
    return kUsageError;
  }
  // Finite: watch and logs --follow give up on a silent coordinator after it.
  if (absl::GetFlag(FLAGS_timeout) <= absl::ZeroDuration() ||
      absl::GetFlag(FLAGS_timeout) == absl::InfiniteDuration()) {
    std::fprintf(stderr,
                 "cohortctl: --timeout must be positive and finite, got %s\n",
                 absl::FormatDuration(absl::GetFlag(FLAGS_timeout)).c_str());
    return kUsageError;
  }
  CommonOptions options;
  options.coordinator = ResolveCoordinator(&options.coordinator_source);
  const rpc::SecurityFiles files = rpc::SecurityFilesFromFlags();
  // On stderr, out of the way of output a script reads.
  for (const std::string& warning : rpc::SecretFileWarnings(files)) {
    std::fprintf(stderr, "cohortctl: warning: %s\n", warning.c_str());
  }
  options.client = ClientOptions{.auth_token_file = files.auth_token_file,
                                 .tls_ca_file = files.tls_ca_file,
                                 .tls_cert_file = files.tls_cert_file,
                                 .tls_key_file = files.tls_key_file,
                                 .rpc_timeout = absl::GetFlag(FLAGS_timeout)};
  options.json = absl::GetFlag(FLAGS_json);
  SetConnectionHints(options);

  const std::string& command = args[0];
  if (PositionalArguments(command) < 0) {
    std::fprintf(stderr, "cohortctl: unknown command \"%s\" (try --help)\n",
                 command.c_str());
    return kUsageError;
  }
  if (const std::string misplaced = MisplacedFlag(command);
      !misplaced.empty()) {
    std::fprintf(stderr, "cohortctl %s: %s (try --help)\n", command.c_str(),
                 misplaced.c_str());
    return kUsageError;
  }
  const size_t wanted = PositionalArguments(command);
  if (args.size() > wanted + 1) {
    std::fprintf(stderr, "cohortctl %s: unexpected argument \"%s\"\n",
                 command.c_str(), args[wanted + 1].c_str());
    return kUsageError;
  }
  if (args.size() < wanted + 1) {
    std::fprintf(
        stderr, "cohortctl %s: expected %s (try --help)\n", command.c_str(),
        command == "logs" ? "a task, a job id or coordinator" : "a JOB id");
    return kUsageError;
  }
  if (wanted == 1 && command != "logs") {
    // Caught here, not by the coordinator: a NOT_FOUND would hide the typo.
    int64_t id = 0;
    if (!absl::SimpleAtoi(args[1], &id) || id <= 0 ||
        absl::StrCat(id) != args[1]) {
      std::fprintf(stderr,
                   "cohortctl %s: \"%s\" is not a job id: job ids are "
                   "positive integers, as `cohortctl jobs` lists them\n",
                   command.c_str(), args[1].c_str());
      return kUsageError;
    }
  }
  if (command == "status") return StatusCommand(options);
  if (command == "up") {
    if (options.coordinator_source == "--coordinator") {
      std::fprintf(stderr,
                   "cohortctl up: --coordinator names a running coordinator; "
                   "`up` starts one: pass --listen=HOST:PORT for where it "
                   "serves\n");
      return kUsageError;
    }
    return UpCommand(options);
  }
  if (command == "submit") return SubmitCommand(options);
  if (command == "jobs") return JobsCommand(options);
  if (command == "watch") return WatchCommand(options, args[1]);
  if (command == "job") return JobCommand(options, args[1]);
  if (command == "cancel") return CancelCommand(options, args[1]);
  if (command == "variables") return VariablesCommand(options, args[1]);
  if (command == "logs") return LogsCommand(options, args[1]);
  if (command == "trace") return TraceCommand(options, args[1]);
  std::fprintf(stderr, "cohortctl: unknown command \"%s\" (try --help)\n",
               command.c_str());
  return kUsageError;
}

}  // namespace
}  // namespace cohort::ctl

int main(int argc, char** argv) {
  const int code = cohort::ctl::Main(argc, argv);
  // A command that printed into a full disk did not do its job. Both
  // streams are checked: commands write through std::cout and stdio alike.
  std::cout.flush();
  if (code == 0 &&
      (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout) != 0)) {
    std::fprintf(stderr,
                 "cohortctl: cannot write its output (a full disk, or a "
                 "reader that went away)\n");
    return 1;
  }
  return code;
}
