#include "tests/testing/test_hosts.h"

#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

const absl::Duration kScriptTimeout = absl::Seconds(60);

CommandResult RunScript(std::vector<std::string> args) {
  args.insert(args.begin(), TestHosts::Script());
  return RunCommand(args, kScriptTimeout,
                    {{"TESTHOSTS_OWNER", absl::StrCat(getpid())}});
}

// Sets whose owning test process is gone (killed before its destructor ran).
// Only the harness's own sets (named below), under the script's lock, so
// that neither a set somebody made by hand nor one being made is removed.
void RemoveOrphanedSets() { RunScript({"reap", "^t[0-9]+$"}); }

}  // namespace

std::string TestHosts::Script() {
  return std::string(COHORT_SOURCE_ROOT) + "/tests/testing/testhosts.sh";
}

absl::StatusOr<std::unique_ptr<TestHosts>> TestHosts::Create(int n) {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        "test hosts need root (network namespaces, a bridge, tc, iptables); "
        "run the tests as root, as CI does");
  }
  for (const char* tool : {"/usr/sbin/ip", "/usr/bin/unshare",
                           "/usr/bin/nsenter", "/usr/sbin/tc"}) {
    if (access(tool, X_OK) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "test hosts need ", tool, " (Debian: iproute2, util-linux)"));
    }
  }
  RemoveOrphanedSets();
  // Short, so that interface names stay within 15 characters.
  const std::string name = absl::StrCat("t", getpid() % 100000);
  CommandResult up = RunScript({"up", name, absl::StrCat(n)});
  if (up.exit_code != 0) {
    RunScript({"down", name});
    return absl::FailedPreconditionError(
        absl::StrCat("could not make ", n, " test hosts: ", up.output));
  }
  CommandResult bridge = RunScript({"addr", name, "0"});
  std::vector<std::string> octets =
      absl::StrSplit(absl::StripAsciiWhitespace(bridge.output), '.');
  int subnet = -1;
  if (bridge.exit_code != 0 || octets.size() != 4 ||
      !absl::SimpleAtoi(octets[2], &subnet)) {
    RunScript({"down", name});
    return absl::InternalError(
        absl::StrCat("test hosts: no bridge address: ", bridge.output));
  }
  return std::unique_ptr<TestHosts>(new TestHosts(name, n, subnet));
}

TestHosts::TestHosts(std::string name, int n, int subnet)
    : name_(std::move(name)), n_(n), subnet_(subnet) {}

TestHosts::~TestHosts() { RunScript({"down", name_}); }

std::string TestHosts::address(int i) const {
  return absl::StrCat("198.18.", subnet_, ".", i == 0 ? 254 : i);
}

std::string TestHosts::hostname(int i) const {
  return absl::StrCat(name_, "-", i);
}

std::vector<std::string> TestHosts::Command(
    int i, std::vector<std::string> argv) const {
  std::vector<std::string> command = {Script(), "exec", name_, absl::StrCat(i)};
  command.insert(command.end(), argv.begin(), argv.end());
  return command;
}

absl::Status TestHosts::Run(std::vector<std::string> args) const {
  CommandResult result = RunScript(args);
  if (result.exit_code == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "testhosts.sh ", absl::StrJoin(args, " "), ": ", result.output));
}

absl::Status TestHosts::SetLink(int i, bool up) {
  return Run({"link", name_, absl::StrCat(i), up ? "up" : "down"});
}

absl::Status TestHosts::AddAddress(int i, const std::string& cidr) {
  return Run({"address", name_, absl::StrCat(i), cidr});
}

absl::Status TestHosts::LimitRate(int i, const std::string& rate) {
  return Run({"rate", name_, absl::StrCat(i), rate});
}

absl::Status TestHosts::AddLoss(int i, double percent) {
  return Run({"loss", name_, absl::StrCat(i), absl::StrCat(percent)});
}

absl::Status TestHosts::Firewall(int i, const std::string& ports) {
  return Run({"firewall", name_, absl::StrCat(i), ports});
}

absl::Status TestHosts::ClearFaults(int i) {
  return Run({"clear", name_, absl::StrCat(i)});
}

}  // namespace cohort::testing
