#pragma once

// What the fuzz targets that replay requests share: their framing, and
// parsing a request from bytes.
//
// The framing of the fuzz targets that replay several requests: a sequence
// of [1 byte: which request][4 bytes little-endian: length][length bytes: the
// request, a serialized proto]. Seeds are written in this form by
// make_seeds.sh; a short or truncated tail ends the sequence.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cohort::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size)
      : rest_(reinterpret_cast<const char*>(data), size) {}

  // The next request, or false at the end.
  bool Next(uint8_t* kind, std::string_view* bytes) {
    if (rest_.size() < 5) return false;
    *kind = static_cast<uint8_t>(rest_[0]);
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) {
      length |= uint32_t{static_cast<uint8_t>(rest_[1 + i])} << (8 * i);
    }
    rest_.remove_prefix(5);
    if (length > rest_.size()) length = static_cast<uint32_t>(rest_.size());
    *bytes = rest_.substr(0, length);
    rest_.remove_prefix(length);
    return true;
  }

 private:
  std::string_view rest_;
};

// At most this many requests of one input are replayed, so that each input
// stays fast.
inline constexpr int kMaxRequests = 64;

// Calls `handle(kind, bytes)` for each request of the input.
template <typename Handle>
void ForEachRequest(const uint8_t* data, size_t size, Handle handle) {
  FuzzInput input(data, size);
  uint8_t kind;
  std::string_view bytes;
  for (int i = 0; i < kMaxRequests && input.Next(&kind, &bytes); ++i) {
    handle(kind, bytes);
  }
}

// Whether `bytes` parse as `message`, a protobuf.
template <typename Message>
bool Parse(std::string_view bytes, Message* message) {
  return message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

// The cluster the coordinator's targets run against.
inline constexpr char kCluster[] =
    R"({"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"],
                    "ps": ["127.0.0.1:3"]}})";

}  // namespace cohort::fuzz
