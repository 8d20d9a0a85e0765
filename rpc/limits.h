#pragma once

namespace cohort::rpc {

// Largest single gRPC message any Cohort endpoint accepts or sends. Control
// messages are tiny; step libraries and tensor chunks are the big ones, and
// bigger payloads are chunked above this layer.
inline constexpr int kMaxMessageBytes = 256 * 1024 * 1024;

// Default deadline of a control-plane RPC.
inline constexpr int kDefaultRpcTimeoutMs = 5000;

}  // namespace cohort::rpc
