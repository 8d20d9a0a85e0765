#include "collective/transports/peer_frame.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace cohort::collective {
namespace {

v1::PeerFrame Header() {
  v1::PeerFrame header;
  header.mutable_tag()->set_sequence(7);
  header.mutable_tag()->set_step(2);
  header.mutable_tag()->set_chunk(3);
  header.set_op_signature("allreduce float32 sum 4");
  return header;
}

// `bytes` cut into slices of `piece` bytes, as gRPC may hand them over.
grpc::ByteBuffer Split(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    slices.emplace_back(bytes.data() + at, std::min(piece, bytes.size() - at));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// Decodes a buffer that holds one frame, as the receiver does.
absl::Status DecodePeerFrame(const grpc::ByteBuffer& buffer,
                             ReceivedFrame* frame) {
  std::vector<ReceivedFrame> frames;
  absl::Status status = DecodePeerFrames(buffer, &frames);
  if (status.ok() && frames.size() != 1) {
    return absl::InternalError(absl::StrCat(frames.size(), " frames"));
  }
  if (status.ok()) *frame = std::move(frames.front());
  return status;
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const auto& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

TEST(PeerFrameTest, RoundTripKeepsHeaderAndPayload) {
  const std::string payload(300, 'x');  // a two-byte length varint
  const grpc::ByteBuffer encoded =
      EncodePeerFrame(Header(), grpc::Slice(payload.data(), payload.size()));
  ReceivedFrame frame;
  ASSERT_TRUE(DecodePeerFrame(encoded, &frame).ok());
  EXPECT_EQ(frame.header.tag().sequence(), 7u);
  EXPECT_EQ(frame.header.tag().chunk(), 3u);
  EXPECT_EQ(frame.header.op_signature(), "allreduce float32 sum 4");
  EXPECT_TRUE(frame.header.payload().empty());
  EXPECT_EQ(std::string(frame.payload), payload);
}

TEST(PeerFrameTest, EncodingIsAValidPeerFrame) {
  const grpc::ByteBuffer encoded =
      EncodePeerFrame(Header(), grpc::Slice("ab", 2));
  v1::PeerFrame parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(encoded)));
  EXPECT_EQ(parsed.payload(), "ab");
  EXPECT_EQ(parsed.tag().step(), 2u);
}

TEST(PeerFrameTest, DecodesAcrossSliceBoundaries) {
  std::string payload(1000, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = char(i * 7);
  const std::string bytes = Flatten(
      EncodePeerFrame(Header(), grpc::Slice(payload.data(), payload.size())));
  // One-byte slices split the key, the length varint and the payload.
  for (size_t piece : {1, 2, 3, 64, 999}) {
    ReceivedFrame frame;
    ASSERT_TRUE(DecodePeerFrame(Split(bytes, piece), &frame).ok()) << piece;
    EXPECT_EQ(std::string(frame.payload), payload) << piece;
    EXPECT_EQ(frame.header.tag().sequence(), 7u) << piece;
  }
}

TEST(PeerFrameTest, DecodesFramesInFieldOrder) {
  v1::PeerFrame whole = Header();
  whole.set_payload("payload");
  ReceivedFrame frame;
  ASSERT_TRUE(
      DecodePeerFrame(Split(whole.SerializeAsString(), 5), &frame).ok());
  EXPECT_EQ(std::string(frame.payload), "payload");
  EXPECT_TRUE(frame.header.payload().empty());
  EXPECT_EQ(frame.header.op_signature(), "allreduce float32 sum 4");
}

TEST(PeerFrameTest, EmptyPayloadAndEmptyFrame) {
  ReceivedFrame frame;
  ASSERT_TRUE(DecodePeerFrame(EncodePeerFrame(Header()), &frame).ok());
  EXPECT_TRUE(frame.payload.empty());
  EXPECT_TRUE(frame.header.has_tag());
  grpc::Slice nothing;
  ASSERT_TRUE(DecodePeerFrame(grpc::ByteBuffer(&nothing, 1), &frame).ok());
  EXPECT_FALSE(frame.header.has_tag());
}

TEST(PeerFrameTest, CorruptFramesAreDataLoss) {
  const std::string payload(50, 'p');
  const std::string good = Flatten(
      EncodePeerFrame(Header(), grpc::Slice(payload.data(), payload.size())));
  // A length past the end of the frame.
  std::string long_length = good;
  long_length[1] = 0x7f;
  // The payload field twice.
  std::string twice = good + good.substr(0, 3) + "abc";
  // A varint that never ends.
  std::string endless = std::string(1, good[0]) + std::string(12, '\xff');
  // Not a protobuf at all, not payload-first.
  std::string garbage = "\x0a\xff\xff\xff";
  for (const std::string& bytes : {long_length, twice, endless, garbage}) {
    ReceivedFrame frame;
    const absl::Status status = DecodePeerFrame(Split(bytes, 4), &frame);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_NE(status.message().find("corrupt peer frame"), std::string::npos)
        << status;
  }
}

TEST(PeerFrameTest, ABatchDecodesToItsFramesInOrder) {
  std::vector<grpc::ByteBuffer> frames;
  std::vector<std::string> payloads;
  for (int i = 0; i < 5; ++i) {
    v1::PeerFrame header = Header();
    header.mutable_tag()->set_chunk(i);
    payloads.push_back(std::string(i == 2 ? 0 : 100 * i + 1, char('a' + i)));
    frames.push_back(EncodePeerFrame(
        header, grpc::Slice(payloads.back().data(), payloads.back().size())));
  }
  v1::PeerFrame hello;
  hello.set_group("g");
  frames.push_back(EncodePeerFrame(hello));
  const std::string bytes = Flatten(BatchPeerFrames(frames));
  ASSERT_EQ(bytes[0], '\0');
  // Slices as gRPC may cut them: through lengths, headers and payloads.
  for (size_t piece : {size_t{1}, size_t{7}, size_t{300}, bytes.size()}) {
    std::vector<ReceivedFrame> decoded;
    ASSERT_TRUE(DecodePeerFrames(Split(bytes, piece), &decoded).ok()) << piece;
    ASSERT_EQ(decoded.size(), 6u) << piece;
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(decoded[i].header.tag().chunk(), static_cast<uint32_t>(i));
      EXPECT_EQ(std::string(decoded[i].payload), payloads[i]) << piece;
    }
    EXPECT_EQ(decoded[5].header.group(), "g");
  }
  // A single frame decodes as one.
  std::vector<ReceivedFrame> one;
  ASSERT_TRUE(DecodePeerFrames(frames[1], &one).ok());
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(std::string(one[0].payload), payloads[1]);
}

TEST(PeerFrameTest, ACorruptBatchIsDataLoss) {
  const std::string payload(50, 'p');
  std::vector<grpc::ByteBuffer> frames = {
      EncodePeerFrame(Header(), grpc::Slice(payload.data(), payload.size())),
      EncodePeerFrame(Header())};
  const std::string good = Flatten(BatchPeerFrames(frames));
  // The first frame's length runs past the end.
  std::string long_length = good;
  long_length[1] = 0x7f;
  // Cut in the middle of the second frame.
  const std::string cut = good.substr(0, good.size() - 2);
  // A frame inside that is not one.
  const std::string garbage = std::string(1, '\0') + "\x04\x0a\xff\xff\xff";
  for (const std::string& bytes : {long_length, cut, garbage}) {
    std::vector<ReceivedFrame> decoded;
    const absl::Status status = DecodePeerFrames(Split(bytes, 4), &decoded);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_NE(status.message().find("corrupt peer frame"), std::string::npos)
        << status;
  }
}

}  // namespace
}  // namespace cohort::collective
