#include "collective/transports/completion_loop.h"

namespace cohort::collective {

CompletionLoop::CompletionLoop(grpc::CompletionQueue* cq)
    : thread_([cq] {
        void* tag = nullptr;
        bool ok = false;
        while (cq->Next(&tag, &ok)) static_cast<CompletionTag*>(tag)->Complete(ok);
      }) {}

CompletionLoop::~CompletionLoop() { thread_.join(); }

}  // namespace cohort::collective
