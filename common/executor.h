#pragma once

// A fixed set of owned threads that run posted closures in order of
// posting. Daemons use one to keep slow work (hashing and writing a large
// file, applying an optimizer, a blocking wait) off the gRPC threads that
// also answer heartbeats and health checks.

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace cohort {

// Thread-safe. The destructor runs Shutdown().
class Executor {
 public:
  // `name` appears in the threads' names (at most 15 characters in all).
  Executor(int threads, std::string name);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Queues `work`. After Shutdown began, runs it on the calling thread, so
  // that a caller waiting on it is never left hanging.
  void Post(std::function<void()> work);
  // How many posted closures have not started yet.
  size_t Queued();
  // Runs what is queued, then joins the threads. Idempotent.
  void Shutdown();

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace cohort
