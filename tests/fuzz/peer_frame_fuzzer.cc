// A Peer stream message as the network delivers it: any bytes, cut into
// gRPC slices anywhere, decode to a frame or a batch of frames, or fail with
// DATA_LOSS, never crash, and decoded payloads never claim bytes the input
// did not carry. Frames that decode, batched again, decode to the same
// headers and payloads.

#include <cstdint>
#include <string>
#include <vector>

#include "collective/transports/peer_frame.h"
#include "common/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks where the bytes are cut into slices, as reads off
  // a socket cut them.
  const size_t cut = 1 + data[0] % 61;
  ++data;
  --size;
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < size; at += cut) {
    slices.emplace_back(data + at, std::min(cut, size - at));
  }
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  std::vector<cohort::collective::ReceivedFrame> frames;
  const absl::Status status =
      cohort::collective::DecodePeerFrames(buffer, &frames);
  if (!status.ok()) {
    COHORT_CHECK(status.code() == absl::StatusCode::kDataLoss);
    return 0;
  }
  size_t payload_bytes = 0;
  std::vector<grpc::ByteBuffer> encoded;
  for (const cohort::collective::ReceivedFrame& frame : frames) {
    COHORT_CHECK(frame.header.payload().empty());
    payload_bytes += frame.payload.size();
    const std::string payload(frame.payload);
    encoded.push_back(cohort::collective::EncodePeerFrame(
        frame.header, grpc::Slice(payload.data(), payload.size())));
  }
  COHORT_CHECK(payload_bytes <= size);

  // The frames, batched again, decode to the same headers and payloads.
  std::vector<cohort::collective::ReceivedFrame> again;
  COHORT_CHECK(cohort::collective::DecodePeerFrames(
                   cohort::collective::BatchPeerFrames(encoded), &again)
                   .ok());
  COHORT_CHECK(again.size() == frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    COHORT_CHECK(again[i].payload == frames[i].payload);
    COHORT_CHECK(again[i].header.SerializeAsString() ==
                 frames[i].header.SerializeAsString());
  }
  return 0;
}
