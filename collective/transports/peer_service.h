#pragma once

// The receiving side of GrpcTransport: the cohort.v1.Peer service. Each
// incoming stream belongs to one peer rank, named by its hello frame; its
// frames are filed in the rank's mailbox, payloads still in the buffers gRPC
// read them into (peer_frame.h). A stream that breaks marks its peer gone,
// which fails every wait on that peer at once.
//
// Served through gRPC's async API on the transport's completion queue, so
// that a frame is filed on the thread that read it (completion_loop.h).

#include <grpcpp/completion_queue.h>

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cohort/v1/peer.grpc.pb.h"
#include "collective/mailbox.h"
#include "rpc/auth.h"

namespace cohort::collective {

// `mailbox` and `auth` are not owned and must outlive the server.
// Thread-safe.
class PeerService final
    : public v1::Peer::WithRawMethod_Exchange<v1::Peer::Service> {
 public:
  PeerService(std::string group, int rank, int size, Mailbox* mailbox,
              const rpc::Authenticator* auth);

  // Takes streams on `cq` (the server's, polled by a CompletionLoop) until
  // Stop(). Once, after the server started.
  void Serve(grpc::ServerCompletionQueue* cq);
  // Starts no operation from now on; streams end as the server shuts down
  // and cancels them. Call before the server's Shutdown, which must come
  // before the queue's.
  void Stop();

  // Runs `start`, which starts one operation on `cq`, unless stopped.
  // Returns whether it ran. For the streams.
  template <typename Start>
  bool StartOp(Start start) {
    absl::MutexLock lock(&mu_);
    if (stopped_) return false;
    start();
    return true;
  }

  const std::string& group() const { return group_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  Mailbox* mailbox() const { return mailbox_; }
  const rpc::Authenticator& auth() const { return *auth_; }
  grpc::ServerCompletionQueue* cq() const { return cq_; }

 private:
  const std::string group_;
  const int rank_;
  const int size_;
  Mailbox* const mailbox_;
  const rpc::Authenticator* const auth_;
  grpc::ServerCompletionQueue* cq_ = nullptr;  // set by Serve

  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cohort::collective
