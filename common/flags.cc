#include "common/flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/internal/program_name.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/exit_codes.h"
#include "common/version.h"

namespace cohort {
namespace {

// Flags defined in this source tree are shown as "cohort/<path>"; --help
// filters on that prefix so absl's own flags stay out of the listing.
constexpr absl::string_view kOwnPrefix = "cohort/";

std::string NormalizeFilename(absl::string_view file) {
  absl::string_view root = COHORT_SOURCE_ROOT "/";
  if (!absl::StartsWith(file, root)) return std::string(file);
  const absl::string_view own = file.substr(root.size());
  // An Abseil built inside the tree (tools/sanitize.sh thread builds one
  // under build-tsan/) defines absl's flags there: they stay absl's.
  if (absl::StrContains(own, "absl/")) return std::string(file);
  return absl::StrCat(kOwnPrefix, own);
}

bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return false;
    if (std::strcmp(argv[i], "--help") == 0 ||
        std::strcmp(argv[i], "-help") == 0 || std::strcmp(argv[i], "-h") == 0 ||
        std::strcmp(argv[i], "--helpfull") == 0) {
      return true;
    }
  }
  return false;
}

// absl::ParseCommandLine exits with code 1 on an unknown flag or a value
// that does not parse; every configuration error here exits with 2. So the
// "--name" and "--name=value" arguments are checked first. (A value given
// as the next argument is still absl's to check.)
void CheckFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") return;
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) {
      continue;
    }
    const size_t equals = arg.find('=');
    const absl::string_view name = arg.substr(0, equals);
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && absl::StartsWith(name, "no") &&
        equals == absl::string_view::npos) {
      flag = absl::FindCommandLineFlag(name.substr(2));  // --nofoo
    }
    // absl's own flags, which its parser handles before any other.
    constexpr absl::string_view kAbslFlags[] = {
        "version", "helpfull",   "helpshort",       "helppackage",
        "helpon",  "helpmatch",  "only_check_args", "flagfile",
        "fromenv", "tryfromenv", "undefok"};
    if (flag == nullptr &&
        std::find(std::begin(kAbslFlags), std::end(kAbslFlags), name) !=
            std::end(kAbslFlags)) {
      continue;
    }
    if (flag == nullptr) {
      ExitWithConfigError(absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (see --help)")));
    }
    // A flag's value follows "=", or, as absl also takes it, is the next
    // argument ("--flag value"; not for a bool, which needs none).
    absl::string_view value;
    if (equals != absl::string_view::npos) {
      value = arg.substr(equals + 1);
    } else if (flag->IsOfType<bool>()) {
      continue;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      ExitWithConfigError(absl::InvalidArgumentError(
          absl::StrCat("--", name, " needs a value (--", name, "=VALUE)")));
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      // absl says only that the value is illegal; "5" is the usual mistake.
      const absl::string_view hint =
          flag->IsOfType<absl::Duration>()
              ? " (a duration needs a unit: 500ms, 5s, 2m, 1h30m or inf)"
              : "";
      ExitWithConfigError(absl::InvalidArgumentError(
          absl::StrCat("--", name, ": ", error, hint)));
    }
  }
}

}  // namespace

std::vector<std::string> ParseCommandLine(int argc, char** argv,
                                          absl::string_view usage) {
  // Before gRPC starts: poll(2) per completion queue, not one epoll set that
  // every gRPC thread of the process polls. The Peer data path's loop then
  // alone takes in its sockets' bytes, with no hand-off between threads: a
  // 4 KiB all-reduce between two ranks took a third of the time
  // (bench/RESULTS.md). An operator's GRPC_POLL_STRATEGY still wins.
  setenv("GRPC_POLL_STRATEGY", "poll", /*overwrite=*/0);
  absl::FlagsUsageConfig config;
  config.normalize_filename = NormalizeFilename;
  config.version_string = [] {
    return absl::StrCat("Cohort ", kVersion, "\n");
  };
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);

  if (WantsHelp(argc, argv)) {
    // absl's own --help exits 1 and lists absl's flags too; ours exits 0.
    absl::flags_internal::SetProgramInvocationName(argv[0]);
    absl::flags_internal::FlagsHelp(
        std::cout, kOwnPrefix, absl::flags_internal::HelpFormat::kHumanReadable,
        usage);
    std::exit(0);
  }
  absl::flags_internal::SetProgramInvocationName(argv[0]);
  CheckFlags(argc, argv);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  // Costs a global lock per acquisition on the data path (flags.h).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::vector<std::string> args;
  for (size_t i = 1; i < positional.size(); ++i)
    args.emplace_back(positional[i]);
  return args;
}

void ParseFlagsOnlyCommandLine(int argc, char** argv, absl::string_view usage) {
  const std::vector<std::string> args = ParseCommandLine(argc, argv, usage);
  if (!args.empty()) {
    ExitWithConfigError(absl::InvalidArgumentError(
        absl::StrCat("unexpected argument \"", args[0],
                     "\" (it takes flags only; see --help)")));
  }
}

void ExitWithConfigError(const absl::Status& status) {
  std::fprintf(stderr, "%s: %s\n",
               absl::flags_internal::ShortProgramInvocationName().c_str(),
               std::string(status.message()).c_str());
  std::exit(kExitConfigError);
}

}  // namespace cohort
