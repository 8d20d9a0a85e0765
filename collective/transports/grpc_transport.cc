#include "collective/transports/grpc_transport.h"

#include "absl/strings/str_cat.h"
#include "collective/transports/peer_sender.h"
#include "collective/transports/peer_service.h"
#include "common/cluster_spec.h"
#include "common/host_info.h"
#include "common/status_macros.h"

namespace cohort::collective {
namespace {

std::string AddressKey(const std::string& group, int rank) {
  return absl::StrCat(group, "/address/", rank);
}

// The address peers dial: a wildcard listen host becomes our hostname.
std::string AdvertisedAddress(const rpc::RpcServer& server) {
  absl::StatusOr<HostPort> bound = ParseHostPort(server.address(), true);
  if (!bound.ok()) return server.address();
  if (bound->host == "0.0.0.0" || bound->host == "::") bound->host = Hostname();
  return bound->ToString();
}

}  // namespace

GrpcTransport::GrpcTransport(GrpcTransportOptions options)
    : options_(std::move(options)),
      mailbox_(options_.size),
      auth_(options_.security.token),
      addresses_(static_cast<size_t>(options_.size)),
      senders_(static_cast<size_t>(options_.size)) {}

absl::StatusOr<std::unique_ptr<GrpcTransport>> GrpcTransport::Create(
    GrpcTransportOptions options, Store& store) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options.rank, " is out of range for a group of ",
                     options.size));
  }
  std::unique_ptr<GrpcTransport> transport(
      new GrpcTransport(std::move(options)));
  COHORT_RETURN_IF_ERROR(transport->Connect(store));
  return transport;
}

absl::Status GrpcTransport::Connect(Store& store) {
  const std::string& group = options_.group;
  service_ = std::make_unique<PeerService>(group, options_.rank, options_.size,
                                           &mailbox_, &auth_);
  server_ = std::make_unique<rpc::RpcServer>(rpc::ServerOptions{
      .listen = options_.listen, .security = options_.security});
  server_->AddService(service_.get());
  COHORT_RETURN_IF_ERROR(server_->Start());

  addresses_[options_.rank] = AdvertisedAddress(*server_);
  COHORT_RETURN_IF_ERROR(
      store.Set(AddressKey(group, options_.rank), addresses_[options_.rank]));
  for (int peer = 0; peer < options_.size; ++peer) {
    if (peer == options_.rank) continue;
    COHORT_ASSIGN_OR_RETURN(
        addresses_[peer],
        store.Get(AddressKey(group, peer), options_.connect_timeout));
    v1::PeerFrame hello;
    hello.set_group(group);
    hello.set_source_rank(options_.rank);
    hello.set_address(addresses_[options_.rank]);
    senders_[peer] = std::make_unique<PeerSender>(
        addresses_[peer], options_.security, std::move(hello), Describe(peer));
  }
  // Every rank has opened its streams: from here a broken stream means a
  // lost peer.
  return store.Barrier(group + "/connected", options_.size, options_.rank,
                       options_.connect_timeout);
}

GrpcTransport::~GrpcTransport() {
  for (auto& sender : senders_) {
    if (sender != nullptr) sender->Close(absl::Seconds(1));
  }
  if (server_ != nullptr) server_->Shutdown(absl::ZeroDuration());
}

std::string GrpcTransport::Describe(int rank) const {
  if (rank < 0 || rank >= options_.size || addresses_[rank].empty()) {
    return absl::StrCat("rank ", rank);
  }
  return absl::StrCat("rank ", rank, " (", addresses_[rank], ")");
}

absl::Status GrpcTransport::Send(int peer, const Envelope& envelope,
                                 const void* data, size_t bytes,
                                 absl::Time deadline) {
  if (absl::Status aborted = mailbox_.abort_status(); !aborted.ok()) {
    return aborted;
  }
  v1::PeerFrame frame;
  frame.mutable_tag()->set_sequence(envelope.tag.sequence);
  frame.mutable_tag()->set_step(envelope.tag.step);
  frame.mutable_tag()->set_chunk(envelope.tag.chunk);
  frame.set_op_signature(std::string(envelope.signature));
  frame.set_payload(static_cast<const char*>(data), bytes);
  return senders_[peer]->Enqueue(std::move(frame));
}

absl::Status GrpcTransport::Recv(int peer, const Envelope& envelope, void* data,
                                 size_t bytes, absl::Time deadline) {
  return mailbox_.Take(*this, peer, envelope, data, bytes, deadline);
}

void GrpcTransport::Abort(const absl::Status& status) {
  if (!mailbox_.abort_status().ok()) return;
  const std::string reason = absl::StrCat(
      Describe(options_.rank), " aborted the group: ", status.message());
  mailbox_.Abort(absl::Status(status.code(), reason));
  for (auto& sender : senders_) {
    if (sender == nullptr) continue;
    v1::PeerFrame notice;
    notice.set_abort(reason);
    notice.set_abort_code(static_cast<int>(status.code()));
    // Best effort: a peer that is gone needs no notice.
    sender->Enqueue(std::move(notice)).IgnoreError();
  }
}

}  // namespace cohort::collective
