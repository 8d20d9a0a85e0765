#pragma once

// HTTP/2 settings for bulk transfers (collective chunks are megabytes, not
// the kilobytes gRPC's defaults are tuned for): a larger stream window and
// frames, so that a stream is not throttled to a window per round trip.
// Applied to every channel and server alike, so both ends agree.
//
// The connection's window is not raised: gRPC (1.51) grows it only from
// BDP probing, and otherwise keeps it at 64 KiB beyond what its streams have
// announced. Each message therefore goes out as its first 64 KiB, then the
// rest once the receiver has seen its length and made room for it: one
// round trip per message.
// BDP probing raises it, and a message then goes out in one write, yet
// 16 and 64 MiB all-reduces were slower with it (bench/RESULTS.md, "eighth
// pass"); on an earlier data path it sized windows below a chunk, and 16 MiB
// between two ranks took 11 to 88 ms, against 9 to 26 ms without.

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
