#pragma once

// The lifecycle of a daemon's gRPC server: bind (port 0 picks a free port,
// which is written to a port file), serve the registered services plus the
// standard grpc.health.v1.Health service and server reflection (unless
// async_only; reflection also not with a token, as it never sees one), and
// shut down with a deadline.

#include <grpcpp/completion_queue.h>
#include <grpcpp/server.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/host_port.h"
#include "rpc/security.h"

namespace cohort::rpc {

struct ServerOptions {
  std::string listen = "127.0.0.1:0";  // HOST:PORT
  std::string port_file;               // written once bound, when not empty
  Security security;
  // The registered services are async, served on completion_queue(), whose
  // poller is then the only one of the server's connections: no health or
  // reflection service, whose threads would poll them too.
  bool async_only = false;
};

// Whether this host can bind `listen` as gRPC does; if not, why, as BindTcp
// says it (gRPC would log a long error tree and report only that no address
// was added).
absl::Status CheckCanListen(const HostPort& listen);

// Owns the grpc::Server. Services are not owned and must outlive Shutdown().
// AddService and Start are called from one thread before serving; Shutdown is
// idempotent and thread-safe.
class RpcServer {
 public:
  explicit RpcServer(ServerOptions options);
  ~RpcServer();

  RpcServer(const RpcServer&) = delete;
  RpcServer& operator=(const RpcServer&) = delete;

  void AddService(grpc::Service* service);  // not owned

  // Binds and starts serving. Errors name the address and why: UNAVAILABLE
  // when its port is in use, FAILED_PRECONDITION when this host cannot bind
  // it (not its address, unresolvable, privileged) or cannot write the
  // port file, INVALID_ARGUMENT when malformed.
  absl::Status Start();

  // "host:port" as bound (the port is real even when 0 was asked for).
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  // An address a local client can dial: 0.0.0.0 and [::] become loopback.
  std::string DialAddress() const;

  // Marks health NOT_SERVING, then stops, cancelling calls still running
  // after `grace`.
  void Shutdown(absl::Duration grace = absl::Seconds(1));

  // Whether the server answers its own health check as SERVING within
  // `timeout`, through an in-process channel: its threads are not wedged.
  // What the systemd watchdog is fed on. Thread-safe once started.
  bool AnswersHealthCheck(absl::Duration timeout);

  grpc::Server* grpc_server() { return server_.get(); }
  // With ServerOptions::async_only, once started: the queue of the async
  // services. Shutdown shuts it down after the server; whoever polls
  // it must drain it before this object is destroyed.
  grpc::ServerCompletionQueue* completion_queue() { return cq_.get(); }

 private:
  ServerOptions options_;
  std::vector<grpc::Service*> services_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;  // outlives server_
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int port_ = 0;
  std::atomic<bool> shut_down_{false};
};

}  // namespace cohort::rpc
