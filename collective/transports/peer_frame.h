#pragma once

// The wire form of a PeerFrame on the Peer stream. It is a PeerFrame's
// protobuf encoding with the payload field written first: any PeerFrame
// encoding decodes, and one whose payload comes first is received without
// copying the payload, which stays in the buffers gRPC read it into.

#include <grpcpp/support/byte_buffer.h>

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "cohort/v1/peer.pb.h"

namespace cohort::collective {

// The initial metadata a peer server sends on a stream whose credentials
// it accepted, before any frame: the sender's proof that it is in, since
// its own writes complete whether or not the peer refused it.
inline constexpr char kPeerAcceptedMetadata[] = "cohort-peer-accepted";

// A frame as received: everything but the payload, and the payload.
struct ReceivedFrame {
  v1::PeerFrame header;  // its payload field is empty
  absl::Cord payload;
};

// Encodes `header` (whose payload must be empty) with `payload`, which the
// buffer references, not copies.
grpc::ByteBuffer EncodePeerFrame(const v1::PeerFrame& header,
                                 grpc::Slice payload = grpc::Slice());

// Encoded frames as one message, in order, referencing their bytes: a zero
// byte (no PeerFrame encoding starts with one: field 0 does not exist),
// then each frame's length and bytes. A sender whose stream is busy sends
// the frames that queued meanwhile as one message, so that the per-message
// cost of gRPC is paid once for them all.
grpc::ByteBuffer BatchPeerFrames(const std::vector<grpc::ByteBuffer>& frames);

// Decodes one frame or a batch, appending the frames in order; each keeps a
// reference to its payload bytes. Fails with DATA_LOSS naming what is wrong.
absl::Status DecodePeerFrames(const grpc::ByteBuffer& buffer,
                              std::vector<ReceivedFrame>* frames);

}  // namespace cohort::collective
