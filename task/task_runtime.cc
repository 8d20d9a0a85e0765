#include "task/task_runtime.h"

#include <unistd.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "common/host_info.h"
#include "common/host_port.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/signals.h"
#include "common/systemd_notify.h"
#include "common/version.h"
#include "rpc/log_service.h"
#include "rpc/metrics_http.h"
#include "rpc/server.h"
#include "spdlog/spdlog.h"
#include "task/task_metrics.h"
#include "task/task_session.h"

namespace cohort::task {
namespace {

// Where a scraper reaches `bound`: a wildcard host (0.0.0.0, ::) is
// replaced by the host of the task's advertised gRPC address.
std::string AdvertisedAddress(const std::string& bound,
                              const std::string& advertised) {
  absl::StatusOr<HostPort> b = ParseHostPort(bound, true);
  absl::StatusOr<HostPort> a = ParseHostPort(advertised, true);
  if (!b.ok() || !a.ok()) return bound;
  if (!b->IsWildcard()) return bound;
  return HostPort{a->host, b->port}.ToString();
}

}  // namespace

TaskRuntime::TaskRuntime(std::string daemon_name, TaskConfig config)
    : daemon_name_(std::move(daemon_name)),
      config_(std::move(config)),
      auth_(config_.daemon.server.security.token),
      started_(absl::Now()) {}

v1::TaskReport TaskRuntime::BaseReport() const {
  v1::TaskReport report;
  report.mutable_task()->set_type(config_.task.type);
  report.mutable_task()->set_index(config_.task.index);
  absl::MutexLock lock(&mu_);
  report.set_address(address_);
  report.set_pid(getpid());
  report.set_hostname(Hostname());
  report.set_version(kVersion);
  report.set_start_time_unix_ms(absl::ToUnixMillis(started_));
  report.set_metrics_address(metrics_address_);
  return report;
}

int TaskRuntime::Run(const std::vector<grpc::Service*>& services,
                     std::function<v1::TaskReport()> report,
                     std::function<void()> on_signal) {
  // Every task serves its own log, which the coordinator relays.
  rpc::StreamPump log_pump(absl::Milliseconds(100));
  rpc::LogService log_service(&LogBuffer::Default(), &auth_, &log_pump);
  rpc::RpcServer server(config_.daemon.server);
  for (grpc::Service* service : services) server.AddService(service);
  server.AddService(&log_service);
  if (absl::Status started = server.Start(); !started.ok()) {
    // The usual cause: one TF_CONFIG copied to every host, its "task" left
    // naming another host's entry.
    spdlog::error(
        "cannot serve: {}{}", started.ToString(),
        config_.listen_from_tf_config
            ? absl::StrCat(" (TF_CONFIG's address for ",
                           config_.task.ToString(),
                           ": does its \"task\" name this host's own entry?)")
            : "");
    // An address this host cannot bind is the configuration's to fix: exit
    // as a configuration error, which systemd does not restart. A port in
    // use may come free.
    return absl::IsFailedPrecondition(started) ? kExitConfigError
                                               : kExitFailure;
  }
  const std::string address = config_.advertise_address.empty()
                                  ? server.address()
                                  : config_.advertise_address;
  {
    absl::MutexLock lock(&mu_);
    address_ = address;
  }
  spdlog::info("{} serving on {}; coordinator {}", daemon_name_,
               server.address(), config_.coordinator);
  std::unique_ptr<SystemdWatchdog> watchdog =
      SystemdWatchdog::Start([&server](absl::Duration timeout) {
        return server.AnswersHealthCheck(timeout);
      });
  std::unique_ptr<rpc::MetricsHttpServer> metrics;
  ScopedCollector report_metrics;
  if (!config_.daemon.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<rpc::MetricsHttpServer>> started =
        rpc::MetricsHttpServer::Start(
            {.listen = config_.daemon.metrics_listen,
             .token = config_.daemon.server.security.MetricsToken()},
            &MetricRegistry::Default());
    if (!started.ok()) {
      spdlog::error("cannot serve metrics: {}", started.status().ToString());
      return 1;
    }
    metrics = *std::move(started);
    {
      absl::MutexLock lock(&mu_);
      metrics_address_ = AdvertisedAddress(metrics->address(), address);
    }
    report_metrics = ScopedCollector(
        &MetricRegistry::Default(), [report](MetricWriter& out) {
          WriteReportMetrics(report(), absl::Now(), out);
        });
  }

  TerminationWaiter waiter;
  std::atomic<bool> orphaned{false};
  TaskSession session(TaskSessionOptions{
      .coordinator_address = config_.coordinator,
      .security = config_.daemon.server.security,
      .heartbeat_interval = config_.heartbeat_interval,
      .report = std::move(report),
      .on_registered =
          [this] {
            if (!registered_.exchange(true)) {
              NotifyReady(absl::StrCat(config_.task.ToString(), " registered"));
            }
          },
      .on_fatal =
          [&waiter](const absl::Status& status) {
            waiter.RequestStop(std::string(status.message()));
          },
      .orphan_timeout = config_.orphan_timeout,
      .on_orphaned =
          [&waiter, &orphaned](const absl::Status& status) {
            orphaned = true;
            waiter.RequestStop(std::string(status.message()));
          },
  });
  session.Start();
  const int signal = waiter.Wait();
  NotifyStopping();
  int exit_code = 0;
  if (signal != 0) {
    spdlog::info("received signal {}; shutting down", signal);
    if (on_signal != nullptr) on_signal();
  } else {
    spdlog::error("stopping: {}", waiter.stop_reason());
    exit_code = orphaned ? 1 : 2;
  }
  watchdog.reset();
  session.Shutdown(signal != 0 ? absl::StrCat("signal ", signal)
                               : waiter.stop_reason());
  log_pump.Shutdown();
  server.Shutdown(absl::Milliseconds(500));
  return exit_code;
}

}  // namespace cohort::task
