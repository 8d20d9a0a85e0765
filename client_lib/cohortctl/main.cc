// cohortctl: the command-line client of a Cohort cluster.

#include <cstdio>
#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client_lib/cohortctl/commands.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "rpc/security_flags.h"

ABSL_FLAG(std::string, coordinator, "",
          "The coordinator's HOST:PORT. Default: $COHORT_COORDINATOR, else the "
          "local cluster that `cohortctl up` started.");
ABSL_FLAG(bool, json, false, "Print JSON instead of a table.");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(5), "Deadline of each RPC.");

namespace cohort::ctl {
namespace {

constexpr char kUsage[] =
    "control a Cohort cluster.\n"
    "\n"
    "Commands:\n"
    "  up [--cluster_spec=FILE]   run a coordinator (and its local tasks) in\n"
    "                             the foreground; without a spec, a default\n"
    "                             local cluster: one chief, one worker, one "
    "ps\n"
    "  status [--json]            the cluster's tasks and their state\n"
    "\n"
    "Examples:\n"
    "  cohortctl up\n"
    "  cohortctl status\n"
    "  cohortctl --coordinator=10.0.0.1:7070 --auth_token_file=token status "
    "--json";

std::string ResolveCoordinator() {
  std::string address = absl::GetFlag(FLAGS_coordinator);
  if (!address.empty()) return address;
  if (const char* env = std::getenv("COHORT_COORDINATOR"); env != nullptr) {
    return env;
  }
  absl::StatusOr<std::string> port =
      ReadFile(DefaultLocalStateDir() + "/coordinator.port");
  if (port.ok() && !port->empty()) {
    return absl::StrCat("127.0.0.1:", std::atoi(port->c_str()));
  }
  return "";
}

int Main(int argc, char** argv) {
  const std::vector<std::string> args = ParseCommandLine(argc, argv, kUsage);
  if (args.empty()) {
    std::fprintf(stderr, "cohortctl: no command given (try --help)\n");
    return 2;
  }
  CommonOptions options;
  options.coordinator = ResolveCoordinator();
  const rpc::SecurityFiles files = rpc::SecurityFilesFromFlags();
  options.client = ClientOptions{.auth_token_file = files.auth_token_file,
                                 .tls_ca_file = files.tls_ca_file,
                                 .tls_cert_file = files.tls_cert_file,
                                 .tls_key_file = files.tls_key_file,
                                 .rpc_timeout = absl::GetFlag(FLAGS_timeout)};
  options.json = absl::GetFlag(FLAGS_json);

  const std::string& command = args[0];
  if (args.size() > 1) {
    std::fprintf(stderr, "cohortctl %s: unexpected argument \"%s\"\n",
                 command.c_str(), args[1].c_str());
    return 2;
  }
  if (command == "status") return StatusCommand(options);
  if (command == "up") return UpCommand(options);
  std::fprintf(stderr, "cohortctl: unknown command \"%s\" (try --help)\n",
               command.c_str());
  return 2;
}

}  // namespace
}  // namespace cohort::ctl

int main(int argc, char** argv) { return cohort::ctl::Main(argc, argv); }
