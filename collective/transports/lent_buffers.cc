#include "collective/transports/lent_buffers.h"

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace cohort::collective {

struct LentBuffers::State {
  mutable absl::Mutex mu;
  size_t outstanding ABSL_GUARDED_BY(mu) = 0;
};

// `user_data` is a heap copy of the shared state pointer, which keeps the
// state alive until the last slice is released.
void LentBuffers::Release(void* user_data) {
  auto* state = static_cast<std::shared_ptr<State>*>(user_data);
  {
    absl::MutexLock lock(&(*state)->mu);
    --(*state)->outstanding;
  }
  delete state;
}

LentBuffers::LentBuffers() : state_(std::make_shared<State>()) {}

grpc::Slice LentBuffers::Lend(const void* data, size_t bytes) {
  {
    absl::MutexLock lock(&state_->mu);
    ++state_->outstanding;
  }
  // gRPC only reads a slice it sends; its API is not const-qualified.
  return grpc::Slice(const_cast<void*>(data), bytes, &Release,
                     new std::shared_ptr<State>(state_));
}

bool LentBuffers::AwaitReleased(absl::Time deadline) const {
  auto released = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    return state_->outstanding == 0;
  };
  absl::MutexLock lock(&state_->mu);
  return state_->mu.AwaitWithDeadline(absl::Condition(&released), deadline);
}

size_t LentBuffers::outstanding() const {
  absl::MutexLock lock(&state_->mu);
  return state_->outstanding;
}

}  // namespace cohort::collective
