// Loaded with LD_PRELOAD into a daemon under test: steps the wall clock the
// way NTP or `date -s` steps a host's, leaving the monotonic clock alone.
//
//   COHORT_TEST_CLOCK_STEP_FILE     holds the step, in whole seconds (may be
//                                   negative); read at most every 50 ms
//   COHORT_TEST_CLOCK_STEP_PROGRAM  the program it applies to (its short
//                                   name), so that children keep the true
//                                   clock though they inherit LD_PRELOAD
//
// Once a stepped time has been returned, "<file>.applied" exists.
//
// The kernel's clock does not move: Abseil's timed waits (Mutex, CondVar,
// Notification), which hand the kernel absolute deadlines on its realtime
// clock computed from the stepped one, last the step longer when it is
// ahead, and end at once when it is back.

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

using ClockGettime = int (*)(clockid_t, timespec*);

ClockGettime RealClockGettime() {
  static const auto real =
      reinterpret_cast<ClockGettime>(dlsym(RTLD_NEXT, "clock_gettime"));
  return real;
}

const char* StepFile() {
  static const char* const file = []() -> const char* {
    const char* program = std::getenv("COHORT_TEST_CLOCK_STEP_PROGRAM");
    if (program == nullptr ||
        std::strcmp(program, program_invocation_short_name) != 0) {
      return nullptr;
    }
    return std::getenv("COHORT_TEST_CLOCK_STEP_FILE");
  }();
  return file;
}

// The step in seconds, from the file as last read.
long Step() {
  static std::atomic<long> step{0};
  static std::atomic<long long> next_read_ns{0};
  const char* file = StepFile();
  if (file == nullptr) return 0;
  timespec mono;
  RealClockGettime()(CLOCK_MONOTONIC, &mono);
  const long long now_ns = mono.tv_sec * 1000000000LL + mono.tv_nsec;
  if (now_ns >= next_read_ns.load()) {
    next_read_ns.store(now_ns + 50000000LL);
    const int saved_errno = errno;  // callers do not expect it to move
    const int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char text[32] = {};
      if (read(fd, text, sizeof(text) - 1) > 0) {
        step.store(std::strtol(text, nullptr, 10));
      }
      close(fd);
    }
    errno = saved_errno;
  }
  const long value = step.load();
  static std::atomic<bool> marked{false};
  if (value != 0 && !marked.exchange(true)) {
    char applied[4096];
    const size_t length = std::strlen(file);
    if (length + sizeof(".applied") <= sizeof(applied)) {
      std::memcpy(applied, file, length);
      std::memcpy(applied + length, ".applied", sizeof(".applied"));
      const int saved_errno = errno;
      const int fd =
          open(applied, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) close(fd);
      errno = saved_errno;
    }
  }
  return value;
}

}  // namespace

extern "C" int clock_gettime(clockid_t id, timespec* ts) {
  const int rc = RealClockGettime()(id, ts);
  if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
    ts->tv_sec += Step();
  }
  return rc;
}

extern "C" int gettimeofday(timeval* tv, void* tz) {
  timespec now;
  const int rc = clock_gettime(CLOCK_REALTIME, &now);
  if (rc != 0) return rc;
  if (tv != nullptr) {
    tv->tv_sec = now.tv_sec;
    tv->tv_usec = now.tv_nsec / 1000;
  }
  (void)tz;
  return 0;
}
