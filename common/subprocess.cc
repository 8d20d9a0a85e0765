#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

extern char** environ;

namespace cohort {

bool ExitStatus::exited() const { return WIFEXITED(raw); }
int ExitStatus::exit_code() const { return WEXITSTATUS(raw); }
bool ExitStatus::signaled() const { return WIFSIGNALED(raw); }
int ExitStatus::term_signal() const { return WTERMSIG(raw); }

std::string ExitStatus::ToString() const {
  if (exited()) return absl::StrCat("exited with code ", exit_code());
  if (signaled()) {
    return absl::StrCat("killed by signal ", term_signal(), " (",
                        strsignal(term_signal()), ")");
  }
  return absl::StrCat("ended with wait status ", raw);
}

namespace {

std::vector<std::string> BuildEnvironment(const SpawnOptions& options) {
  std::set<std::string> dropped(options.unset_env.begin(),
                                options.unset_env.end());
  for (const auto& [key, value] : options.env) dropped.insert(key);
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string key = entry.substr(0, entry.find('='));
    if (!dropped.contains(key)) env.push_back(std::move(entry));
  }
  for (const auto& [key, value] : options.env) {
    env.push_back(absl::StrCat(key, "=", value));
  }
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

absl::StatusOr<Subprocess> Subprocess::Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) {
    return absl::InvalidArgumentError("Spawn: empty argv");
  }
  if (access(options.argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(
        options.argv[0], ": not an executable file: ", strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!options.output_file.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO,
                                     options.output_file.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  // Nothing but stdin, stdout and stderr passes to the child, whichever
  // library opened a descriptor without O_CLOEXEC: an inherited listening
  // socket would hold the daemon's port after it exits, an inherited file
  // its disk space after it is deleted.
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  // Daemons block signals to handle them with sigwait; the child must not
  // inherit that mask or those dispositions.
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &all);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (options.new_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  }
  posix_spawnattr_setflags(&attr, flags);

  std::vector<std::string> argv = options.argv;
  std::vector<std::string> env = BuildEnvironment(options);
  std::vector<char*> c_argv = CStrings(argv);
  std::vector<char*> c_env = CStrings(env);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, &attr,
                             c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat(
        "cannot start ", absl::StrJoin(options.argv, " "), ": ", strerror(rc)));
  }
  return Subprocess(pid);
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(other.pid_), exit_(other.exit_) {
  other.pid_ = -1;
}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  pid_ = other.pid_;
  exit_ = other.exit_;
  other.pid_ = -1;
  return *this;
}

Subprocess::~Subprocess() = default;

std::optional<ExitStatus> Subprocess::Poll() {
  if (exit_.has_value() || pid_ <= 0) return exit_;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_ = ExitStatus{status};
  } else if (r < 0 && errno == ECHILD) {
    exit_ = ExitStatus{0};  // reaped elsewhere; report a clean exit
  }
  return exit_;
}

std::optional<ExitStatus> Subprocess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (auto status = Poll()) return status;
    if (absl::Now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Subprocess::Signal(int signal) {
  if (running()) kill(pid_, signal);
}

ExitStatus Subprocess::Stop(absl::Duration grace) {
  Signal(SIGTERM);
  if (auto status = Wait(grace)) return *status;
  Signal(SIGKILL);
  // SIGKILL cannot be ignored; the wait is bounded all the same.
  if (auto status = Wait(absl::Seconds(5))) return *status;
  return ExitStatus{SIGKILL};
}

bool ProcessAlive(pid_t pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string pid_field, comm, state;
  if (!(stat >> pid_field >> comm >> state)) return true;
  return state != "Z" && state != "X";
}

}  // namespace cohort
