// The rpc/ layer with real gRPC servers on 127.0.0.1:0, in one process:
// server lifecycle, port files, auth, health, and the task session against
// the real coordinator services.

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client_lib/src/stream_reader.h"
#include "cohort/client.h"
#include "cohort/v1/job.grpc.pb.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "common/log_buffer.h"
#include "coordinator/cluster_manager.h"
#include "coordinator/coordinator_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/log_service.h"
#include "rpc/server.h"
#include "rpc/stream_pump.h"
#include "task/task_session.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;

// A coordinator's services in-process, on a free port.
class InProcessCoordinator {
 public:
  InProcessCoordinator(const std::string& spec_json,
                       std::optional<std::string> token,
                       const std::string& port_file = "")
      : manager_(*ClusterSpec::FromJson(spec_json),
                 coordinator::ClusterManagerOptions{}, absl::Now()),
        auth_(token),
        coordinator_(&manager_, &auth_),
        ps_reader_(rpc::Security{.token = token}, absl::Seconds(1)),
        admin_(&manager_, &auth_, &ps_reader_, /*store=*/nullptr,
               {.launch_mode = "none", .started = absl::Now()}) {
    rpc::ServerOptions options;
    options.port_file = port_file;
    options.security.token = token;
    server_ = std::make_unique<rpc::RpcServer>(options);
    server_->AddService(&coordinator_);
    server_->AddService(&admin_);
  }

  absl::Status Start() { return server_->Start(); }
  rpc::RpcServer& server() { return *server_; }
  coordinator::ClusterManager& manager() { return manager_; }

 private:
  coordinator::ClusterManager manager_;
  rpc::Authenticator auth_;
  coordinator::CoordinatorService coordinator_;
  coordinator::PsStatusReader ps_reader_;
  coordinator::AdminService admin_;
  std::unique_ptr<rpc::RpcServer> server_;
};

constexpr char kSpec[] = R"({"cluster": {"worker": ["127.0.0.1:2001"]}})";

TEST(RpcServerTest, PortZeroBindsAFreePortAndWritesThePortFile) {
  ScratchDir dir;
  const std::string port_file = dir.path() + "/port";
  InProcessCoordinator coordinator(kSpec, std::nullopt, port_file);
  ASSERT_TRUE(coordinator.Start().ok());
  const int port = coordinator.server().port();
  EXPECT_GT(port, 0);
  EXPECT_EQ(ReadFile(port_file).value_or(""), absl::StrCat(port, "\n"));
  EXPECT_EQ(*HealthCheck(coordinator.server().address()), "SERVING");

  // A second server on the same port fails, naming the address.
  rpc::RpcServer clash({.listen = coordinator.server().address()});
  const absl::Status status = clash.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(absl::StrCat("cannot listen on ",
                                     coordinator.server().address(), ": port ",
                                     port, " is in use by another process")));

  coordinator.server().Shutdown();
  EXPECT_FALSE(HealthCheck(coordinator.server().address()).ok());
}

TEST(RpcServerTest, AnAddressOfAnotherHostIsNamedAsSuch) {
  // 198.18.0.0/15 is reserved for benchmarks; no test host here has .254.
  rpc::RpcServer server({.listen = "198.19.255.254:0"});
  const absl::Status status = server.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("cannot listen on 198.19.255.254:0: 198.19.255.254 is "
                        "not an address of this host"));
}

TEST(RpcServerTest, MalformedListenAddressIsRejected) {
  rpc::RpcServer server({.listen = "127.0.0.1:http"});
  const absl::Status status = server.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("127.0.0.1:http"));
}

TEST(RpcServerTest, TokenGuardsTheServicesButNotHealth) {
  ScratchDir dir;
  const std::string token = dir.Write("token", "tok\n");
  InProcessCoordinator coordinator(kSpec, std::string("tok"));
  ASSERT_TRUE(coordinator.Start().ok());
  const std::string address = coordinator.server().address();

  auto anonymous = Client::Connect(address);
  ASSERT_TRUE(anonymous.ok());
  absl::StatusOr<v1::ClusterState> state = (*anonymous)->GetClusterState();
  EXPECT_EQ(state.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(state.status().message()),
              HasSubstr("Admin.GetClusterState to " + address));

  auto member = Client::Connect(address, {.auth_token_file = token});
  ASSERT_TRUE(member.ok());
  state = (*member)->GetClusterState();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->tasks_size(), 1);
  EXPECT_EQ(*HealthCheck(address), "SERVING");
}

TEST(RpcServerTest, MissingTokenFileIsAClearClientError) {
  auto client =
      Client::Connect("127.0.0.1:1", {.auth_token_file = "/nonexistent/token"});
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(client.status().message()),
              HasSubstr("--auth_token_file: /nonexistent/token"));
}

TEST(RpcServerTest, ANonPositiveRpcTimeoutIsRefused) {
  // Else every call would fail at once with DEADLINE_EXCEEDED, which reads
  // like a slow coordinator.
  for (absl::Duration timeout : {absl::ZeroDuration(), absl::Seconds(-1)}) {
    auto client = Client::Connect("127.0.0.1:1", {.rpc_timeout = timeout});
    ASSERT_FALSE(client.ok());
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(client.status().message()),
                HasSubstr("rpc_timeout must be positive, got " +
                          absl::FormatDuration(timeout)));
  }
}

// Answers SubmitJob with job "1", noting the deadline each call came with.
class DeadlineNotingJobs final : public v1::Jobs::CallbackService {
 public:
  grpc::ServerUnaryReactor* SubmitJob(
      grpc::CallbackServerContext* context, const v1::SubmitJobRequest*,
      v1::SubmitJobResponse* response) override {
    {
      absl::MutexLock lock(&mu_);
      time_left_ = absl::FromChrono(context->deadline()) - absl::Now();
    }
    response->set_job_id("1");
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  absl::Duration time_left() const {
    absl::MutexLock lock(&mu_);
    return time_left_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Duration time_left_ ABSL_GUARDED_BY(mu_);
};

TEST(RpcServerTest, ASubmissionHasTimeToUploadItsLibrary) {
  // Regression: a fixed 60 s, so that a library of hundreds of MiB over a
  // slow link failed every try, and was uploaded three times.
  ScratchDir dir;
  DeadlineNotingJobs jobs;
  rpc::RpcServer server(rpc::ServerOptions{});
  server.AddService(&jobs);
  ASSERT_TRUE(server.Start().ok());
  auto client =
      Client::Connect(server.DialAddress(), {.rpc_timeout = absl::Seconds(1)});
  ASSERT_TRUE(client.ok()) << client.status();
  JobSpec spec;
  spec.library_path = dir.Write("library.so", std::string(32 << 20, 'x'));
  spec.step_fn = "step";
  spec.steps = 1;
  spec.global_batch_size = 1;
  absl::StatusOr<std::string> id = (*client)->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  // 60 s, and 32 s for 32 MiB at 1 MiB/s; less what the call took.
  EXPECT_GT(jobs.time_left(), absl::Seconds(80));
  EXPECT_LE(jobs.time_left(), absl::Seconds(92));
}

// A stream the caller does not read holds a few messages, not the whole
// stream: the server waits on flow control instead. All of it still comes,
// in order, once read.
TEST(StreamReaderTest, AStreamThatIsNotReadHoldsAFewMessages) {
  LogBuffer buffer(int64_t{256} << 20);
  constexpr int kLines = 20 * rpc::kLogLinesPerChunk;
  for (int i = 0; i < kLines; ++i) {
    buffer.Append(absl::Now(), absl::StrCat(std::string(300, 'x'), i));
  }
  rpc::StreamPump pump(absl::Milliseconds(100));
  const rpc::Authenticator auth(std::nullopt);
  rpc::LogService service(&buffer, &auth, &pump);
  rpc::RpcServer server(rpc::ServerOptions{});
  server.AddService(&service);
  ASSERT_TRUE(server.Start().ok());
  rpc::Connection connection(server.DialAddress(), rpc::Security{});
  auto stub = v1::Logs::NewStub(connection.channel());
  const v1::ReadLogRequest request;
  using Reader = StreamReader<v1::LogChunk>;
  Reader reader(connection.NewContext(absl::Seconds(60)));
  reader.Start([&](grpc::ClientContext* context, Reader* r) {
    stub->async()->ReadLog(context, &request, r);
  });
  ASSERT_TRUE(WaitUntil([&] { return reader.queued() == Reader::kMaxQueued; },
                        absl::Seconds(30)));
  // Time for more to arrive, were they read.
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(reader.queued(), Reader::kMaxQueued);

  int64_t next_seq = 1;
  v1::LogChunk chunk;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (reader.Next(deadline, &chunk) == StreamRead::kMessage) {
    for (const v1::LogLine& line : chunk.lines()) {
      ASSERT_EQ(line.seq(), next_seq++);
    }
  }
  EXPECT_TRUE(reader.status().ok()) << reader.status().error_message();
  EXPECT_EQ(next_seq, kLines + 1);

  // A call that ends while its reader is paused (the server gone) still
  // hands over what came, then its end: the pause keeps it open till then.
  Reader cut(connection.NewContext(absl::Seconds(60)));
  cut.Start([&](grpc::ClientContext* context, Reader* r) {
    stub->async()->ReadLog(context, &request, r);
  });
  ASSERT_TRUE(WaitUntil([&] { return cut.queued() == Reader::kMaxQueued; },
                        absl::Seconds(30)));
  server.Shutdown(absl::ZeroDuration());
  int read = 0;
  const absl::Time cut_deadline = absl::Now() + absl::Seconds(60);
  while (cut.Next(cut_deadline, &chunk) == StreamRead::kMessage) ++read;
  EXPECT_GE(read, static_cast<int>(Reader::kMaxQueued));
  EXPECT_FALSE(cut.status().ok());
}

v1::TaskReport WorkerReport() {
  v1::TaskReport report;
  report.mutable_task()->set_type("worker");
  report.mutable_task()->set_index(0);
  report.set_address("127.0.0.1:2001");
  report.set_pid(4242);
  return report;
}

TEST(TaskSessionTest, RegistersAgainWhenTheCoordinatorForgetsIt) {
  InProcessCoordinator coordinator(kSpec, std::nullopt);
  ASSERT_TRUE(coordinator.Start().ok());
  std::atomic<int> registrations{0};
  task::TaskSession session({
      .coordinator_address = coordinator.server().address(),
      .heartbeat_interval = absl::Milliseconds(50),
      .report = WorkerReport,
      .on_registered = [&] { ++registrations; },
  });
  session.Start();
  const TaskId worker{"worker", 0};
  // The coordinator marks the task READY before the session hears back and
  // runs on_registered: wait for both.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return coordinator.manager().state(worker) == v1::READY &&
               registrations.load() == 1;
      },
      absl::Seconds(10)));

  // The coordinator drops the session (as a restarted one would not know
  // it); the next heartbeat gets NOT_FOUND and the task registers again.
  coordinator.manager().MarkExited(worker, WorkerReport().pid(), "forgotten",
                                   absl::Now());
  ASSERT_TRUE(
      WaitUntil([&] { return registrations.load() == 2; }, absl::Seconds(5)));
  EXPECT_EQ(coordinator.manager().state(worker), v1::READY);
  session.Shutdown("test over");
  EXPECT_EQ(coordinator.manager().state(worker), v1::DEAD);
}

// A stop that begins while the first Register is on its way still ends the
// session that Register opens: the coordinator hears the task leave.
TEST(TaskSessionTest, AStopDuringRegisterStillDeregisters) {
  InProcessCoordinator coordinator(kSpec, std::nullopt);
  ASSERT_TRUE(coordinator.Start().ok());
  absl::Notification registering, release;
  std::atomic<int> reports{0};
  task::TaskSession session({
      .coordinator_address = coordinator.server().address(),
      .heartbeat_interval = absl::Milliseconds(50),
      .report =
          [&] {
            // The first report is the Register's: held until the stop began.
            if (reports++ == 0) {
              registering.Notify();
              release.WaitForNotificationWithTimeout(absl::Seconds(30));
            }
            return WorkerReport();
          },
  });
  session.Start();
  ASSERT_TRUE(registering.WaitForNotificationWithTimeout(absl::Seconds(10)));
  std::thread stopper([&] { session.Shutdown("test over"); });
  // Shutdown marks the stop at once, then waits for the session's thread:
  // a moment is ample for the first.
  absl::SleepFor(absl::Milliseconds(200));
  release.Notify();
  stopper.join();
  const TaskId worker{"worker", 0};
  EXPECT_EQ(coordinator.manager().state(worker), v1::DEAD);
}

TEST(TaskSessionTest, RefusalIsFatalAndNamesTheReason) {
  InProcessCoordinator coordinator(kSpec, std::nullopt);
  ASSERT_TRUE(coordinator.Start().ok());
  absl::Mutex mu;
  std::optional<absl::Status> fatal;
  task::TaskSession session({
      .coordinator_address = coordinator.server().address(),
      .report =
          [] {
            v1::TaskReport report = WorkerReport();
            report.mutable_task()->set_index(3);
            return report;
          },
      .on_fatal =
          [&](const absl::Status& status) {
            absl::MutexLock lock(&mu);
            fatal = status;
          },
  });
  session.Start();
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::MutexLock lock(&mu);
        return fatal.has_value();
      },
      absl::Seconds(5)));
  EXPECT_EQ(fatal->code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(fatal->message()),
              HasSubstr("unknown task worker:3"));
  session.Shutdown();
}

TEST(TaskSessionTest, ATaskTheRestartedCoordinatorsSpecDropsStopsSayingSo) {
  const int port = *PickUnusedPort();
  rpc::ServerOptions options;
  options.listen = absl::StrCat("127.0.0.1:", port);
  rpc::Authenticator auth(std::nullopt);
  // A coordinator whose spec has worker:1, then one on the same address
  // whose spec has not.
  auto serve = [&](const char* spec, auto& manager, auto& service,
                   auto& server) -> absl::Status {
    manager.emplace(*ClusterSpec::FromJson(spec),
                    coordinator::ClusterManagerOptions{}, absl::Now());
    service.emplace(&*manager, &auth);
    server.emplace(options);
    server->AddService(&*service);
    return server->Start();
  };
  std::optional<coordinator::ClusterManager> old_manager, new_manager;
  std::optional<coordinator::CoordinatorService> old_service, new_service;
  std::optional<rpc::RpcServer> old_server, new_server;
  ASSERT_TRUE(serve(R"({"cluster": {"worker": ["127.0.0.1:2001",
                                                "127.0.0.1:2002"]}})",
                    old_manager, old_service, old_server)
                  .ok());
  absl::Mutex mu;
  std::optional<absl::Status> fatal;
  std::atomic<int> registrations{0};
  task::TaskSession session({
      .coordinator_address = options.listen,
      .heartbeat_interval = absl::Milliseconds(50),
      .report =
          [] {
            v1::TaskReport report = WorkerReport();
            report.mutable_task()->set_index(1);
            report.set_address("127.0.0.1:2002");
            return report;
          },
      .on_registered = [&] { ++registrations; },
      .on_fatal =
          [&](const absl::Status& status) {
            absl::MutexLock lock(&mu);
            fatal = status;
          },
  });
  session.Start();
  ASSERT_TRUE(
      WaitUntil([&] { return registrations.load() == 1; }, absl::Seconds(10)));
  old_server->Shutdown();
  ASSERT_TRUE(serve(kSpec, new_manager, new_service, new_server).ok());
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::MutexLock lock(&mu);
        return fatal.has_value();
      },
      absl::Seconds(10)))
      << session.last_status();
  EXPECT_EQ(fatal->code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(fatal->message()),
              HasSubstr("unknown task worker:1"));
  session.Shutdown();
}

TEST(TaskSessionTest, KeepsRetryingWhileTheCoordinatorIsAway) {
  // Nothing listens on this port yet.
  const int port = *PickUnusedPort();
  std::atomic<int> registrations{0};
  task::TaskSession session({
      .coordinator_address = absl::StrCat("127.0.0.1:", port),
      .report = WorkerReport,
      .on_registered = [&] { ++registrations; },
  });
  session.Start();
  ASSERT_TRUE(WaitUntil(
      [&] {
        return session.last_status().code() == absl::StatusCode::kUnavailable;
      },
      absl::Seconds(10)))
      << session.last_status();
  EXPECT_EQ(registrations.load(), 0);
  // Now a coordinator comes up on the port the session is dialling.
  rpc::ServerOptions options;
  options.listen = absl::StrCat("127.0.0.1:", port);
  coordinator::ClusterManager manager(*ClusterSpec::FromJson(kSpec), {},
                                      absl::Now());
  rpc::Authenticator auth(std::nullopt);
  coordinator::CoordinatorService service(&manager, &auth);
  rpc::RpcServer server(options);
  server.AddService(&service);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_TRUE(
      WaitUntil([&] { return registrations.load() == 1; }, absl::Seconds(10)));
  session.Shutdown();
}

}  // namespace
}  // namespace cohort::testing
