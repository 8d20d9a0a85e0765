#include "rpc/tcp_bind.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace cohort::rpc {
namespace {

std::string Why(const HostPort& address, int error) {
  switch (error) {
    case EADDRINUSE:
      return absl::StrCat("port ", address.port,
                          " is in use by another process (`ss -ltnp "
                          "'sport = :",
                          address.port, "'` shows which)");
    case EADDRNOTAVAIL:
      return absl::StrCat(address.host, " is not an address of this host");
    case EACCES:
      return absl::StrCat("port ", address.port, " needs privilege to bind");
    case 0:
      return "no socket could be made for it";
    default:
      return std::strerror(error);
  }
}

int PortOf(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
    return 0;
  }
  return ntohs(bound.ss_family == AF_INET6
                   ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                   : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

}  // namespace

absl::StatusOr<BoundSocket> BindTcp(const HostPort& address, int socket_flags,
                                    int backlog) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = absl::StrCat(address.port);
  if (const int error =
          getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found);
      error != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot listen on ", address.ToString(), ": host \"", address.host,
        "\" does not resolve (", gai_strerror(error), ")"));
  }
  // A bind's error says more than a socket's (no IPv6 here, say), and a
  // port in use more than any other: it is the one that may come free.
  int bind_error = 0;
  int socket_error = 0;
  int fd = -1;
  for (const addrinfo* at = found; at != nullptr && fd < 0; at = at->ai_next) {
    fd = socket(at->ai_family, at->ai_socktype | socket_flags, at->ai_protocol);
    if (fd < 0) {
      if (socket_error == 0) socket_error = errno;
      continue;
    }
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (bind(fd, at->ai_addr, at->ai_addrlen) != 0 ||
        (backlog > 0 && listen(fd, backlog) != 0)) {
      if (bind_error == 0 || errno == EADDRINUSE) bind_error = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    const int error = bind_error != 0 ? bind_error : socket_error;
    const std::string message = absl::StrCat(
        "cannot listen on ", address.ToString(), ": ", Why(address, error));
    return error == EADDRINUSE ? absl::UnavailableError(message)
                               : absl::FailedPreconditionError(message);
  }
  return BoundSocket{.fd = fd, .port = PortOf(fd)};
}

}  // namespace cohort::rpc
