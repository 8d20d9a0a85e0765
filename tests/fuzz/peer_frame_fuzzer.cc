// A Peer stream frame as the network delivers it: any bytes, cut into gRPC
// slices anywhere, decode to a frame or fail with DATA_LOSS, never crash,
// and a decoded payload never claims bytes the input did not carry. A frame
// that decodes re-encodes to the same header and payload.

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
  cohort::collective::ReceivedFrame frame;
  const absl::Status status = cohort::collective::DecodePeerFrame(buffer, &frame);
  if (!status.ok()) {
    COHORT_CHECK(status.code() == absl::StatusCode::kDataLoss);
    return 0;
  }
  COHORT_CHECK(frame.header.payload().empty());
  COHORT_CHECK(frame.payload.size() <= size);

  const std::string payload(frame.payload);
  grpc::ByteBuffer again = cohort::collective::EncodePeerFrame(
      frame.header, grpc::Slice(payload.data(), payload.size()));
  cohort::collective::ReceivedFrame round_trip;
  COHORT_CHECK(cohort::collective::DecodePeerFrame(again, &round_trip).ok());
  COHORT_CHECK(round_trip.payload == frame.payload);
  COHORT_CHECK(round_trip.header.SerializeAsString() ==
               frame.header.SerializeAsString());
  return 0;
}
