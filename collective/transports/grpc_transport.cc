#include "collective/transports/grpc_transport.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "collective/transports/peer_frame.h"
#include "collective/transports/peer_sender.h"
#include "collective/transports/peer_service.h"
#include "collective/types.h"
#include "common/check.h"
#include "common/cluster_spec.h"
#include "common/host_info.h"
#include "common/status_macros.h"
#include "rpc/limits.h"
#include "rpc/reportable.h"
#include "spdlog/spdlog.h"

namespace cohort::collective {
namespace {

std::string AddressKey(const std::string& group, int rank) {
  return absl::StrCat(group, "/address/", rank);
}

std::string HostKey(const std::string& group, int rank) {
  return absl::StrCat(group, "/host/", rank);
}

std::string LabelKey(const std::string& group, int rank) {
  return absl::StrCat(group, "/label/", rank);
}

std::string RingKey(const std::string& group, int from, int to) {
  return absl::StrCat(group, "/shm/", from, "-", to);
}

// Set by the rank that opened the ring from it (or failed to: kNoRing).
std::string RingOpenedKey(const std::string& group, int from, int to) {
  return absl::StrCat(RingKey(group, from, to), "/opened");
}

constexpr char kNoRing[] = "none";
constexpr char kRingOpened[] = "opened";
// Smaller payloads are copied even when lent. Below 64 KiB the copy costs
// less than waiting, at the end of a collective, for gRPC to release them.
// From 64 to 128 KiB, gRPC (1.51) keeps a reference to a message it has
// delivered until the stream's next write: the last ones a collective sends
// to a peer (the direct path's, or a 2-rank ring's) would stay lent, and
// the reclaim would wait out the collective's timeout.
constexpr size_t kMinLentBytes = 128 << 10;
// Once the group is aborted, how long a reclaim still waits for peers to
// take what they were sent before it closes their streams.
constexpr absl::Duration kAbortedReclaimGrace = absl::Milliseconds(250);
// The longest teardown waits for sent frames to drain, whatever their
// deadlines (a caller's infinite one, say).
constexpr absl::Duration kMaxDrainOnTeardown = absl::Minutes(5);
// How often a wait for a peer's connection looks at the store's abort.
constexpr absl::Duration kAbortCheck = absl::Milliseconds(100);
// A frame's signature is a short description; more means a corrupt ring.
constexpr uint32_t kMaxSignatureBytes = 4096;

// What precedes each message in a shared-memory ring.
struct ShmFrame {
  uint64_t sequence;
  uint32_t step;
  uint32_t chunk;
  uint32_t signature_bytes;
  uint32_t reserved;
  uint64_t payload_bytes;
};

// How often a rank says whom it still waits for while its group gathers.
constexpr absl::Duration kJoinReport = absl::Seconds(10);

// What is left of a wait until `deadline`; zero once it passed.
absl::Duration Left(absl::Time deadline) {
  return std::max(deadline - absl::Now(), absl::ZeroDuration());
}

// The address peers dial: a wildcard listen host becomes `advertise_host`,
// or our hostname.
std::string AdvertisedAddress(const rpc::RpcServer& server,
                              const std::string& advertise_host) {
  absl::StatusOr<HostPort> bound = ParseHostPort(server.address(), true);
  if (!bound.ok()) return server.address();
  if (bound->IsWildcard()) {
    bound->host = advertise_host.empty() ? Hostname() : advertise_host;
  }
  return bound->ToString();
}

// The shared-memory ring knows no ranks: a wait on it that ran out names
// the neighbour and the message, as the mailbox does for gRPC.
absl::Status NameShmWait(absl::Status status, const Transport& self, int peer,
                         const Envelope& envelope, bool sending) {
  if (status.code() != absl::StatusCode::kDeadlineExceeded) return status;
  const std::string what =
      absl::StrCat(envelope.signature, " (sequence ", envelope.tag.sequence,
                   ", step ", envelope.tag.step, ")");
  return absl::DeadlineExceededError(
      sending
          ? absl::StrCat(self.Describe(peer), " took in nothing of ", what,
                         " before the deadline: the shared-memory ring "
                         "to it stayed full")
          : absl::StrCat("no message from ", self.Describe(peer), " for ", what,
                         " before the deadline (over shared memory)"));
}

}  // namespace

GrpcTransport::GrpcTransport(GrpcTransportOptions options)
    : options_(std::move(options)),
      mailbox_(options_.size),
      auth_(options_.security.token),
      addresses_(static_cast<size_t>(options_.size)),
      labels_(static_cast<size_t>(options_.size)),
      senders_(static_cast<size_t>(options_.size)),
      lent_(static_cast<size_t>(options_.size)) {}

absl::StatusOr<std::unique_ptr<GrpcTransport>> GrpcTransport::Create(
    GrpcTransportOptions options, Store& store) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options.rank, " is out of range for a group of ",
                     options.size));
  }
  if (options.shared_memory && options.shm_capacity < kMinShmCapacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm_capacity ", options.shm_capacity,
                     " is below the smallest shared-memory ring, ",
                     kMinShmCapacity, " bytes"));
  }
  std::unique_ptr<GrpcTransport> transport(
      new GrpcTransport(std::move(options)));
  COHORT_RETURN_IF_ERROR(transport->Connect(store));
  return transport;
}

absl::Status GrpcTransport::Serve(const std::string& listen) {
  // A fresh service each time: gRPC ties an async service to the first
  // server it was offered to, even one that then failed to bind.
  service_ = std::make_unique<PeerService>(options_.group, options_.rank,
                                           options_.size, &mailbox_, &auth_);
  server_ = std::make_unique<rpc::RpcServer>(rpc::ServerOptions{
      .listen = listen, .security = options_.security, .async_only = true});
  server_->AddService(service_.get());
  absl::Status started = server_->Start();
  if (!started.ok()) {
    server_.reset();
    service_.reset();
  }
  return started;
}

absl::Status GrpcTransport::ServeInRange() {
  COHORT_ASSIGN_OR_RETURN(HostPort listen,
                          ParseHostPort(options_.listen, true));
  const PortRange& ports = options_.ports;
  if (ports.empty() || listen.port != 0) return Serve(options_.listen);
  // The first free port. Ranks of one agent start together: a port another
  // took since the check fails gRPC's bind (no SO_REUSEPORT), and the next
  // is tried; any other failure is returned.
  for (int port = ports.first; port <= ports.last; ++port) {
    listen.port = port;
    absl::Status free = rpc::CheckCanListen(listen);
    if (absl::IsUnavailable(free)) continue;  // in use
    if (!free.ok()) return free;
    absl::Status served = Serve(listen.ToString());
    if (served.ok() || !absl::IsUnavailable(rpc::CheckCanListen(listen))) {
      return served;
    }
  }
  // UNAVAILABLE: ports come free as ended attempts close their servers.
  return absl::UnavailableError(absl::StrCat(
      "no free port for this rank's peer server in ", ports.ToString(), " on ",
      listen.host, ": all ", ports.size(),
      " are in use (a job holds one per replica under RING, one per agent "
      "under HIERARCHICAL; widen --peer_ports)"));
}

absl::Status GrpcTransport::Connect(Store& store) {
  const std::string& group = options_.group;
  // One bound for the whole rendezvous, however its waits divide it.
  const absl::Time deadline = absl::Now() + options_.connect_timeout;
  COHORT_RETURN_IF_ERROR(ServeInRange());
  loop_ = std::make_unique<CompletionLoop>(server_->completion_queue());
  mailbox_.set_driver(
      [this](absl::FunctionRef<bool()> done, absl::Time deadline) {
        return loop_->RunUntil(done, deadline);
      });
  service_->Serve(server_->completion_queue());

  addresses_[options_.rank] =
      AdvertisedAddress(*server_, options_.advertise_host);
  COHORT_RETURN_IF_ERROR(
      store.Set(AddressKey(group, options_.rank), addresses_[options_.rank]));
  // Neighbours share memory only where shm_open names are shared, which an
  // equal hostname does not prove. A rank that shares none publishes a
  // domain of its own, so that every rank reads the same layout from the
  // store and chooses the same algorithms.
  const std::string domain =
      options_.shared_memory ? SharedMemoryDomain()
                             : absl::StrCat("none:", group, ":", options_.rank);
  COHORT_RETURN_IF_ERROR(store.Set(HostKey(group, options_.rank), domain));
  COHORT_RETURN_IF_ERROR(
      store.Set(LabelKey(group, options_.rank), options_.label));
  std::vector<std::string> hosts(static_cast<size_t>(options_.size));
  hosts[options_.rank] = domain;
  labels_[options_.rank] = options_.label;
  for (int peer = 0; peer < options_.size; ++peer) {
    if (peer == options_.rank) continue;
    COHORT_ASSIGN_OR_RETURN(addresses_[peer],
                            AwaitPeerAddress(store, peer, deadline));
    COHORT_ASSIGN_OR_RETURN(hosts[peer],
                            store.Get(HostKey(group, peer), Left(deadline)));
    COHORT_ASSIGN_OR_RETURN(labels_[peer],
                            store.Get(LabelKey(group, peer), Left(deadline)));
    v1::PeerFrame hello;
    hello.set_group(group);
    hello.set_source_rank(options_.rank);
    hello.set_address(addresses_[options_.rank]);
    hello.set_label(options_.label);
    senders_[peer] = std::make_unique<PeerSender>(
        addresses_[peer], options_.security, std::move(hello), Describe(peer),
        server_->completion_queue());
  }
  for (const std::unique_ptr<PeerSender>& sender : senders_) {
    if (sender == nullptr) continue;
    // In slices: a peer that died after publishing its address is never
    // reached, and the store's abort (the attempt ended) must end the wait
    // long before the connect timeout.
    for (;;) {
      const absl::Status connected =
          sender->WaitConnected(std::min(deadline, absl::Now() + kAbortCheck));
      if (connected.ok()) break;
      if (!absl::IsDeadlineExceeded(connected)) return connected;
      if (absl::Now() >= deadline) {
        return sender->WithConnectionError(connected);
      }
      COHORT_RETURN_IF_ERROR(store.aborted());
    }
  }
  for (int r = 0; r < options_.size; ++r) {
    if (hosts[r] == hosts[(r + 1) % options_.size]) favours_exchanges_ = false;
  }
  if (options_.size > 1)
    COHORT_RETURN_IF_ERROR(ConnectSharedMemory(store, hosts, deadline));
  // Every rank has opened its streams: from here a broken stream means a
  // lost peer.
  COHORT_RETURN_IF_ERROR(store.Barrier(group + "/connected", options_.size,
                                       options_.rank, Left(deadline)));
  // Both ends have the ring mapped; its name is no longer needed.
  if (shm_in_ != nullptr) shm_in_->Unlink();
  return absl::OkStatus();
}

absl::StatusOr<std::string> GrpcTransport::AwaitPeerAddress(
    Store& store, int peer, absl::Time deadline) const {
  // In slices, so that a rank that has not come (a wrong TF_CONFIG, a host
  // that is down) is named while it is awaited, not only at the end.
  for (;;) {
    const absl::Duration slice = std::min(kJoinReport, Left(deadline));
    absl::StatusOr<std::string> address =
        store.Get(AddressKey(options_.group, peer), slice);
    if (address.ok() || !absl::IsDeadlineExceeded(address.status())) {
      return address;
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", peer, " of ", options_.size, " in group \"",
                       options_.group, "\" did not join within ",
                       absl::FormatDuration(options_.connect_timeout), ": ",
                       address.status().message()));
    }
    spdlog::info(
        "rank {} of group \"{}\": waiting for rank {} of {} to join "
        "({} left)",
        options_.rank, options_.group, peer, options_.size,
        absl::FormatDuration(
            absl::Trunc(deadline - absl::Now(), absl::Seconds(1))));
  }
}

absl::Status GrpcTransport::ConnectSharedMemory(
    Store& store, const std::vector<std::string>& hosts, absl::Time deadline) {
  const int rank = options_.rank;
  prev_ = (rank + options_.size - 1) % options_.size;
  next_ = (rank + 1) % options_.size;
  std::string name = kNoRing;
  if (options_.shared_memory && hosts[prev_] == hosts[rank]) {
    // What killed processes left behind goes before it can fill /dev/shm.
    RemoveStaleRings();
    name = RingName(absl::StrCat(absl::Uniform<uint64_t>(absl::BitGen()), "-",
                                 prev_, "-", rank));
    absl::StatusOr<std::unique_ptr<ShmChannel>> ring =
        ShmChannel::Create(name, options_.shm_capacity);
    if (ring.ok()) {
      shm_in_ = *std::move(ring);
    } else {
      // gRPC still works; only slower.
      spdlog::warn("no shared-memory ring from {}: {}", Describe(prev_),
                   ring.status().ToString());
      name = kNoRing;
    }
  }
  COHORT_RETURN_IF_ERROR(store.Set(RingKey(options_.group, prev_, rank), name));
  COHORT_ASSIGN_OR_RETURN(
      const std::string out,
      store.Get(RingKey(options_.group, rank, next_), Left(deadline)));
  if (out != kNoRing) {
    // One host, yet a ring this rank may not open (the two run as other
    // users in one IPC namespace, say): the bytes go over gRPC, and the
    // creator is told so that it does not wait on the ring.
    absl::StatusOr<std::unique_ptr<ShmChannel>> ring = ShmChannel::Open(out);
    if (ring.ok()) {
      shm_out_ = *std::move(ring);
    } else {
      spdlog::warn(
          "cannot open the shared-memory ring to {}: {}; sending "
          "over gRPC",
          Describe(next_), ring.status().ToString());
    }
    COHORT_RETURN_IF_ERROR(
        store.Set(RingOpenedKey(options_.group, rank, next_),
                  shm_out_ != nullptr ? kRingOpened : kNoRing));
  }
  if (shm_in_ != nullptr) {
    COHORT_ASSIGN_OR_RETURN(
        const std::string opened,
        store.Get(RingOpenedKey(options_.group, prev_, rank), Left(deadline)));
    if (opened != kRingOpened) shm_in_.reset();
  }
  return absl::OkStatus();
}

GrpcTransport::~GrpcTransport() {
  // A rank may leave as soon as its part of a collective is done (a
  // broadcast's root, once its chunks are queued) while its bytes still
  // drain over a slow link: they get the time their sends had to arrive.
  // An aborted group has nothing worth delivering.
  absl::Time drain_until = absl::Now() + absl::Seconds(1);
  if (mailbox_.abort_status().ok()) {
    drain_until = std::max(
        drain_until, absl::FromUnixNanos(latest_send_deadline_ns_.load()));
  }
  // Every stream drains at once; each waits against the same deadline, in
  // slices, since a peer's abort meanwhile makes the rest worthless.
  for (auto& sender : senders_) {
    if (sender != nullptr) sender->BeginClose();
  }
  for (auto& sender : senders_) {
    if (sender == nullptr) continue;
    while (
        absl::Now() < drain_until &&
        !sender->AwaitEnded(std::min(drain_until, absl::Now() + kAbortCheck))) {
      if (!mailbox_.abort_status().ok()) drain_until = absl::Now();
    }
    sender->Close(drain_until);
  }
  if (service_ != nullptr) service_->Stop();
  // Cancels the incoming streams, then shuts the completion queue down; the
  // loop drains it and ends.
  if (server_ != nullptr) server_->Shutdown(absl::ZeroDuration());
  loop_.reset();
}

std::string GrpcTransport::Describe(int rank) const {
  if (rank < 0 || rank >= options_.size || addresses_[rank].empty()) {
    return absl::StrCat("rank ", rank);
  }
  if (labels_[rank].empty()) {
    return absl::StrCat("rank ", rank, " (", addresses_[rank], ")");
  }
  return absl::StrCat("rank ", rank, " (", labels_[rank], " at ",
                      addresses_[rank], ")");
}

absl::Status GrpcTransport::Send(int peer, const Envelope& envelope,
                                 const void* data, size_t bytes,
                                 absl::Time deadline) {
  return SendFrame(peer, envelope, data, bytes, deadline, /*lend=*/false);
}

absl::Status GrpcTransport::SendLent(int peer, const Envelope& envelope,
                                     const void* data, size_t bytes,
                                     absl::Time deadline) {
  return SendFrame(peer, envelope, data, bytes, deadline, /*lend=*/true);
}

absl::Status GrpcTransport::SendFrame(int peer, const Envelope& envelope,
                                      const void* data, size_t bytes,
                                      absl::Time deadline, bool lend) {
  if (absl::Status aborted = mailbox_.abort_status(); !aborted.ok()) {
    return aborted;
  }
  if (shm_out_ != nullptr && peer == next_) {
    return NameShmWait(SendShm(envelope, data, bytes, deadline), *this, peer,
                       envelope, /*sending=*/true);
  }
  v1::PeerFrame header;
  header.mutable_tag()->set_sequence(envelope.tag.sequence);
  header.mutable_tag()->set_step(envelope.tag.step);
  header.mutable_tag()->set_chunk(envelope.tag.chunk);
  header.set_op_signature(std::string(envelope.signature));
  // Unless lent, the one copy of the payload on this side: into a slice gRPC
  // owns, so that Send returns at once and the caller may reuse `data`.
  grpc::Slice payload;
  if (lend && bytes >= kMinLentBytes) {
    payload = lent_[peer].Lend(data, bytes);
  } else if (bytes > 0) {
    payload = grpc::Slice(data, bytes);
  }
  // The latest deadline any send had: how long teardown lets frames drain.
  const int64_t until =
      absl::ToUnixNanos(std::min(deadline, absl::Now() + kMaxDrainOnTeardown));
  int64_t latest = latest_send_deadline_ns_.load();
  while (until > latest &&
         !latest_send_deadline_ns_.compare_exchange_weak(latest, until)) {
  }
  return senders_[peer]->Enqueue(EncodePeerFrame(header, std::move(payload)));
}

absl::Status GrpcTransport::ReclaimLent(absl::Time deadline) {
  auto aborted = [this] { return !mailbox_.abort_status().ok(); };
  // Releasing them takes the queue's completions. The group's abort (Abort
  // wakes the loop) ends the wait as well.
  loop_->RunUntil(
      [&] {
        if (aborted()) return true;
        for (const LentBuffers& lent : lent_) {
          if (lent.outstanding() > 0) return false;
        }
        return true;
      },
      deadline);
  if (aborted()) {
    // A peer declared lost may never take what it was sent (a host that
    // lost power sends no FIN): the survivors must not wait out the
    // operation's deadline before they form a new group.
    deadline = std::min(deadline, absl::Now() + kAbortedReclaimGrace);
  }
  std::vector<int> stuck;
  for (int peer = 0; peer < options_.size; ++peer) {
    if (!lent_[peer].AwaitReleased(deadline)) stuck.push_back(peer);
  }
  if (stuck.empty()) return absl::OkStatus();
  std::string names;
  for (int peer : stuck) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", Describe(peer));
  }
  const absl::Status status = absl::DeadlineExceededError(
      absl::StrCat(Describe(options_.rank), " could not finish sending to ",
                   names, " in time: the streams to them are closed"));
  for (int peer : stuck) {
    // Waits on the peer end now. The group's abort, and its reason, are the
    // caller's: a failed collective may have a better one than this.
    mailbox_.PeerGone(peer, status);
    senders_[peer]->Disconnect();
    // A lent buffer gRPC kept past this would be read after its owner
    // reused it: stopping is better than sending corrupt data.
    COHORT_CHECK(lent_[peer].AwaitReleased(absl::Now() + kCancelGrace));
  }
  return status;
}

absl::Status GrpcTransport::Recv(int peer, const Envelope& envelope, void* data,
                                 size_t bytes, absl::Time deadline) {
  if (shm_in_ != nullptr && peer == prev_) {
    return NameShmWait(RecvShm(envelope, data, bytes, deadline), *this, peer,
                       envelope, /*sending=*/false);
  }
  return mailbox_.Take(*this, peer, envelope, data, bytes, deadline);
}

absl::StatusOr<absl::Cord> GrpcTransport::RecvCord(int peer,
                                                   const Envelope& envelope,
                                                   size_t bytes,
                                                   absl::Time deadline) {
  if (shm_in_ != nullptr && peer == prev_) {
    return Transport::RecvCord(peer, envelope, bytes, deadline);
  }
  return mailbox_.TakeCord(*this, peer, envelope, bytes, deadline);
}

size_t GrpcTransport::send_window_bytes() const {
  return shm_out_ != nullptr ? shm_out_->capacity() / 2
                             : Transport::send_window_bytes();
}

absl::Status GrpcTransport::SendShm(const Envelope& envelope, const void* data,
                                    size_t bytes, absl::Time deadline) {
  // A wait for ring space ends when next is gone or the group aborts.
  const InterruptCheck interrupted = [this] {
    return mailbox_.SourceStatus(next_);
  };
  const ShmFrame frame{envelope.tag.sequence,
                       envelope.tag.step,
                       envelope.tag.chunk,
                       static_cast<uint32_t>(envelope.signature.size()),
                       0,
                       bytes};
  COHORT_RETURN_IF_ERROR(
      shm_out_->Write(&frame, sizeof(frame), deadline, interrupted));
  COHORT_RETURN_IF_ERROR(shm_out_->Write(envelope.signature.data(),
                                         envelope.signature.size(), deadline,
                                         interrupted));
  return shm_out_->Write(data, bytes, deadline, interrupted);
}

absl::Status GrpcTransport::RecvShm(const Envelope& envelope, void* data,
                                    size_t bytes, absl::Time deadline) {
  const Tag& tag = envelope.tag;
  auto deliver = [&](const std::string& signature,
                     uint64_t payload_bytes) -> absl::Status {
    if (signature != envelope.signature) {
      return SignatureMismatch(*this, prev_, tag, envelope.signature,
                               signature);
    }
    if (payload_bytes != bytes) {
      return absl::FailedPreconditionError(
          absl::StrCat(Describe(prev_), " sent ", payload_bytes, " bytes for ",
                       envelope.signature, " where ", Describe(options_.rank),
                       " expects ", bytes));
    }
    return absl::OkStatus();
  };
  if (const auto early = shm_early_.find(tag); early != shm_early_.end()) {
    COHORT_RETURN_IF_ERROR(
        deliver(early->second.first, early->second.second.size()));
    if (bytes > 0) std::memcpy(data, early->second.second.data(), bytes);
    shm_early_.erase(early);
    return absl::OkStatus();
  }
  const InterruptCheck interrupted = [this] {
    return mailbox_.SourceStatus(prev_);
  };
  while (true) {
    ShmFrame frame;
    COHORT_RETURN_IF_ERROR(
        shm_in_->Read(&frame, sizeof(frame), deadline, interrupted));
    if (frame.signature_bytes > kMaxSignatureBytes) {
      return absl::DataLossError(absl::StrCat(
          "corrupt frame in the shared-memory ring from ", Describe(prev_)));
    }
    std::string signature(frame.signature_bytes, '\0');
    COHORT_RETURN_IF_ERROR(shm_in_->Read(signature.data(), signature.size(),
                                         deadline, interrupted));
    const Tag got{frame.sequence, frame.step, frame.chunk};
    if (got == tag ||
        (got.sequence == tag.sequence && signature != envelope.signature)) {
      COHORT_RETURN_IF_ERROR(deliver(signature, frame.payload_bytes));
      return shm_in_->Read(data, bytes, deadline, interrupted);
    }
    // A message for later: keep it until it is asked for.
    if (frame.payload_bytes > rpc::kMaxMessageBytes) {
      return absl::DataLossError(absl::StrCat(
          "corrupt frame in the shared-memory ring from ", Describe(prev_),
          ": it claims ", frame.payload_bytes, " bytes"));
    }
    std::string payload(frame.payload_bytes, '\0');
    COHORT_RETURN_IF_ERROR(
        shm_in_->Read(payload.data(), payload.size(), deadline, interrupted));
    shm_early_[got] = {std::move(signature), std::move(payload)};
  }
}

void GrpcTransport::Abort(const absl::Status& given) {
  const absl::Status status = AbortStatus(given);
  const std::string reason = absl::StrCat(
      Describe(options_.rank), " aborted the group: ", status.message());
  // Only the abort that wins tells the peers, so that every rank of the
  // group reports the same reason when two threads abort at once.
  if (!mailbox_.Abort(absl::Status(status.code(), reason))) return;
  // A rank polling for a message sees the abort now, not at its next poll.
  if (loop_ != nullptr) loop_->Wake();
  v1::PeerFrame notice;
  notice.set_abort(reason);
  notice.set_abort_code(static_cast<int>(status.code()));
  // The reason may quote user code: text a peer's parser would refuse is
  // repaired, so that the notice is not lost with it.
  rpc::MakeReportable(notice);
  for (auto& sender : senders_) {
    if (sender == nullptr) continue;
    // Best effort: a peer that is gone needs no notice.
    sender->Enqueue(EncodePeerFrame(notice)).IgnoreError();
  }
}

}  // namespace cohort::collective
