#pragma once

// HTTP/2 settings for bulk transfers (collective chunks are megabytes, not
// the kilobytes gRPC's defaults are tuned for): larger flow-control windows
// and frames, so that a stream is not throttled to a window per round trip.
// Applied to every channel and server alike, so both ends agree.

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
}

}  // namespace cohort::rpc
