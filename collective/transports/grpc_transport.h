#pragma once

// Ranks as processes, over gRPC: each rank serves the Peer service, publishes
// its address in the group's Store, and opens one stream to every peer.
// Send queues a frame on the peer's stream and returns; the peer's server
// files it in its mailbox. A peer process that dies breaks its streams, and
// every rank waiting on it fails with UNAVAILABLE naming it, at once.
//
// When the ring neighbours (rank - 1 -> rank) share memory (the same kernel,
// IPC namespace and /dev/shm: SharedMemoryDomain()), their data goes
// through a shared-memory ring instead (ShmChannel); the gRPC streams still
// carry everything else, abort notices, and the liveness that ends waits.

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collective/mailbox.h"
#include "collective/store.h"
#include "collective/transport.h"
#include "collective/transports/completion_loop.h"
#include "collective/transports/lent_buffers.h"
#include "collective/transports/shm_channel.h"
#include "common/host_port.h"
#include "rpc/auth.h"
#include "rpc/security.h"
#include "rpc/server.h"

namespace cohort::collective {

struct GrpcTransportOptions {
  std::string group;  // unique per group and epoch, e.g. "job7/epoch2"
  int rank = 0;
  int size = 1;
  std::string listen = "127.0.0.1:0";  // this rank's Peer server
  // Where `listen`'s port is 0: the ports it may bind, so that a firewall
  // can let peers in. Empty: any free port.
  PortRange ports;
  // The host peers dial when `listen` is a wildcard (0.0.0.0, ::): the
  // host's name in the cluster spec. Empty: this machine's hostname.
  std::string advertise_host;
  // Names this rank in its peers' errors, e.g. its task "worker:1": a rank
  // that is gone is reported as "rank 3 (worker:1 at 10.0.0.3:4001)".
  std::string label;
  rpc::Security security;
  // Bounds the rendezvous: every rank must have published its address and
  // connected within it.
  absl::Duration connect_timeout = absl::Seconds(60);
  // Ring neighbours on one host exchange data through shared memory.
  bool shared_memory = true;
  // At least kMinShmCapacity: half of it is the window ring algorithms
  // send within, which must be no smaller than theirs (4 MiB), so that
  // ranks with and without a ring to their next chunk alike.
  size_t shm_capacity = 8 << 20;
};

inline constexpr size_t kMinShmCapacity = 8 << 20;

class PeerSender;
class PeerService;

// Thread-safe, as Transport requires.
class GrpcTransport final : public Transport {
 public:
  // Serves, publishes, connects to every peer and waits for all of them to
  // do the same. `store` is used during Create only.
  static absl::StatusOr<std::unique_ptr<GrpcTransport>> Create(
      GrpcTransportOptions options, Store& store);
  ~GrpcTransport() override;

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  std::string Describe(int rank) const override;
  // The address this rank's peers dial.
  const std::string& address() const { return addresses_[options_.rank]; }

  absl::Status Send(int peer, const Envelope& envelope, const void* data,
                    size_t bytes, absl::Time deadline) override;
  // Over gRPC, payloads of kMinLentBytes and more go out by reference.
  absl::Status SendLent(int peer, const Envelope& envelope, const void* data,
                        size_t bytes, absl::Time deadline) override;
  absl::Status ReclaimLent(absl::Time deadline) override;
  absl::Status Recv(int peer, const Envelope& envelope, void* data,
                    size_t bytes, absl::Time deadline) override;
  absl::StatusOr<absl::Cord> RecvCord(int peer, const Envelope& envelope,
                                      size_t bytes,
                                      absl::Time deadline) override;
  size_t send_window_bytes() const override;
  // Whether or not this rank has a shared-memory ring, as the group must
  // agree: a ring frame's header and signature (tens of bytes) stay a few
  // percent of a chunk.
  size_t min_chunk_bytes() const override { return 4 << 10; }
  // True unless some ring neighbours share a memory domain, and may use
  // shared memory: decided from the domains every rank published (a rank
  // with shared memory off publishes one of its own), not from which rings
  // were made, so that the group agrees.
  bool favours_exchanges() const override { return favours_exchanges_; }
  // How bytes to the next rank of the ring travel: "shm" or "grpc".
  std::string next_link() const { return shm_out_ != nullptr ? "shm" : "grpc"; }
  // The next rank's peer server.
  const std::string& next_address() const { return addresses_[next_]; }
  // Aborts locally and tells every peer, so that their waits end too.
  void Abort(const absl::Status& status) override;

 private:
  explicit GrpcTransport(GrpcTransportOptions options);
  absl::Status Connect(Store& store);
  // Starts server_ with a fresh service_ on `listen`; on failure, neither.
  absl::Status Serve(const std::string& listen);
  // Serve on options_.listen, or on the first free port of options_.ports.
  absl::Status ServeInRange();
  // The address `peer` published, by the rendezvous's `deadline`; logs whom
  // it waits for meanwhile, and names that rank if it never comes.
  absl::StatusOr<std::string> AwaitPeerAddress(Store& store, int peer,
                                               absl::Time deadline) const;
  // Sets up the shared-memory ring from prev (created here) and to next
  // (opened here), where the neighbours share this host, by `deadline`.
  absl::Status ConnectSharedMemory(Store& store,
                                   const std::vector<std::string>& hosts,
                                   absl::Time deadline);
  absl::Status SendFrame(int peer, const Envelope& envelope, const void* data,
                         size_t bytes, absl::Time deadline, bool lend);
  absl::Status SendShm(const Envelope& envelope, const void* data, size_t bytes,
                       absl::Time deadline);
  absl::Status RecvShm(const Envelope& envelope, void* data, size_t bytes,
                       absl::Time deadline);

  const GrpcTransportOptions options_;
  Mailbox mailbox_;
  rpc::Authenticator auth_;
  std::unique_ptr<PeerService> service_;
  std::unique_ptr<rpc::RpcServer> server_;
  // Runs server_'s completion queue: every Peer stream's operations, in
  // and out. Waits for messages and for lent buffers run it themselves.
  // Ends before server_ goes.
  std::unique_ptr<CompletionLoop> loop_;
  std::vector<std::string> addresses_;                // by rank
  std::vector<std::string> labels_;                   // by rank
  std::vector<std::unique_ptr<PeerSender>> senders_;  // by rank; null for self
  std::vector<LentBuffers> lent_;  // by rank: what SendLent lent its stream
  int prev_ = 0, next_ = 0;
  bool favours_exchanges_ = true;
  std::unique_ptr<ShmChannel> shm_in_;   // from prev_, when on this host
  std::unique_ptr<ShmChannel> shm_out_;  // to next_, when on this host
  // The latest deadline of a frame sent over gRPC (Unix ns), capped at
  // kMaxDrainOnTeardown from its send: until then teardown lets frames
  // still queued drain.
  std::atomic<int64_t> latest_send_deadline_ns_{0};
  // Messages from prev_ read off the ring before they were asked for. Only
  // the receiving thread touches it.
  std::map<Tag, std::pair<std::string, std::string>> shm_early_;
};

}  // namespace cohort::collective
