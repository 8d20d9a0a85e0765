#pragma once

// The HTTP endpoint every daemon serves beside its gRPC port when
// --metrics_listen is given: GET /metrics renders a MetricRegistry in the
// Prometheus text format. A daemon may add JSON pages of its own (the
// coordinator's /sd lists every task's endpoint for Prometheus' HTTP service
// discovery). With a cluster token, every page wants
// "Authorization: Bearer <token>", as Prometheus' `authorization` sends it.
//
// A page is a small GET, so the server is small too and bounded everywhere:
// a fixed pool of threads, a bounded queue of accepted connections (past
// it a connection gets 503 at once), a deadline for a request's whole head
// (a client dripping bytes is cut off with 408, not kept per byte), a head
// size limit (431), no request body read, one request per connection.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/executor.h"
#include "common/metrics.h"

namespace cohort::rpc {

struct MetricsHttpOptions {
  std::string listen;  // HOST:PORT; port 0 picks a free one
  std::optional<std::string> token;
  // Path -> page body (application/json), computed per request from the
  // server's address as bound (the port picked when 0 was asked for).
  std::map<std::string, std::function<std::string(const std::string& address)>>
      json_pages;
  // How long a client may take to send its request's head, and then to
  // take the answer.
  absl::Duration request_timeout = absl::Seconds(5);
};

// Serves on threads of its own until destroyed. The registry is not owned
// and must outlive the server; so must whatever the pages read. Start and
// the destructor are for one thread; serving() is thread-safe.
class MetricsHttpServer {
 public:
  // Connections served at once, and accepted ones that may wait for them.
  static constexpr int kWorkers = 4;
  static constexpr int kMaxWaiting = 16;

  // Binds and starts serving; errors name the address.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      MetricsHttpOptions options, MetricRegistry* registry);
  // Stops at once: connections being served are shut down, not waited for.
  ~MetricsHttpServer();

  // "host:port" as bound.
  const std::string& address() const { return address_; }
  // Connections a worker is serving now.
  size_t serving();

 private:
  MetricsHttpServer(MetricsHttpOptions options, MetricRegistry* registry);

  void AcceptLoop();
  // On a worker: serves the connection unless the server stops.
  void ServeAndClose(int fd);
  // Reads one request from `fd` and answers it.
  void Serve(int fd);
  // The whole answer (status line, headers, body) to a request's head.
  std::string Respond(absl::string_view head) const;

  const MetricsHttpOptions options_;
  MetricRegistry* const registry_;
  std::string address_;  // set before any thread starts
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd that ends the accept loop's poll

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Being served: shut down on stop, so that no client holds the stop up.
  absl::flat_hash_set<int> serving_ ABSL_GUARDED_BY(mu_);

  Executor workers_{kWorkers, "metrics-http"};  // queue: accepted fds
  std::thread acceptor_;
};

}  // namespace cohort::rpc
