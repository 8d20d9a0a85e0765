#pragma once

// HTTP/2 settings for bulk transfers (collective chunks are megabytes, not
// the kilobytes gRPC's defaults are tuned for): larger flow-control windows
// and frames, so that a stream is not throttled to a window per round trip.
// Applied to every channel and server alike, so both ends agree.
//
// BDP probing is off: it replaces the fixed window below with one sized from
// measured round trips, which on a fast link (loopback, one rack) comes out
// far smaller than a collective chunk. Senders then stalled on WINDOW_UPDATEs:
// 16 MiB all-reduces between two ranks took 11 to 88 ms with it, 9 to 26 ms
// without (bench/RESULTS.md).

#include <grpcpp/server_builder.h>
#include <grpcpp/support/channel_arguments.h>

namespace cohort::rpc {

inline constexpr int kStreamWindowBytes = 16 << 20;
inline constexpr int kMaxFrameBytes = (16 << 20) - 1;  // HTTP/2's maximum
inline constexpr int kWriteBufferBytes = 8 << 20;

template <typename Args>
void ApplyTransportTuning(Args& args) {
  auto set = [&](const char* key, int value) {
    if constexpr (std::is_same_v<Args, grpc::ServerBuilder>) {
      args.AddChannelArgument(key, value);
    } else {
      args.SetInt(key, value);
    }
  };
  set(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kStreamWindowBytes);
  set(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, kMaxFrameBytes);
  set(GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, kWriteBufferBytes);
  set(GRPC_ARG_HTTP2_BDP_PROBE, 0);
}

}  // namespace cohort::rpc
