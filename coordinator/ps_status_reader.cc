#include "coordinator/ps_status_reader.h"

#include <utility>

#include "cohort/v1/ps.grpc.pb.h"

namespace cohort::coordinator {
namespace {

// One ReadAll in flight: the calls' contexts and responses live here until
// the last one answers.
struct Fanout {
  explicit Fanout(size_t n, std::function<void(PsStatusReader::Results)> done)
      : stubs(n),
        contexts(n),
        responses(n),
        results(n),
        pending(n),
        done(std::move(done)) {}

  void Finish(size_t i, absl::StatusOr<v1::PsStatus> result) {
    bool last = false;
    {
      absl::MutexLock lock(&mu);
      results[i] = std::move(result);
      last = --pending == 0;
    }
    if (last) done(std::move(results));
  }

  const v1::GetPsStatusRequest request;
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<v1::PsStatus> responses;
  absl::Mutex mu;
  PsStatusReader::Results results ABSL_GUARDED_BY(mu);
  size_t pending ABSL_GUARDED_BY(mu);
  const std::function<void(PsStatusReader::Results)> done;
};

}  // namespace

PsStatusReader::PsStatusReader(rpc::Security security, absl::Duration timeout)
    : security_(std::move(security)), timeout_(timeout) {}

std::shared_ptr<rpc::Connection> PsStatusReader::ConnectionTo(
    const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<rpc::Connection>& connection = connections_[address];
  if (connection == nullptr) {
    connection = std::make_shared<rpc::Connection>(address, security_);
  }
  return connection;
}

void PsStatusReader::ReadAll(const std::vector<std::string>& addresses,
                             std::function<void(Results)> done) {
  if (addresses.empty()) {
    done({});
    return;
  }
  auto fanout = std::make_shared<Fanout>(addresses.size(), std::move(done));
  for (size_t i = 0; i < addresses.size(); ++i) {
    std::shared_ptr<rpc::Connection> connection = ConnectionTo(addresses[i]);
    fanout->contexts[i] = connection->NewContext(timeout_);
    fanout->stubs[i] = v1::ParameterServer::NewStub(connection->channel());
    fanout->stubs[i]->async()->GetPsStatus(
        fanout->contexts[i].get(), &fanout->request, &fanout->responses[i],
        // Keeps the fan-out and the connection alive until
        // the call ends.
        [fanout, connection, i](grpc::Status status) {
          if (status.ok()) {
            fanout->Finish(i, std::move(fanout->responses[i]));
          } else {
            fanout->Finish(
                i, connection->Annotate("ParameterServer.GetPsStatus", status));
          }
        });
  }
}

}  // namespace cohort::coordinator
