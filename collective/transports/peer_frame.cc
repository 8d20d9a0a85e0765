#include "collective/transports/peer_frame.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"

namespace cohort::collective {
namespace {

// PeerFrame.payload: field 4, length-delimited.
constexpr uint8_t kPayloadKey = (4 << 3) | 2;
constexpr size_t kMaxVarintBytes = 10;
// The first byte of a batch of frames.
constexpr uint8_t kBatchMarker = 0;

void AppendVarint(uint64_t value, std::string* out) {
  for (;; value >>= 7) {
    const uint8_t low = value & 0x7f;
    if (value < 0x80) {
      out->push_back(static_cast<char>(low));
      return;
    }
    out->push_back(static_cast<char>(low | 0x80));
  }
}

// Reads bytes across the slices of one buffer, in order.
class SliceReader {
 public:
  explicit SliceReader(const std::vector<grpc::Slice>& slices)
      : slices_(slices) {}

  size_t position() const { return position_; }

  bool ReadByte(uint8_t* byte) {
    while (index_ < slices_.size() && offset_ == slices_[index_].size()) {
      ++index_;
      offset_ = 0;
    }
    if (index_ == slices_.size()) return false;
    *byte = slices_[index_].begin()[offset_++];
    ++position_;
    return true;
  }

  bool ReadVarint(uint64_t* value) {
    *value = 0;
    for (size_t i = 0; i < kMaxVarintBytes; ++i) {
      uint8_t byte;
      if (!ReadByte(&byte)) return false;
      *value |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  // Hands the next `bytes` to `piece(slice, begin, end)` slice by slice.
  template <typename Piece>
  void Take(size_t bytes, Piece piece) {
    while (bytes > 0) {
      const grpc::Slice& slice = slices_[index_];
      const size_t take = std::min(bytes, slice.size() - offset_);
      if (take > 0) piece(slice, offset_, offset_ + take);
      offset_ += take;
      position_ += take;
      bytes -= take;
      if (offset_ == slice.size()) {
        ++index_;
        offset_ = 0;
      }
    }
  }

 private:
  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t offset_ = 0;
  size_t position_ = 0;
};

absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("corrupt peer frame: ", what));
}

}  // namespace

grpc::ByteBuffer EncodePeerFrame(const v1::PeerFrame& header,
                                 grpc::Slice payload) {
  std::string prefix(1, static_cast<char>(kPayloadKey));
  AppendVarint(payload.size(), &prefix);
  const std::string rest = header.SerializeAsString();
  grpc::Slice slices[3] = {grpc::Slice(prefix.data(), prefix.size()),
                           std::move(payload),
                           grpc::Slice(rest.data(), rest.size())};
  return grpc::ByteBuffer(slices, 3);
}

namespace {

// One frame's bytes, `total` of them in `slices`.
absl::Status DecodeSlices(const std::vector<grpc::Slice>& slices, size_t total,
                          ReceivedFrame* frame) {
  SliceReader reader(slices);
  uint8_t key = 0;
  uint64_t bytes = 0;
  if (total == 0 || !reader.ReadByte(&key) || key != kPayloadKey) {
    // Not payload-first: decode it whole.
    std::string whole;
    whole.reserve(total);
    for (const grpc::Slice& slice : slices) {
      whole.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    if (!frame->header.ParseFromString(whole)) return Corrupt("not a frame");
    frame->payload = absl::Cord(std::move(*frame->header.mutable_payload()));
    frame->header.clear_payload();
    return absl::OkStatus();
  }
  if (!reader.ReadVarint(&bytes) || bytes > total - reader.position()) {
    return Corrupt(absl::StrCat("payload length ", bytes, " in a frame of ",
                                total, " bytes"));
  }
  frame->payload.Clear();
  reader.Take(bytes, [&](const grpc::Slice& slice, size_t begin, size_t end) {
    // The Cord holds a reference to gRPC's buffer instead of a copy. The
    // view must point into the Slice the Cord keeps: a small slice holds its
    // bytes inline, so a copy of it holds them elsewhere.
    auto held = std::make_shared<const grpc::Slice>(slice);
    const absl::string_view piece(
        reinterpret_cast<const char*>(held->begin()) + begin, end - begin);
    frame->payload.Append(absl::MakeCordFromExternal(
        piece, [held = std::move(held)](absl::string_view) {}));
  });
  std::string rest;
  rest.reserve(total - reader.position());
  reader.Take(total - reader.position(), [&](const grpc::Slice& slice,
                                             size_t begin, size_t end) {
    rest.append(reinterpret_cast<const char*>(slice.begin()) + begin,
                end - begin);
  });
  if (!frame->header.ParseFromString(rest)) return Corrupt("bad header");
  if (!frame->header.payload().empty()) return Corrupt("two payloads");
  return absl::OkStatus();
}

}  // namespace

grpc::ByteBuffer BatchPeerFrames(const std::vector<grpc::ByteBuffer>& frames) {
  std::vector<grpc::Slice> slices;
  std::string prefixes;  // the marker and every length, one slice each
  std::vector<std::pair<size_t, size_t>> prefix_at;  // offset, length
  prefixes.push_back(static_cast<char>(kBatchMarker));
  for (const grpc::ByteBuffer& frame : frames) {
    const size_t at = prefixes.size();
    AppendVarint(frame.Length(), &prefixes);
    prefix_at.emplace_back(at, prefixes.size() - at);
  }
  slices.emplace_back(prefixes.data(), 1);
  for (size_t i = 0; i < frames.size(); ++i) {
    slices.emplace_back(prefixes.data() + prefix_at[i].first,
                        prefix_at[i].second);
    std::vector<grpc::Slice> pieces;
    // An encoded frame is never empty, so its buffer always reads.
    COHORT_CHECK(frames[i].Dump(&pieces).ok());
    for (grpc::Slice& piece : pieces) slices.push_back(std::move(piece));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

absl::Status DecodePeerFrames(const grpc::ByteBuffer& buffer,
                              std::vector<ReceivedFrame>* frames) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return Corrupt("unreadable buffer");
  const size_t total = buffer.Length();
  SliceReader reader(slices);
  uint8_t first = 0;
  if (total == 0 || !reader.ReadByte(&first) || first != kBatchMarker) {
    frames->emplace_back();
    return DecodeSlices(slices, total, &frames->back());
  }
  while (reader.position() < total) {
    uint64_t bytes = 0;
    if (!reader.ReadVarint(&bytes) || bytes > total - reader.position()) {
      return Corrupt(absl::StrCat("frame length ", bytes, " in a batch of ",
                                  total, " bytes"));
    }
    // The frame's bytes, as slices of gRPC's buffers: no copy.
    std::vector<grpc::Slice> pieces;
    reader.Take(bytes, [&](const grpc::Slice& slice, size_t begin, size_t end) {
      pieces.push_back(slice.sub(begin, end));
    });
    frames->emplace_back();
    COHORT_RETURN_IF_ERROR(DecodeSlices(pieces, bytes, &frames->back()));
  }
  return absl::OkStatus();
}

}  // namespace cohort::collective
