#include "collective/transports/peer_sender.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "collective/transports/peer_frame.h"
#include "common/check.h"

namespace cohort::collective {

namespace {

// The most bytes of frames one batch carries. A stream has one write in
// flight at a time, and each costs a round of gRPC's work besides the
// bytes, so frames queued behind a write go together. Larger frames go
// alone: the receiver takes in nothing of a message before all of it has
// come, and a batch of them would hold back the work on the first.
constexpr size_t kMaxBatchBytes = 1 << 20;

// How long the call that asks why a peer was never reached may take.
constexpr absl::Duration kProbeTimeout = absl::Seconds(1);

// How long a closing stream may take to end, whatever Close's deadline.
constexpr absl::Duration kMinCloseGrace = absl::Milliseconds(200);

}  // namespace

PeerSender::PeerSender(const std::string& address,
                       const rpc::Security& security, v1::PeerFrame hello,
                       std::string peer, grpc::CompletionQueue* cq)
    : peer_(std::move(peer)),
      // Its own connection, which Disconnect can close.
      connection_(std::in_place, address, security, /*dedicated=*/true),
      stub_(std::in_place, connection_->channel()),
      // The stream lives as long as the group: no deadline, only Close().
      context_(connection_->NewContext(absl::InfiniteDuration())) {
  // A lost SYN on a lossy link must not fail the group: the stream waits
  // for the connection, and WaitConnected bounds that wait.
  context_->set_wait_for_ready(true);
  absl::MutexLock lock(&mu_);
  queue_.push_back(EncodePeerFrame(hello));
  stream_ = stub_->PrepareCall(context_.get(), "/cohort.v1.Peer/Exchange", cq);
  stream_->StartCall(started_tag_.tag());
}

PeerSender::~PeerSender() { Close(absl::Now()); }

void PeerSender::Started(bool ok) {
  absl::MutexLock lock(&mu_);
  started_ = true;
  if (!ok) {
    // Cancelled before the call was up: no read is pending.
    read_ended_ = true;
    FinishIfEndedLocked();
    return;
  }
  stream_->ReadInitialMetadata(metadata_tag_.tag());
  WriteNextLocked();
}

void PeerSender::AcceptedOrNot(bool ok) {
  absl::MutexLock lock(&mu_);
  if (!ok) {
    read_ended_ = true;
    FinishIfEndedLocked();
    return;
  }
  // A refusal ends the call without this mark; its status then says why.
  if (context_->GetServerInitialMetadata().count(kPeerAcceptedMetadata) > 0) {
    connected_ = true;
  }
  // Nothing else is expected back; the read ends when the stream does.
  stream_->Read(&unused_read_, read_tag_.tag());
}

void PeerSender::WriteNextLocked() {
  if (!started_ || writing_ || read_ended_ || !failed_.ok()) return;
  if (queue_.size() > 1) {
    // What queued while the last write was in flight, up to kMaxBatchBytes,
    // goes as one message.
    std::vector<grpc::ByteBuffer> frames;
    size_t batched = 0;
    while (!queue_.empty() &&
           (frames.empty() ||
            batched + queue_.front().Length() <= kMaxBatchBytes)) {
      batched += queue_.front().Length();
      frames.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    queue_.push_front(frames.size() == 1 ? std::move(frames.front())
                                         : BatchPeerFrames(frames));
  }
  if (!queue_.empty()) {
    writing_ = true;
    stream_->Write(queue_.front(), written_tag_.tag());
  } else if (closing_ && !writes_done_) {
    writes_done_ = true;
    writing_ = true;
    stream_->WritesDone(written_tag_.tag());
  }
}

void PeerSender::Written(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
  if (!ok) {
    if (failed_.ok()) {
      failed_ = absl::UnavailableError(
          absl::StrCat(peer_, " is gone: the stream to it broke"));
    }
    queue_.clear();
  } else if (!writes_done_) {
    queue_.pop_front();
    WriteNextLocked();
  }
  FinishIfEndedLocked();
}

void PeerSender::Read(bool ok) {
  absl::MutexLock lock(&mu_);
  if (ok) {
    // A frame would only mean a newer peer; keep reading until the end.
    stream_->Read(&unused_read_, read_tag_.tag());
    return;
  }
  read_ended_ = true;
  FinishIfEndedLocked();
}

void PeerSender::FinishIfEndedLocked() {
  if (!read_ended_ || writing_ || finishing_) return;
  finishing_ = true;
  stream_->Finish(&status_, finished_tag_.tag());
}

void PeerSender::Finished() {
  absl::MutexLock lock(&mu_);
  done_ = true;
  queue_.clear();
  if (closing_) return;
  const grpc::StatusCode code = status_.error_code();
  if (code == grpc::StatusCode::UNAUTHENTICATED ||
      code == grpc::StatusCode::PERMISSION_DENIED) {
    // Not a peer that went away: one that will refuse every retry too.
    // Its reason replaces a write's failure, which the refusal caused.
    failed_ = absl::Status(
        static_cast<absl::StatusCode>(code),
        absl::StrCat(peer_, " refused this rank: ", status_.error_message()));
    return;
  }
  if (failed_.ok()) {
    failed_ = absl::UnavailableError(absl::StrCat(
        peer_, " is gone: ",
        status_.ok() ? "it closed the stream" : status_.error_message()));
  }
}

absl::Status PeerSender::Enqueue(grpc::ByteBuffer frame) {
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return failed_;
  if (closing_) {
    return absl::FailedPreconditionError(
        absl::StrCat("the stream to ", peer_, " is closing"));
  }
  queue_.push_back(std::move(frame));
  WriteNextLocked();
  return absl::OkStatus();
}

absl::Status PeerSender::WaitConnected(absl::Time deadline) {
  // Until the peer accepts the stream, every failure ends the call, and the
  // end (Finished) says why: a write that failed first, since the peer
  // refused us, must not stand for the refusal.
  auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return connected_ || done_;
  };
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithDeadline(absl::Condition(&settled), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "could not connect to ", peer_,
        " in time: it published that address, but did not accept this "
        "rank's stream there (a firewall between the hosts? agents' "
        "--peer_ports keeps peer servers on ports it can let through)"));
  }
  if (!failed_.ok() || connected_) return failed_;
  return absl::UnavailableError(
      absl::StrCat("the stream to ", peer_, " ended before the peer took it"));
}

absl::Status PeerSender::WithConnectionError(const absl::Status& timed_out) {
  if (!connection_.has_value()) return timed_out;
  const absl::Status probe = connection_->ProbeConnection(kProbeTimeout);
  if (probe.ok()) return timed_out;
  return absl::Status(
      timed_out.code(),
      absl::StrCat(timed_out.message(),
                   "; a call to it now fails with: ", probe.message()));
}

void PeerSender::AwaitDone(bool cancel) {
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_; };
  // Cancelling ends every pending operation at once; the stream must not
  // be destroyed before the last has completed.
  if (cancel) context_->TryCancel();
  absl::MutexLock lock(&mu_);
  COHORT_CHECK(mu_.AwaitWithTimeout(absl::Condition(&done), kCancelGrace));
}

void PeerSender::Disconnect() {
  AwaitDone(/*cancel=*/true);
  {
    absl::MutexLock lock(&mu_);
    if (failed_.ok()) {
      failed_ = absl::UnavailableError(
          absl::StrCat("the stream to ", peer_, " was disconnected"));
    }
  }
  // The stream is over. Without the last references to the channel its
  // connection closes, and the socket writes still pending release their
  // frames. The stream lives in the call, which the context holds.
  stream_.reset();
  context_.reset();
  stub_.reset();
  connection_.reset();
}

void PeerSender::BeginClose() {
  absl::MutexLock lock(&mu_);
  if (closing_) return;
  closing_ = true;
  WriteNextLocked();
}

bool PeerSender::AwaitEnded(absl::Time deadline) {
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_; };
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
}

void PeerSender::Close(absl::Time deadline) {
  BeginClose();
  // A stream the peer has read to its end finishes within a round trip.
  if (AwaitEnded(std::max(deadline, absl::Now() + kMinCloseGrace))) return;
  AwaitDone(/*cancel=*/true);  // the peer did not finish in time
}

}  // namespace cohort::collective
