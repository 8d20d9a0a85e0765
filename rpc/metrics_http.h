#pragma once

// The HTTP endpoint every daemon serves beside its gRPC port when
// --metrics_listen is given: GET /metrics renders a MetricRegistry in the
// Prometheus text format. A daemon may add JSON pages of its own (the
// coordinator's /sd lists every task's endpoint for Prometheus' HTTP service
// discovery). With a cluster token, every page wants
// "Authorization: Bearer <token>", as Prometheus' `authorization` sends it.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/metrics.h"

namespace httplib {
class Server;
}

namespace cohort::rpc {

struct MetricsHttpOptions {
  std::string listen;  // HOST:PORT; port 0 picks a free one
  std::optional<std::string> token;
  // Path -> page body (application/json), computed per request from the
  // server's address as bound (the port picked when 0 was asked for).
  std::map<std::string, std::function<std::string(const std::string& address)>>
      json_pages;
};

// Serves on threads of its own until destroyed. The registry is not owned
// and must outlive the server; so must whatever the pages read.
class MetricsHttpServer {
 public:
  // Binds and starts serving; errors name the address.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      MetricsHttpOptions options, MetricRegistry* registry);
  ~MetricsHttpServer();

  // "host:port" as bound.
  const std::string& address() const { return address_; }

 private:
  MetricsHttpServer() = default;

  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  std::string address_;
};

}  // namespace cohort::rpc
