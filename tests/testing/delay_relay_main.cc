// delay_relay: forwards TCP connections made to one test host on to
// another, holding every byte for a fixed time in each direction: the
// delay netem would add on a kernel without it (tests/testing/testhosts.sh).
//
//   delay_relay --listen_host=198.18.0.5 --target_host=198.18.0.3
//       --ports=7101,21000-21015 --delay=200ms --ready_file=F
//
// A connection to listen_host:P is forwarded to target_host:P, and logged
// ("relaying a connection to port P"). Runs until killed. Test tooling:
// connections are few, so each direction of one is a pair of threads: one reads
// and stamps, the other writes what is due.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/host_port.h"

ABSL_FLAG(std::string, listen_host, "", "IPv4 address to accept on.");
ABSL_FLAG(std::string, target_host, "", "IPv4 address to forward to.");
ABSL_FLAG(std::string, ports, "",
          "Ports to relay, each PORT or FIRST-LAST, joined by commas.");
ABSL_FLAG(absl::Duration, delay, absl::Milliseconds(200),
          "How long every byte is held, each way.");
ABSL_FLAG(std::string, ready_file, "", "Written once every port is listening.");

namespace {

// Bytes read and not yet written, per direction; past it the reader waits.
constexpr size_t kMaxHeldBytes = 16 << 20;

sockaddr_in Address(const std::string& host, int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &address.sin_addr);
  return address;
}

void NoDelay(int fd) {
  const int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

// One direction of one connection: bytes from `from` reach `to` `delay`
// after they were read. Shared by its two threads; thread-safe.
class Pipe {
 public:
  Pipe(int from, int to, absl::Duration delay)
      : from_(from), to_(to), delay_(delay) {}

  void Read() {
    std::vector<char> buffer(64 << 10);
    while (true) {
      const ssize_t n = read(from_, buffer.data(), buffer.size());
      absl::MutexLock lock(&mu_);
      // End of stream, or an error (a reset too): passed on as an end, once
      // due; tests need no more.
      if (n <= 0) {
        held_.push_back({absl::Now() + delay_, std::string(), true});
        return;
      }
      auto room = [this] { return held_bytes_ < kMaxHeldBytes || closed_; };
      mu_.Await(absl::Condition(&room));
      if (closed_) return;
      held_.push_back({absl::Now() + delay_, std::string(buffer.data(), n)});
      held_bytes_ += static_cast<size_t>(n);
    }
  }

  void Write() {
    while (true) {
      Chunk chunk;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](std::deque<Chunk>* held) { return !held->empty(); }, &held_));
        chunk = std::move(held_.front());
        held_.pop_front();
        held_bytes_ -= chunk.bytes.size();
      }
      absl::SleepFor(chunk.due - absl::Now());
      if (chunk.end) {
        shutdown(to_, SHUT_WR);
        return;
      }
      for (size_t sent = 0; sent < chunk.bytes.size();) {
        const ssize_t n = send(to_, chunk.bytes.data() + sent,
                               chunk.bytes.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) {  // the receiver is gone: stop reading for it
          absl::MutexLock lock(&mu_);
          closed_ = true;
          shutdown(from_, SHUT_RD);
          return;
        }
        sent += static_cast<size_t>(n);
      }
    }
  }

 private:
  struct Chunk {
    absl::Time due;
    std::string bytes;
    bool end = false;
  };

  const int from_;
  const int to_;
  const absl::Duration delay_;
  absl::Mutex mu_;
  std::deque<Chunk> held_ ABSL_GUARDED_BY(mu_);
  size_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// Both sockets of a relayed connection; closed when its last thread ends.
struct Connection {
  Connection(int client, int target, absl::Duration delay)
      : client(client),
        target(target),
        up(client, target, delay),
        down(target, client, delay) {}
  ~Connection() {
    close(client);
    close(target);
  }
  const int client;
  const int target;
  Pipe up;
  Pipe down;
};

// Connects to the target and starts the connection's threads. Runs on a
// thread of its own: a connect may wait for a lost SYN's retry.
void Relay(int client, const std::string& target_host, int port,
           absl::Duration delay) {
  const int target = socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in address = Address(target_host, port);
  if (target < 0 || connect(target, reinterpret_cast<const sockaddr*>(&address),
                            sizeof(address)) != 0) {
    if (target >= 0) close(target);
    close(client);  // as if the target refused it
    return;
  }
  std::printf("delay_relay: relaying a connection to port %d\n", port);
  std::fflush(stdout);
  NoDelay(client);
  NoDelay(target);
  auto connection = std::make_shared<Connection>(client, target, delay);
  std::thread([connection] { connection->up.Read(); }).detach();
  std::thread([connection] { connection->up.Write(); }).detach();
  std::thread([connection] { connection->down.Read(); }).detach();
  std::thread([connection] { connection->down.Write(); }).detach();
}

int Listen(const std::string& host, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  const sockaddr_in address = Address(host, port);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) !=
          0 ||
      listen(fd, 64) != 0) {
    std::fprintf(stderr, "delay_relay: cannot listen on %s:%d: %s\n",
                 host.c_str(), port, std::strerror(errno));
    std::exit(1);
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  cohort::ParseFlagsOnlyCommandLine(
      argc, argv,
      "forwards TCP connections between test hosts, each byte held for "
      "--delay each way.\n\n  delay_relay --listen_host=198.18.0.5 "
      "--target_host=198.18.0.3 --ports=7101,21000-21015 --delay=200ms");
  signal(SIGPIPE, SIG_IGN);
  const std::string listen_host = absl::GetFlag(FLAGS_listen_host);
  const std::string target_host = absl::GetFlag(FLAGS_target_host);
  const absl::Duration delay = absl::GetFlag(FLAGS_delay);
  in_addr parsed;
  for (const std::string& host : {listen_host, target_host}) {
    if (inet_pton(AF_INET, host.c_str(), &parsed) != 1) {
      std::fprintf(stderr, "delay_relay: \"%s\" is not an IPv4 address\n",
                   host.c_str());
      return 2;
    }
  }
  std::vector<int> ports;
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_ports), ',', absl::SkipEmpty())) {
    absl::StatusOr<cohort::PortRange> range = cohort::ParsePortRange(part);
    if (!range.ok()) {
      std::fprintf(stderr, "delay_relay: --ports: %s\n",
                   std::string(range.status().message()).c_str());
      return 2;
    }
    for (int port = range->first; port <= range->last; ++port) {
      ports.push_back(port);
    }
  }
  if (ports.empty()) {
    std::fprintf(stderr, "delay_relay: --ports names no port\n");
    return 2;
  }

  std::vector<std::thread> acceptors;
  for (int port : ports) {
    const int fd = Listen(listen_host, port);
    acceptors.emplace_back([=] {
      while (true) {
        const int client = accept(fd, nullptr, nullptr);
        if (client < 0) {  // out of descriptors, say: try again shortly
          absl::SleepFor(absl::Milliseconds(10));
          continue;
        }
        std::thread(Relay, client, target_host, port, delay).detach();
      }
    });
  }
  if (const std::string ready = absl::GetFlag(FLAGS_ready_file);
      !ready.empty()) {
    if (absl::Status written = cohort::WriteFileAtomically(ready, "ready\n");
        !written.ok()) {
      std::fprintf(stderr, "delay_relay: %s\n",
                   std::string(written.message()).c_str());
      return 1;
    }
  }
  std::printf("delay_relay: %s -> %s, %zu port(s), %s each way\n",
              listen_host.c_str(), target_host.c_str(), ports.size(),
              absl::FormatDuration(delay).c_str());
  std::fflush(stdout);
  for (std::thread& acceptor : acceptors) acceptor.join();
  return 0;
}
