#pragma once

// What the agent's job loop drives: one attempt of a job on this agent.
// SyncJobRunner runs the synchronous strategies; PsJobRunner runs
// ParameterServer closure executors.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cohort/step.h"
#include "cohort/v1/job.pb.h"
#include "common/cluster_spec.h"
#include "common/host_port.h"
#include "rpc/security.h"
#include "worker_agent/job_control_client.h"

namespace cohort::agent {

// Fetches a job's step library by digest; returns its local path.
using LibraryFetcher =
    std::function<absl::StatusOr<std::string>(const std::string& digest)>;

// What a runner is given for one attempt.
struct RunnerOptions {
  v1::AgentJobAssignment assignment;
  std::vector<Device> devices;   // this agent's, by index
  std::string coordinator;       // for the rendezvous store
  rpc::Security security;        // for the store and the peer servers
  std::string peer_listen_host;  // where this agent's peer servers bind
  // What peers dial when peer_listen_host is a wildcard (see
  // GrpcTransportOptions::advertise_host).
  std::string peer_advertise_host;
  PortRange peer_ports;  // what the peer servers bind; empty: any free port
  LibraryFetcher fetch_library;
  // The coordinator's JobControl; ParameterServer executors exchange
  // closures through it.
  std::shared_ptr<JobControlClient> job_control;
  TaskId task;  // this agent's; ParameterServer executors name themselves
  std::string checkpoint_copies;  // see JobAgentOptions
  std::string origin;
};

// Implementations own their threads between Start() and destruction (which
// aborts and joins). Report(), Abort(), done() and Leave() are thread-safe.
class AttemptRunner {
 public:
  virtual ~AttemptRunner() = default;
  virtual const v1::AgentJobAssignment& assignment() const = 0;
  virtual void Start() = 0;
  // Ends the attempt: waits fail with `status`, work stops at its next
  // step, and the attempt reports FAILED with `status` unless it had ended
  // (an evaluator, which runs until stopped, reports FINISHED).
  virtual void Abort(const absl::Status& status) = 0;
  virtual v1::AgentJobReport Report() const = 0;
  virtual bool done() const = 0;
  // The agent is shutting down: the attempt is to checkpoint the step under
  // way on every replica and then end, so that the next attempt loses no
  // steps. Returns at once, whether it will (done() then says when it has
  // ended). By default it will not: the runner keeps no state of its own
  // (parameter servers hold it).
  virtual bool Leave() { return false; }
};

// Peers or servers that vanish or abort make a retryable failure; anything
// else (mismatched collectives, bad arguments, a step's own error) is the
// job's own.
inline bool IsPeerFailure(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

}  // namespace cohort::agent
