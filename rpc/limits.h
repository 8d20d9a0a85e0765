#pragma once

#include <cstddef>

#include "absl/time/time.h"

namespace cohort::rpc {

// Largest single gRPC message any Cohort endpoint accepts or sends. Control
// messages are tiny; step libraries and tensor chunks are the big ones, and
// bigger payloads are chunked above this layer.
inline constexpr int kMaxMessageBytes = 256 * 1024 * 1024;

// A job's config_json travels with every assignment to every agent and is
// saved with the job table on each change; data belongs in files it names.
inline constexpr size_t kMaxConfigJsonBytes = 1024 * 1024;
// Each of a job spec's other texts (its name, function names, paths) and
// a scheduled call's function name: they travel and are saved as the
// config does, and appear in logs and errors.
inline constexpr size_t kMaxSpecTextBytes = 4096;

// Default deadline of a control-plane RPC.
inline constexpr int kDefaultRpcTimeoutMs = 5000;

// How long one attempt to connect may take: a TCP and a TLS handshake and
// HTTP/2's settings, a few round trips, over the slowest link a cluster
// may span. Short enough that an attempt begun while a link was cut is
// retried soon after it heals (TCP resends a lost SYN 1 s later, then 2 s
// after that).
inline constexpr absl::Duration kConnectTimeout = absl::Seconds(3);
// gRPC's own default for it: the most a client's call timeout raises it to.
inline constexpr absl::Duration kMaxConnectTimeout = absl::Seconds(20);

// A store wait (Store.Get, Store.Barrier) has this much longer as its RPC
// deadline than the server waits, so that the store's own answer (which key,
// which ranks are missing) reaches the caller before its deadline fires.
inline constexpr absl::Duration kStoreReplyGrace = absl::Seconds(1);

// A server stream that has nothing new (WatchJob, a followed log) still
// sends at least this often, so that its reader can tell a quiet stream from
// a server that went away.
inline constexpr absl::Duration kStreamKeepalive = absl::Seconds(2);
// A reader that has heard nothing, not even a keepalive, for this long takes
// the server as unreachable: a host whose link is cut sends no reset, and
// its connection would otherwise look open for many minutes.
inline constexpr absl::Duration kStreamSilence = absl::Seconds(10);  // 5 keepalives

}  // namespace cohort::rpc
