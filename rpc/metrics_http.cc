#include "rpc/metrics_http.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/host_port.h"
#include "rpc/auth.h"
#include "rpc/http_request.h"
#include "rpc/tcp_bind.h"
#include "spdlog/spdlog.h"

namespace cohort::rpc {
namespace {

// A head longer than this is refused (431): a scrape's is a few hundred
// bytes, and the longest real header is the bearer token.
constexpr size_t kMaxHead = 16 * 1024;

// After an accept failed for want of fds or memory, before the next try.
constexpr absl::Duration kAcceptRetryPause = absl::Milliseconds(100);

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

// Milliseconds left until `deadline`, for poll(): at least 0.
int MillisLeft(absl::Time deadline) {
  return static_cast<int>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(deadline - absl::Now()), 0,
                          std::numeric_limits<int>::max()));
}

// Waits until `fd` is ready for `events` or `deadline` passes; false then.
bool WaitFor(int fd, short events, absl::Time deadline) {
  while (true) {
    pollfd p{.fd = fd, .events = events, .revents = 0};
    const int ready = poll(&p, 1, MillisLeft(deadline));
    if (ready > 0) return true;
    if (ready == 0 || errno != EINTR) return false;
  }
}

// Sends all of `data` on the non-blocking `fd` by `deadline`; false when
// the client stopped taking it or went away.
bool SendAll(int fd, absl::string_view data, absl::Time deadline) {
  while (!data.empty()) {
    const ssize_t sent = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent > 0) {
      data.remove_prefix(static_cast<size_t>(sent));
    } else if (sent < 0 && errno == EINTR) {
      continue;
    } else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitFor(fd, POLLOUT, deadline)) return false;
    } else {
      return false;
    }
  }
  return true;
}

std::string Render(int status, absl::string_view content_type,
                   absl::string_view extra_headers, absl::string_view body,
                   bool with_body) {
  return absl::StrCat("HTTP/1.1 ", status, " ", Reason(status),
                      "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(),
                      "\r\nConnection: close\r\n", extra_headers, "\r\n",
                      with_body ? body : "");
}

std::string TextAnswer(int status, absl::string_view message) {
  return Render(status, "text/plain; charset=utf-8", "",
                absl::StrCat(message, "\n"), /*with_body=*/true);
}

}  // namespace

MetricsHttpServer::MetricsHttpServer(MetricsHttpOptions options,
                                     MetricRegistry* registry)
    : options_(std::move(options)), registry_(registry) {}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    MetricsHttpOptions options, MetricRegistry* registry) {
  absl::StatusOr<HostPort> listen =
      ParseHostPort(options.listen, /*allow_port_zero=*/true);
  if (!listen.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_listen: ", listen.status().message()));
  }
  if (options.request_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "metrics request_timeout must be positive");
  }
  // Non-blocking: an accept never blocks the loop, whatever the client.
  absl::StatusOr<BoundSocket> bound =
      BindTcp(*listen, SOCK_CLOEXEC | SOCK_NONBLOCK, /*backlog=*/64);
  if (!bound.ok()) {
    return absl::Status(
        bound.status().code(),
        absl::StrCat("--metrics_listen: ", bound.status().message()));
  }
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    close(bound->fd);
    return absl::InternalError(
        absl::StrCat("--metrics_listen: eventfd: ", std::strerror(errno)));
  }
  auto server = std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(std::move(options), registry));
  server->listen_fd_ = bound->fd;
  server->wake_fd_ = wake_fd;
  server->address_ = HostPort{listen->host, bound->port}.ToString();
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  spdlog::info("metrics on http://{}/metrics", server->address_);
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // Their workers see the end of the stream at once and close them.
    for (int fd : serving_) shutdown(fd, SHUT_RDWR);
  }
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    spdlog::warn("metrics server: waking its accept loop: {}",
                 std::strerror(errno));
  }
  if (acceptor_.joinable()) acceptor_.join();
  workers_.Shutdown();  // queued connections are closed unserved
  close(listen_fd_);
  close(wake_fd_);
}

size_t MetricsHttpServer::serving() {
  absl::MutexLock lock(&mu_);
  return serving_.size();
}

void MetricsHttpServer::AcceptLoop() {
  bool short_of_fds = false;  // logged once until an accept succeeds
  while (true) {
    pollfd fds[2] = {{.fd = listen_fd_, .events = POLLIN, .revents = 0},
                     {.fd = wake_fd_, .events = POLLIN, .revents = 0}};
    // No deadline: this waits for clients, and the stop wakes it.
    if (poll(fds, 2, -1) < 0 && errno != EINTR) {
      spdlog::error("metrics server: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    const int fd =
        accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM) {
        // The connection stays queued and poll() reports it again at once:
        // without a pause this loop would spin on a core.
        if (!short_of_fds) {
          spdlog::warn("metrics server: cannot accept a connection: {}",
                       std::strerror(errno));
        }
        short_of_fds = true;
        pollfd wake{.fd = wake_fd_, .events = POLLIN, .revents = 0};
        poll(&wake, 1,
             static_cast<int>(absl::ToInt64Milliseconds(kAcceptRetryPause)));
      }
      continue;  // else the client left already
    }
    short_of_fds = false;
    if (workers_.Queued() >= static_cast<size_t>(kMaxWaiting)) {
      // A short answer fits the socket's buffer: sending it cannot block.
      SendAll(fd,
              TextAnswer(503, "too many metrics requests at once; try again"),
              absl::Now());
      // Half-closed and drained of what the client sent already, so that
      // the close does not reset the connection before the answer is read.
      shutdown(fd, SHUT_WR);
      char unread[4096];
      for (int i = 0; i < 4 && recv(fd, unread, sizeof(unread), 0) > 0; ++i) {
      }
      close(fd);
      continue;
    }
    workers_.Post([this, fd] { ServeAndClose(fd); });
  }
}

void MetricsHttpServer::ServeAndClose(int fd) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      close(fd);
      return;
    }
    serving_.insert(fd);
  }
  Serve(fd);
  absl::MutexLock lock(&mu_);
  serving_.erase(fd);
  close(fd);
}

void MetricsHttpServer::Serve(int fd) {
  // One deadline for the whole head, not one per read: a client that
  // drips a byte at a time cannot hold a worker for longer.
  const absl::Time deadline = absl::Now() + options_.request_timeout;
  std::string received;
  std::optional<size_t> head_end;
  std::string answer;
  char buffer[4096];
  while (true) {
    head_end = RequestHeadEnd(received);
    // Whole or not: a long head may end within the read that took it past
    // the limit.
    if (head_end.value_or(received.size()) > kMaxHead) {
      answer = TextAnswer(
          431, absl::StrCat("the request's head is over ", kMaxHead, " bytes"));
      break;
    }
    if (head_end.has_value()) {
      answer = Respond(received.substr(0, *head_end));
      break;
    }
    if (!WaitFor(fd, POLLIN, deadline)) {
      answer = TextAnswer(
          408, absl::StrCat("the request was not complete within ",
                            absl::FormatDuration(options_.request_timeout)));
      break;
    }
    const ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
    if (got == 0) return;  // the client left (or the server stops)
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return;
    }
    received.append(buffer, static_cast<size_t>(got));
  }
  // The answer gets a deadline of its own: a large /metrics page to a slow
  // scraper is fine, one that stops reading is not.
  const absl::Time answer_deadline = absl::Now() + options_.request_timeout;
  if (!SendAll(fd, answer, answer_deadline)) return;
  // Closing with bytes unread (a body, the rest of an oversized head) would
  // reset the connection, and the client could lose the answer: half-close,
  // then read what it still sends until it closes too, within the deadline.
  shutdown(fd, SHUT_WR);
  size_t drained = 0;
  while (drained < kMaxHead && WaitFor(fd, POLLIN, answer_deadline)) {
    const ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
    if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) return;
    if (got > 0) drained += static_cast<size_t>(got);
  }
}

std::string MetricsHttpServer::Respond(absl::string_view head) const {
  absl::StatusOr<HttpRequestHead> request = ParseRequestHead(head);
  if (!request.ok()) return TextAnswer(400, request.status().message());
  const bool head_only = request->method == "HEAD";
  if (request->method != "GET" && !head_only) {
    return Render(405, "text/plain; charset=utf-8", "Allow: GET, HEAD\r\n",
                  absl::StrCat("method ", request->method,
                               " is not served here; pages are read with "
                               "GET\n"),
                  /*with_body=*/true);
  }
  // Before routing: a client without the token learns no page names.
  if (const absl::Status allowed = CheckBearerToken(
          request->authorization.has_value()
              ? std::optional<absl::string_view>(*request->authorization)
              : std::nullopt,
          options_.token);
      !allowed.ok()) {
    return Render(401, "text/plain; charset=utf-8",
                  "WWW-Authenticate: Bearer\r\n",
                  absl::StrCat(allowed.message(), "\n"), /*with_body=*/true);
  }
  const bool metrics = request->path == "/metrics";
  const auto page = options_.json_pages.find(request->path);
  if (!metrics && page == options_.json_pages.end()) {
    std::string known = "/metrics";
    for (const auto& [path, unused] : options_.json_pages) {
      absl::StrAppend(&known, ", ", path);
    }
    return TextAnswer(404, absl::StrCat("no page ", request->path,
                                        " here; the pages are ", known));
  }
  if (metrics) {
    return Render(200, "text/plain; version=0.0.4; charset=utf-8", "",
                  registry_->Render(), !head_only);
  }
  return Render(200, "application/json", "", page->second(address_),
                !head_only);
}

}  // namespace cohort::rpc
