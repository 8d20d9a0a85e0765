#include "worker_agent/agent_server.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "collective/transports/shm_channel.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "common/host_port.h"
#include "rpc/server.h"
#include "spdlog/spdlog.h"
#include "worker_agent/agent_service.h"
#include "worker_agent/device_discovery.h"

namespace cohort::agent {
namespace {

// A host as it goes before ":port": an IPv6 address bracketed.
std::string Bracketed(const std::string& host) {
  return host.find(':') != std::string::npos ? absl::StrCat("[", host, "]")
                                             : host;
}

// Peer servers of the job's collectives bind where the agent serves.
std::string PeerListenHost(const std::string& listen) {
  const absl::StatusOr<HostPort> address =
      ParseHostPort(listen, /*allow_port_zero=*/true);
  if (!address.ok()) return "127.0.0.1";
  return Bracketed(address->host);
}

// The host peers dial when the peer servers bind a wildcard (as under
// Kubernetes, --listen=0.0.0.0:PORT): the one the cluster spec gives this
// task (--advertise_address), not this machine's hostname, which other
// machines may not resolve.
std::string PeerAdvertiseHost(const std::string& advertise_address) {
  const absl::StatusOr<HostPort> address = ParseHostPort(advertise_address);
  return address.ok() ? address->host : "";
}

// --peer_host: an address of this host, which peers can dial. Returns it
// as peer servers bind it (an IPv6 host bracketed).
absl::StatusOr<std::string> CheckPeerHost(std::string host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string bracketed = Bracketed(host);
  absl::StatusOr<HostPort> address =
      ParseHostPort(absl::StrCat(bracketed, ":0"), /*allow_port_zero=*/true);
  if (!address.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--peer_host: ", address.status().message()));
  }
  if (address->IsWildcard()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--peer_host: ", host,
        " serves every interface; name the one peers should dial"));
  }
  if (absl::Status bindable = rpc::CheckCanListen(*address); !bindable.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--peer_host: ", bindable.message()));
  }
  return bracketed;
}

// NCCL, between CUDA replicas, picks its interfaces itself (for its
// bootstrap and its data alike) unless NCCL_SOCKET_IFNAME names them. Point
// it at --peer_host's interface, so that no replica leaves the data network;
// an operator's own setting stands. `host` is unbracketed. Must run before
// any thread that may read the environment starts (device discovery loads
// CUDA).
void PointNcclAtPeerHost(const std::string& host) {
  const std::string interface = InterfaceWithAddress(host);
  if (const char* set = std::getenv("NCCL_SOCKET_IFNAME"); set != nullptr) {
    spdlog::info("NCCL keeps NCCL_SOCKET_IFNAME={} (--peer_host {} is on {})",
                 set, host, interface.empty() ? "no interface" : interface);
    return;
  }
  if (interface.empty()) {
    spdlog::warn(
        "--peer_host {} is not an interface's address; NCCL picks its own "
        "interface unless NCCL_SOCKET_IFNAME is set",
        host);
    return;
  }
  // "=" asks NCCL for this interface exactly, not every name it prefixes.
  setenv("NCCL_SOCKET_IFNAME", absl::StrCat("=", interface).c_str(), 1);
  const bool v6 = host.find(':') != std::string::npos;
  if (v6) setenv("NCCL_SOCKET_FAMILY", "AF_INET6", /*overwrite=*/0);
  spdlog::info("NCCL between hosts uses {} (--peer_host {})", interface, host);
  // NCCL takes one address per interface, the first of the family.
  for (const std::string& address : AddressesOfInterface(interface)) {
    if ((address.find(':') != std::string::npos) != v6) continue;
    if (address != host) {
      spdlog::warn(
          "NCCL will use {}'s first address, {}, not --peer_host {}: it "
          "picks interfaces, not addresses; give the data network an "
          "interface of its own",
          interface, address, host);
    }
    break;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<AgentServer>> AgentServer::Create(
    task::TaskConfig config, AgentServerOptions options) {
  if (options.cpu_devices < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cpu_devices must be at least 1, got ", options.cpu_devices));
  }
  if (options.leave_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shutdown_checkpoint_timeout must not be negative, got ",
                     absl::FormatDuration(options.leave_timeout)));
  }
  if (options.stop_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stop_timeout must be positive, got ",
                     absl::FormatDuration(options.stop_timeout)));
  }
  absl::StatusOr<PortRange> peer_ports = ParsePortRange(options.peer_ports);
  if (!peer_ports.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--peer_ports: ", peer_ports.status().message()));
  }
  std::string peer_host;
  if (!options.peer_host.empty()) {
    absl::StatusOr<std::string> checked = CheckPeerHost(options.peer_host);
    if (!checked.ok()) return checked.status();
    peer_host = *std::move(checked);
    PointNcclAtPeerHost(
        options.peer_host.front() == '['
            ? options.peer_host.substr(1, options.peer_host.size() - 2)
            : options.peer_host);
  }
  DiscoveredDevices devices = DiscoverDevices(options.cpu_devices);
  spdlog::info("devices: {}", devices.note);

  JobAgentOptions jobs{.task = config.task,
                       .coordinator = config.coordinator,
                       .security = config.daemon.server.security,
                       .stop_timeout = options.stop_timeout,
                       .leave_timeout = options.leave_timeout};
  for (const v1::Device& device : devices.devices) {
    jobs.devices.push_back({.kind = device.kind() == v1::Device::CUDA
                                        ? Device::Kind::kCuda
                                        : Device::Kind::kCpu,
                            .index = device.index()});
  }
  jobs.peer_listen_host = peer_host.empty()
                              ? PeerListenHost(config.daemon.server.listen)
                              : peer_host;
  jobs.peer_advertise_host = PeerAdvertiseHost(config.advertise_address);
  jobs.peer_ports = *peer_ports;
  std::string state_dir = options.state_dir;
  if (state_dir.empty()) {
    state_dir = absl::StrCat(TempDirectory(), "/cohort-agent-", getuid(), "/",
                             config.task.type, "-", config.task.index);
  }
  jobs.cache_dir =
      options.cache_dir.empty() ? state_dir + "/libraries" : options.cache_dir;
  jobs.checkpoint_copies = state_dir + "/checkpoints";
  jobs.origin = absl::StrCat(config.task.ToString(), " on ", Hostname());
  return std::unique_ptr<AgentServer>(new AgentServer(
      std::move(config), std::move(devices.devices), std::move(jobs)));
}

AgentServer::AgentServer(task::TaskConfig config,
                         std::vector<v1::Device> devices, JobAgentOptions jobs)
    : devices_(std::move(devices)),
      jobs_(std::move(jobs)),
      runtime_("agent", std::move(config)) {}

int AgentServer::Run() {
  // Rings of a killed predecessor (or any other process gone).
  if (const int removed = collective::RemoveStaleRings(); removed > 0) {
    spdlog::info("removed {} shared-memory ring(s) left by exited processes",
                 removed);
  }
  AgentService service(&runtime_, devices_);
  JobAgent job_agent(jobs_);
  job_agent.Start();
  const int code = runtime_.Run(
      {&service}, [&service] { return service.Report(); },
      [&job_agent] { job_agent.Leave(); });
  job_agent.Shutdown();
  return code;
}

}  // namespace cohort::agent
