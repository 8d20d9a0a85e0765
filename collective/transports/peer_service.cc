#include "collective/transports/peer_service.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "collective/transports/completion_loop.h"
#include "collective/transports/peer_frame.h"
#include "rpc/status_conversion.h"

namespace cohort::collective {
namespace {

// One incoming stream, from the wait for it until it ends: reads until the
// peer closes it. Runs where the completion loop runs, one completion at
// a time; deletes itself when its last operation has completed.
class PeerReceiver final {
 public:
  // Waits for the next stream, unless the service has stopped.
  static void Accept(PeerService* service) {
    auto* receiver = new PeerReceiver(service);
    if (!service->StartOp([&] {
          service->RequestExchange(&receiver->context_, &receiver->stream_,
                                   service->cq(), service->cq(),
                                   receiver->accepted_.tag());
        })) {
      delete receiver;
    }
  }

 private:
  explicit PeerReceiver(PeerService* service) : service_(service) {}
  ~PeerReceiver() = default;

  void Accepted(bool ok) {
    if (!ok) {  // the server is shutting down
      delete this;
      return;
    }
    Accept(service_);  // the stream after this one
    if (absl::Status auth = service_->auth().Check(context_); !auth.ok()) {
      Finish(rpc::ToGrpcStatus(auth));
      return;
    }
    context_.AddInitialMetadata(kPeerAcceptedMetadata, "1");
    if (!service_->StartOp(
            [this] { stream_.SendInitialMetadata(accepted_sent_.tag()); })) {
      delete this;
    }
  }

  void ReadNext() {
    if (!service_->StartOp(
            [this] { stream_.Read(&buffer_, read_.tag()); })) {
      delete this;
    }
  }

  void Finish(const grpc::Status& status) {
    if (!service_->StartOp(
            [&] { stream_.Finish(status, finished_.tag()); })) {
      delete this;
    }
  }

  void Read(bool ok) {
    if (!ok) {
      // The peer closed its stream or its process died.
      Gone(absl::UnavailableError(absl::StrCat(Peer(),
                                               " is gone: its stream to rank ",
                                               service_->rank(), " closed")));
      Finish(grpc::Status::OK);
      return;
    }
    received_.clear();
    if (absl::Status decoded = DecodePeerFrames(buffer_, &received_);
        !decoded.ok()) {
      // Nothing after a corrupt frame can be trusted: end the stream, which
      // the rank sees as its peer gone, with the reason.
      Gone(absl::Status(decoded.code(),
                        absl::StrCat(decoded.message(), " from ", Peer())));
      Finish(rpc::ToGrpcStatus(decoded));
      return;
    }
    buffer_.Clear();
    for (ReceivedFrame& frame : received_) {
      if (absl::Status taken = Take(frame); !taken.ok()) {
        Finish(rpc::ToGrpcStatus(taken));
        return;
      }
    }
    received_.clear();
    ReadNext();
  }

  // "rank 1 (worker:0 at 10.0.0.2:4001)", once the hello named it.
  std::string Peer() const {
    if (source_ < 0) return "a peer that has not said hello";
    return absl::StrCat("rank ", source_, " (",
                        peer_label_.empty() ? "" : peer_label_ + " at ",
                        peer_address_, ")");
  }

  // Acts on one frame: the hello, an abort notice, or a chunk.
  absl::Status Take(ReceivedFrame& received) {
    const v1::PeerFrame& frame = received.header;
    if (source_ < 0) return Hello(frame);
    if (!frame.abort().empty()) {
      // The code is a number off the wire; an abort is never OK.
      absl::Status reason =
          rpc::FromWireStatus(frame.abort_code(), frame.abort());
      if (reason.ok()) reason = absl::UnknownError(frame.abort());
      service_->mailbox()->Abort(reason);
    } else if (frame.has_tag()) {
      const auto& tag = frame.tag();
      service_->mailbox()->Deliver(
          source_, Tag{tag.sequence(), tag.step(), tag.chunk()},
          std::move(*received.header.mutable_op_signature()),
          std::move(received.payload));
    }
    return absl::OkStatus();
  }

  void Gone(const absl::Status& status) {
    if (source_ >= 0) service_->mailbox()->PeerGone(source_, status);
  }

  // The first frame names the group and the sending rank.
  absl::Status Hello(const v1::PeerFrame& frame) {
    if (frame.group() != service_->group()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stream for group \"", frame.group(), "\" reached rank ",
          service_->rank(), " of group \"", service_->group(), "\""));
    }
    const int source = frame.source_rank();
    if (source < 0 || source >= service_->size() ||
        source == service_->rank()) {
      return absl::InvalidArgumentError(
          absl::StrCat("hello from rank ", source,
                       ", not a peer in a group of ", service_->size()));
    }
    source_ = source;
    peer_address_ = frame.address();
    peer_label_ = frame.label();
    return absl::OkStatus();
  }

  PeerService* const service_;
  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_{
      &context_};
  CompletionTag accepted_{[this](bool ok) { Accepted(ok); }};
  // Reading starts once the peer has been told it is in; a failed send
  // shows up as a failed read.
  CompletionTag accepted_sent_{[this](bool) { ReadNext(); }};
  CompletionTag read_{[this](bool ok) { Read(ok); }};
  // The stream is over, whether or not its status reached the peer.
  CompletionTag finished_{[this](bool) { delete this; }};
  int source_ = -1;
  std::string peer_address_;  // where the source serves, from its hello
  std::string peer_label_;    // what it is ("worker:1"), from its hello
  grpc::ByteBuffer buffer_;   // the message being read
  std::vector<ReceivedFrame> received_;  // the last message's frames
};

}  // namespace

PeerService::PeerService(std::string group, int rank, int size,
                         Mailbox* mailbox, const rpc::Authenticator* auth)
    : group_(std::move(group)),
      rank_(rank),
      size_(size),
      mailbox_(mailbox),
      auth_(auth) {}

void PeerService::Serve(grpc::ServerCompletionQueue* cq) {
  cq_ = cq;
  PeerReceiver::Accept(this);
}

void PeerService::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

}  // namespace cohort::collective
