#include "common/executor.h"

#include <pthread.h>

#include "absl/strings/str_cat.h"

namespace cohort {

Executor::Executor(int threads, std::string name) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { Loop(); });
    const std::string thread_name = absl::StrCat(name, "-", i).substr(0, 15);
    pthread_setname_np(threads_.back().native_handle(), thread_name.c_str());
  }
}

Executor::~Executor() { Shutdown(); }

void Executor::Post(std::function<void()> work) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      queue_.push_back(std::move(work));
      return;
    }
  }
  work();
}

size_t Executor::Queued() {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

void Executor::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

void Executor::Loop() {
  while (true) {
    std::function<void()> work;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Executor* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) {
            return e->stopping_ || !e->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping, and nothing left to run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
  }
}

}  // namespace cohort
