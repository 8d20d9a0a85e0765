#include "rpc/metrics_http.h"

#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/host_port.h"
#include "rpc/auth.h"
#include "spdlog/spdlog.h"

namespace cohort::rpc {
namespace {

// Scrapes are rare and small: two threads, not httplib's one per core.
constexpr int kThreads = 2;

// Answers 401 naming what is wrong unless the request carries the token.
bool Authorized(const httplib::Request& request, httplib::Response& response,
                const std::optional<std::string>& token) {
  // A copy: get_header_value returns by value, and a view of that
  // temporary would dangle.
  std::optional<std::string> value;
  if (request.has_header("Authorization")) {
    value = request.get_header_value("Authorization");
  }
  const absl::Status status = CheckBearerToken(
      value.has_value() ? std::optional<absl::string_view>(*value)
                        : std::nullopt,
      token);
  if (status.ok()) return true;
  response.status = 401;
  response.set_header("WWW-Authenticate", "Bearer");
  response.set_content(std::string(status.message()) + "\n", "text/plain");
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    MetricsHttpOptions options, MetricRegistry* registry) {
  absl::StatusOr<HostPort> listen =
      ParseHostPort(options.listen, /*allow_port_zero=*/true);
  if (!listen.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_listen: ", listen.status().message()));
  }
  auto server = std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer());
  server->http_ = std::make_unique<httplib::Server>();
  httplib::Server& http = *server->http_;
  http.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
  // httplib's default also sets SO_REUSEPORT, with which two daemons could
  // silently share one port.
  http.set_socket_options([](int socket) {
    int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  const std::optional<std::string> token = options.token;
  http.Get("/metrics", [registry, token](const httplib::Request& request,
                                         httplib::Response& response) {
    if (!Authorized(request, response, token)) return;
    response.set_content(registry->Render(),
                         "text/plain; version=0.0.4; charset=utf-8");
  });
  // Set before the serving thread starts, and outlives it.
  const std::string* address = &server->address_;
  for (auto& [path, page] : options.json_pages) {
    http.Get(path,
             [page = std::move(page), token, address](
                 const httplib::Request& request, httplib::Response& response) {
               if (!Authorized(request, response, token)) return;
               response.set_content(page(*address), "application/json");
             });
  }
  int port = listen->port;
  if (port == 0) {
    port = http.bind_to_any_port(listen->host);
  } else if (!http.bind_to_port(listen->host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("--metrics_listen: cannot bind ", options.listen,
                     " (in use, or not an address of this host)"));
  }
  server->address_ = HostPort{listen->host, port}.ToString();
  server->thread_ = std::thread([&http] { http.listen_after_bind(); });
  // stop() is a no-op until the loop runs; wait for it so that the
  // destructor cannot miss it.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!http.is_running() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  spdlog::info("metrics on http://{}/metrics", server->address_);
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (http_ != nullptr) http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace cohort::rpc
