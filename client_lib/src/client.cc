#include "cohort/client.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cohort/v1/coordinator.grpc.pb.h"
#include "common/status_macros.h"
#include "rpc/channel.h"

namespace cohort {

struct Client::Impl {
  Impl(std::string address, rpc::Security security, absl::Duration timeout)
      : connection(std::move(address), std::move(security)),
        admin(v1::Admin::NewStub(connection.channel())),
        rpc_timeout(timeout) {}

  rpc::Connection connection;
  std::unique_ptr<v1::Admin::Stub> admin;
  absl::Duration rpc_timeout;
};

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(
    const std::string& address, const ClientOptions& options) {
  if (address.empty()) {
    return absl::InvalidArgumentError("no coordinator address given");
  }
  COHORT_ASSIGN_OR_RETURN(rpc::Security security,
                          rpc::Security::Load(rpc::SecurityFiles{
                              .auth_token_file = options.auth_token_file,
                              .tls_cert_file = options.tls_cert_file,
                              .tls_key_file = options.tls_key_file,
                              .tls_ca_file = options.tls_ca_file,
                          }));
  return std::unique_ptr<Client>(new Client(std::make_unique<Impl>(
      address, std::move(security), options.rpc_timeout)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

const std::string& Client::address() const {
  return impl_->connection.address();
}

absl::StatusOr<v1::ClusterState> Client::GetClusterState() const {
  v1::ClusterState state;
  auto context = impl_->connection.NewContext(impl_->rpc_timeout);
  const grpc::Status status =
      impl_->admin->GetClusterState(context.get(), {}, &state);
  COHORT_RETURN_IF_ERROR(
      impl_->connection.Annotate("Admin.GetClusterState", status));
  return state;
}

absl::StatusOr<v1::ClusterState> Client::WaitForReady(
    absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::DeadlineExceededError("never polled");
  while (true) {
    absl::StatusOr<v1::ClusterState> state = GetClusterState();
    std::vector<std::string> waiting;
    if (state.ok()) {
      for (const v1::TaskStatus& task : state->tasks()) {
        if (task.state() != v1::READY) {
          waiting.push_back(
              absl::StrCat(task.task().type(), ":", task.task().index(), " (",
                           v1::TaskState_Name(task.state()), ")"));
        }
      }
      if (waiting.empty()) return state;
      last = absl::DeadlineExceededError(
          absl::StrCat("not ready after ", absl::FormatDuration(timeout), ": ",
                       absl::StrJoin(waiting, ", ")));
    } else {
      last = state.status();
    }
    if (absl::Now() >= deadline) return last;
    absl::SleepFor(absl::Milliseconds(100));
  }
}

}  // namespace cohort
