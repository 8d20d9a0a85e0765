#pragma once

// The sending side of GrpcTransport: one client stream to one peer. Frames
// are queued and written one at a time by gRPC's callback API, so a sender
// never blocks on its peer. Frames travel as encoded buffers (peer_frame.h),
// not as protobuf messages, so that payloads are not copied again.

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
#include "rpc/channel.h"

namespace cohort::collective {

// Thread-safe. Close() before destruction (the destructor does it).
class PeerSender final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Opens the stream to `address` and queues `hello` as its first frame.
  // `peer` names the peer in errors: "rank 1 (127.0.0.1:4001)".
  PeerSender(const std::string& address, const rpc::Security& security,
             v1::PeerFrame hello, std::string peer);
  ~PeerSender() override;

  // Queues an encoded frame; UNAVAILABLE naming the peer once the stream
  // failed.
  absl::Status Enqueue(grpc::ByteBuffer frame);
  // Waits until the stream is up (its hello written), it failed, or
  // `deadline`; the stream itself waits for a connection as long as it
  // takes.
  absl::Status WaitConnected(absl::Time deadline);
  // Half-closes once the queue drains and waits up to `grace` for the
  // stream to end, then cancels it. Idempotent.
  void Close(absl::Duration grace);
  // Ends the stream now and closes its connection, so that gRPC releases
  // every frame it held, even what it had handed to a socket the peer no
  // longer reads; then fails every later Enqueue. The peer sees the stream
  // break. Returns once the stream has ended. Not concurrently with itself.
  void Disconnect();

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string peer_;
  // Dropped by Disconnect: the last references to the channel.
  std::optional<rpc::Connection> connection_;
  std::optional<grpc::GenericStub> stub_;
  std::unique_ptr<grpc::ClientContext> context_;
  grpc::ByteBuffer unused_read_;  // the peer never writes back

  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);  // front: in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::collective
