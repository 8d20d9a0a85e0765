#include "collective/transports/peer_service.h"

#include "absl/strings/str_cat.h"
#include "rpc/status_conversion.h"

namespace cohort::collective {
namespace {

// Reads one peer's stream until it ends. Deletes itself when done.
class PeerReceiver final
    : public grpc::ServerBidiReactor<v1::PeerFrame, v1::PeerFrame> {
 public:
  explicit PeerReceiver(const PeerService* service) : service_(service) {
    StartRead(&frame_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The peer closed its stream or its process died.
      if (source_ >= 0) {
        service_->mailbox()->PeerGone(
            source_, absl::UnavailableError(absl::StrCat(
                         "rank ", source_, " (",
                         peer_label_.empty() ? "" : peer_label_ + " at ",
                         peer_address_, ") is gone: its stream to rank ",
                         service_->rank(), " closed")));
      }
      Finish(grpc::Status::OK);
      return;
    }
    if (source_ < 0) {
      if (absl::Status hello = Hello(); !hello.ok()) {
        Finish(rpc::ToGrpcStatus(hello));
        return;
      }
    } else if (!frame_.abort().empty()) {
      service_->mailbox()->Abort(absl::Status(
          static_cast<absl::StatusCode>(frame_.abort_code()), frame_.abort()));
    } else {
      const auto& tag = frame_.tag();
      service_->mailbox()->Deliver(source_,
                                   Tag{tag.sequence(), tag.step(), tag.chunk()},
                                   std::move(*frame_.mutable_op_signature()),
                                   std::move(*frame_.mutable_payload()));
    }
    frame_.Clear();
    StartRead(&frame_);
  }

  void OnDone() override { delete this; }

 private:
  // The first frame names the group and the sending rank.
  absl::Status Hello() {
    if (frame_.group() != service_->group()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stream for group \"", frame_.group(), "\" reached rank ",
          service_->rank(), " of group \"", service_->group(), "\""));
    }
    const int source = frame_.source_rank();
    if (source < 0 || source >= service_->size() ||
        source == service_->rank()) {
      return absl::InvalidArgumentError(
          absl::StrCat("hello from rank ", source,
                       ", not a peer in a group of ", service_->size()));
    }
    source_ = source;
    peer_address_ = frame_.address();
    peer_label_ = frame_.label();
    return absl::OkStatus();
  }

  const PeerService* const service_;
  int source_ = -1;
  std::string peer_address_;  // where the source serves, from its hello
  std::string peer_label_;    // what it is ("worker:1"), from its hello
  v1::PeerFrame frame_;
};

// Refuses a stream whose call failed authentication.
class Refusal final
    : public grpc::ServerBidiReactor<v1::PeerFrame, v1::PeerFrame> {
 public:
  explicit Refusal(const absl::Status& status) {
    Finish(rpc::ToGrpcStatus(status));
  }
  void OnDone() override { delete this; }
};

}  // namespace

PeerService::PeerService(std::string group, int rank, int size,
                         Mailbox* mailbox, const rpc::Authenticator* auth)
    : group_(std::move(group)),
      rank_(rank),
      size_(size),
      mailbox_(mailbox),
      auth_(auth) {}

grpc::ServerBidiReactor<v1::PeerFrame, v1::PeerFrame>* PeerService::Exchange(
    grpc::CallbackServerContext* context) {
  if (absl::Status auth = auth_->Check(*context); !auth.ok()) {
    return new Refusal(auth);
  }
  return new PeerReceiver(this);
}

}  // namespace cohort::collective
