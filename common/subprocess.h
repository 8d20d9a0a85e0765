#pragma once

// A child process started with posix_spawn. Used by the coordinator's
// supervisor and by the e2e test harness, so both run the same code.

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace cohort {

struct SpawnOptions {
  std::vector<std::string> argv;           // argv[0] is the program path
  std::map<std::string, std::string> env;  // set on top of our environment
  std::vector<std::string> unset_env;      // removed from the environment
  std::string output_file;  // stdout and stderr appended here; empty inherits
  bool new_process_group = false;  // so that a terminal's ^C does not reach it
};

// How a process ended.
struct ExitStatus {
  int raw = 0;  // as waitpid reports it

  bool exited() const;
  int exit_code() const;  // when exited()
  bool signaled() const;
  int term_signal() const;  // when signaled()
  // "exited with code 3", "killed by signal 9 (Killed)".
  std::string ToString() const;
};

// Owns one child process. Movable, not copyable. The destructor does not
// kill: call Kill() first when the child must not outlive its owner.
// Not thread-safe; one owner thread at a time.
class Subprocess {
 public:
  // Spawns the child with an empty signal mask and default dispositions.
  static absl::StatusOr<Subprocess> Spawn(const SpawnOptions& options);

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !exit_.has_value(); }

  // Reaps the child if it has ended; never blocks.
  std::optional<ExitStatus> Poll();
  // Waits up to `timeout` for the child to end.
  std::optional<ExitStatus> Wait(absl::Duration timeout);
  // Sends `signal` (no-op once reaped).
  void Signal(int signal);
  // SIGTERM, then SIGKILL after `grace`; always reaps. Returns how it ended.
  ExitStatus Stop(absl::Duration grace);

 private:
  explicit Subprocess(pid_t pid) : pid_(pid) {}

  pid_t pid_ = -1;
  std::optional<ExitStatus> exit_;
};

// True while a process with this pid exists (not a zombie). For processes
// that are not our children, such as tasks adopted from a previous
// coordinator.
bool ProcessAlive(pid_t pid);

}  // namespace cohort
