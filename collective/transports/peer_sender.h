#pragma once

// The sending side of GrpcTransport: one client stream to one peer. Frames
// are queued and written one at a time through gRPC's async API, on the
// transport's completion queue, so a sender never blocks on its peer.
// Frames travel as encoded buffers (peer_frame.h), not as protobuf
// messages, so that payloads are not copied again.

#include <grpcpp/generic/generic_stub.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/v1/peer.pb.h"
#include "collective/transports/completion_loop.h"
#include "rpc/channel.h"

namespace cohort::collective {

// How long gRPC may take to end a cancelled stream and drop its frames.
inline constexpr absl::Duration kCancelGrace = absl::Seconds(30);

// Thread-safe. Close() or Disconnect() before destruction (the destructor
// closes), and before `cq` shuts down.
class PeerSender final {
 public:
  // Opens the stream to `address` and queues `hello` as its first frame.
  // `peer` names the peer in errors: "rank 1 (127.0.0.1:4001)". The
  // stream's operations complete on `cq`, which a CompletionLoop polls.
  PeerSender(const std::string& address, const rpc::Security& security,
             v1::PeerFrame hello, std::string peer, grpc::CompletionQueue* cq);
  ~PeerSender();
  PeerSender(const PeerSender&) = delete;
  PeerSender& operator=(const PeerSender&) = delete;

  // Queues an encoded frame; UNAVAILABLE naming the peer once the stream
  // failed.
  absl::Status Enqueue(grpc::ByteBuffer frame);
  // Waits until the peer has accepted the stream, the stream has ended, or
  // `deadline`; the stream itself waits for a connection as long as it
  // takes. A peer that refuses this rank's credentials fails it with
  // UNAUTHENTICATED or PERMISSION_DENIED, naming the peer; a stream not
  // accepted by `deadline` fails it with DEADLINE_EXCEEDED
  // (WithConnectionError adds why, where gRPC knows).
  absl::Status WaitConnected(absl::Time deadline);
  // `timed_out` (WaitConnected's DEADLINE_EXCEEDED) with what a call to
  // the peer fails with now, where that says more: "connection refused", a
  // TLS handshake's failure. Blocks up to a second.
  absl::Status WithConnectionError(const absl::Status& timed_out);
  // Half-closes once the queue drains, without waiting. Idempotent.
  void BeginClose();
  // Waits until the stream has ended, or `deadline`; true if it ended.
  bool AwaitEnded(absl::Time deadline);
  // BeginClose, then waits for the stream to end until `deadline`, and at
  // least 200 ms from now, then cancels it. Idempotent.
  void Close(absl::Time deadline);
  // Ends the stream now and closes its connection, so that gRPC releases
  // every frame it held, even what it had handed to a socket the peer no
  // longer reads; then fails every later Enqueue. The peer sees the stream
  // break. Returns once the stream has ended. Not concurrently with itself.
  void Disconnect();

 private:
  // Completions, run one at a time by whichever thread polls `cq`.
  void Started(bool ok);
  void AcceptedOrNot(bool ok);
  void Written(bool ok);
  void Read(bool ok);
  void Finished();

  // Starts the next write, or the half-close once closing and drained.
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Asks for the stream's status once it has ended on both sides.
  void FinishIfEndedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for the stream's end; cancels it first when `cancel`.
  void AwaitDone(bool cancel);

  const std::string peer_;
  // Dropped by Disconnect: the last references to the channel.
  std::optional<rpc::Connection> connection_;
  std::optional<grpc::GenericStub> stub_;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> stream_;
  grpc::ByteBuffer unused_read_;  // the peer never writes back
  grpc::Status status_;           // the stream's, once finished

  CompletionTag started_tag_{[this](bool ok) { Started(ok); }};
  CompletionTag metadata_tag_{[this](bool ok) { AcceptedOrNot(ok); }};
  CompletionTag written_tag_{[this](bool ok) { Written(ok); }};
  CompletionTag read_tag_{[this](bool ok) { Read(ok); }};
  CompletionTag finished_tag_{[this](bool) { Finished(); }};

  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);  // front: in flight
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // a write or the half-close
  bool read_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;  // the peer accepted us
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::collective
