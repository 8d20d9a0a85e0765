#pragma once

// The receiving side of GrpcTransport: the cohort.v1.Peer service. Each
// incoming stream belongs to one peer rank, named by its hello frame; its
// frames are filed in the rank's mailbox, payloads still in the buffers gRPC
// read them into (peer_frame.h). A stream that breaks marks its peer gone,
// which fails every wait on that peer at once.

#include <string>

#include "cohort/v1/peer.grpc.pb.h"
#include "collective/mailbox.h"
#include "rpc/auth.h"

namespace cohort::collective {

// `mailbox` and `auth` are not owned and must outlive the server.
// Thread-safe.
class PeerService final
    : public v1::Peer::WithRawCallbackMethod_Exchange<v1::Peer::Service> {
 public:
  PeerService(std::string group, int rank, int size, Mailbox* mailbox,
              const rpc::Authenticator* auth);

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Exchange(
      grpc::CallbackServerContext* context) override;

  const std::string& group() const { return group_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  Mailbox* mailbox() const { return mailbox_; }

 private:
  const std::string group_;
  const int rank_;
  const int size_;
  Mailbox* const mailbox_;
  const rpc::Authenticator* const auth_;
};

}  // namespace cohort::collective
