#include "coordinator/cluster_manager.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace cohort::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSpec[] = R"({"cluster": {
  "chief": ["127.0.0.1:2000"], "worker": ["127.0.0.1:2001", "127.0.0.1:2002"],
  "ps": ["127.0.0.1:2003"]}})";

const TaskId kWorker1{"worker", 1};

class ClusterManagerTest : public ::testing::Test {
 protected:
  ClusterManagerTest()
      : start_(absl::FromUnixSeconds(1000000)),
        manager_(*ClusterSpec::FromJson(kSpec),
                 ClusterManagerOptions{.heartbeat_timeout = absl::Seconds(5),
                                       .startup_timeout = absl::Seconds(30)},
                 start_) {}

  static v1::TaskReport Report(const TaskId& task, std::string address,
                               int64_t pid = 100) {
    v1::TaskReport report;
    report.mutable_task()->set_type(task.type);
    report.mutable_task()->set_index(task.index);
    report.set_address(std::move(address));
    report.set_pid(pid);
    report.set_hostname("host");
    return report;
  }

  static v1::HeartbeatRequest Beat(const TaskId& task, std::string session) {
    v1::HeartbeatRequest request;
    request.mutable_task()->set_type(task.type);
    request.mutable_task()->set_index(task.index);
    request.set_session_id(std::move(session));
    return request;
  }

  absl::Time At(int seconds) const { return start_ + absl::Seconds(seconds); }

  const absl::Time start_;
  ClusterManager manager_;
};

TEST_F(ClusterManagerTest, EveryTaskStartsInStarting) {
  const std::vector<v1::TaskStatus> tasks = manager_.Snapshot(start_);
  ASSERT_EQ(tasks.size(), 4);
  for (const auto& task : tasks) {
    EXPECT_EQ(task.state(), v1::STARTING);
    EXPECT_EQ(task.last_heartbeat_age_ms(), -1);
  }
}

TEST_F(ClusterManagerTest, RegisterMakesReadyAndReturnsTheSpec) {
  absl::StatusOr<v1::RegisterResponse> response =
      manager_.Register(Report(kWorker1, "127.0.0.1:2002"), At(1));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_FALSE(response->session_id().empty());
  EXPECT_THAT(response->cluster_spec_json(), HasSubstr("127.0.0.1:2003"));
  EXPECT_EQ(manager_.state(kWorker1), v1::READY);
  EXPECT_EQ(manager_.pid(kWorker1), 100);
  EXPECT_EQ(response->heartbeat_interval_ms(), 1000);
}

TEST_F(ClusterManagerTest, FiveBeatsFitInAShortHeartbeatTimeout) {
  ClusterManager manager(*ClusterSpec::FromJson(kSpec),
                         {.heartbeat_timeout = absl::Seconds(2)}, start_);
  absl::StatusOr<v1::RegisterResponse> response =
      manager.Register(Report(kWorker1, "127.0.0.1:2002"), At(1));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->heartbeat_interval_ms(), 400);
}

TEST_F(ClusterManagerTest, UnknownIdentityIsRefusedByName) {
  absl::StatusOr<v1::RegisterResponse> response =
      manager_.Register(Report({"worker", 7}, "127.0.0.1:2002"), At(1));
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(response.status().message()),
              HasSubstr("unknown task worker:7"));
  EXPECT_THAT(std::string(response.status().message()),
              HasSubstr("indices 0..1"));

  response = manager_.Register(Report({"trainer", 0}, "127.0.0.1:2002"), At(1));
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(response.status().message()),
              HasSubstr("no \"trainer\" tasks"));
}

TEST_F(ClusterManagerTest, AddressOutsideTheSpecIsRefused) {
  absl::StatusOr<v1::RegisterResponse> response =
      manager_.Register(Report(kWorker1, "127.0.0.1:9999"), At(1));
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(response.status().message()),
              HasSubstr("puts worker:1 at 127.0.0.1:2002"));
  EXPECT_THAT(std::string(response.status().message()),
              Not(HasSubstr("--advertise_address")));
  // A task serving on every interface is told what to register.
  response = manager_.Register(Report(kWorker1, "0.0.0.0:2002"), At(1));
  EXPECT_THAT(std::string(response.status().message()),
              HasSubstr("puts worker:1 at 127.0.0.1:2002; a task serving on "
                        "every interface needs "
                        "--advertise_address=127.0.0.1:2002"));
}

TEST_F(ClusterManagerTest, TheSpecsAddressMayBeSpelledAnotherWay) {
  EXPECT_TRUE(
      manager_.Register(Report(kWorker1, "localhost:2002"), At(1)).ok());
  EXPECT_EQ(manager_.state(kWorker1), v1::READY);
}

TEST_F(ClusterManagerTest, SecondLiveProcessForOneIdentityIsRefused) {
  ASSERT_TRUE(
      manager_.Register(Report(kWorker1, "127.0.0.1:2002", 100), At(1)).ok());
  absl::StatusOr<v1::RegisterResponse> second =
      manager_.Register(Report(kWorker1, "127.0.0.1:2002", 200), At(2));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  // Once the first holder is silent past the timeout, the newcomer wins.
  manager_.ExpireSilent(At(7));
  EXPECT_TRUE(
      manager_.Register(Report(kWorker1, "127.0.0.1:2002", 200), At(7)).ok());
  EXPECT_EQ(manager_.pid(kWorker1), 200);
}

// A container restarted keeps its hostname, and its process may be pid 1
// again: the start time tells the new process from the old.
TEST_F(ClusterManagerTest, ANewProcessOfTheSamePidAndHostIsAnotherProcess) {
  v1::TaskReport first = Report(kWorker1, "127.0.0.1:2002", 1);
  first.set_start_time_unix_ms(1000);
  ASSERT_TRUE(manager_.Register(first, At(1)).ok());
  // The same process again (its session lost, say) takes the identity back.
  ASSERT_TRUE(manager_.Register(first, At(2)).ok());

  v1::TaskReport restarted = first;
  restarted.set_start_time_unix_ms(5000);
  const absl::StatusOr<v1::RegisterResponse> refused =
      manager_.Register(restarted, At(3));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(
      std::string(refused.status().message()),
      HasSubstr("held by pid 1 on host, started 1970-01-01T00:00:01+00:00"));
  // Once the old one is silent past the timeout, the new one is admitted.
  manager_.ExpireSilent(At(8));
  EXPECT_TRUE(manager_.Register(restarted, At(8)).ok());
}

// A holder that keeps beating while another process claims its identity
// for twice the heartbeat timeout, and 30 s at least: two processes share
// one identity, and the claimant is told so for good.
TEST_F(ClusterManagerTest, AClaimantRefusedForLongIsADuplicate) {
  const absl::StatusOr<v1::RegisterResponse> holder =
      manager_.Register(Report(kWorker1, "127.0.0.1:2002", 100), At(0));
  ASSERT_TRUE(holder.ok());
  auto claim = [&](int64_t pid, int second) {
    return manager_
        .Register(Report(kWorker1, "127.0.0.1:2002", pid), At(second))
        .status()
        .code();
  };
  for (int second = 1; second <= 30; ++second) {
    ASSERT_OK(
        manager_.Heartbeat(Beat(kWorker1, holder->session_id()), At(second)));
    // Claiming since second 1: refused for good from second 31 on. A second
    // claimant, since second 2, has a clock of its own.
    EXPECT_EQ(claim(200, second), absl::StatusCode::kAlreadyExists) << second;
    if (second > 1) {
      EXPECT_EQ(claim(300, second), absl::StatusCode::kAlreadyExists) << second;
    }
  }
  ASSERT_OK(manager_.Heartbeat(Beat(kWorker1, holder->session_id()), At(31)));
  const absl::StatusOr<v1::RegisterResponse> refused =
      manager_.Register(Report(kWorker1, "127.0.0.1:2002", 200), At(31));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("held by pid 100 on host, which still heartbeats; a "
                        "second process (pid 200 on host) claims it and has "
                        "for 30s: two processes were given the same identity"));
  EXPECT_EQ(claim(300, 31), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(claim(300, 32), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(manager_.pid(kWorker1), 100);

  // A claimant away for longer than any retry takes claims afresh: a
  // container whose process is pid 1 again, restarted after it exited.
  for (int second = 33; second <= 60; ++second) {
    ASSERT_OK(
        manager_.Heartbeat(Beat(kWorker1, holder->session_id()), At(second)));
  }
  EXPECT_EQ(claim(200, 60), absl::StatusCode::kAlreadyExists);
}

// A task nobody launches is not declared dead, but once overdue its status
// says what is known of why it has not come.
TEST_F(ClusterManagerTest, AnUnlaunchedTaskOverdueSaysWhy) {
  const TaskId ps{"ps", 0};
  manager_.NoteAbsenceHint(ps, "nohost does not resolve");
  EXPECT_TRUE(manager_.ExpireSilent(At(29)).empty());
  EXPECT_TRUE(manager_.ExpireSilent(At(30)).empty());
  EXPECT_EQ(manager_.state(ps), v1::STARTING);
  EXPECT_EQ(manager_.state(kWorker1), v1::STARTING);
  auto error_of = [&](const TaskId& task, int at = 30) {
    for (const v1::TaskStatus& status : manager_.Snapshot(At(at))) {
      if (status.task().type() == task.type &&
          status.task().index() == task.index) {
        return status.last_error();
      }
    }
    return std::string("(no such task)");
  };
  EXPECT_EQ(error_of(ps),
            "nothing has registered as ps:0 (expected at 127.0.0.1:2003) in "
            "30s; nohost does not resolve");
  EXPECT_EQ(error_of(kWorker1),
            "nothing has registered as worker:1 (expected at 127.0.0.1:2002) "
            "in 30s");

  // A refused claim says more than the silence, and shows instead.
  const TaskId chief{"chief", 0};
  EXPECT_FALSE(
      manager_.Register(Report(chief, "127.0.0.1:9999", 300), At(31)).ok());
  EXPECT_THAT(error_of(chief, 31),
              HasSubstr("refused a registration from pid 300 on host: task "
                        "chief:0 registered with address 127.0.0.1:9999"));
  EXPECT_EQ(manager_.state(chief), v1::STARTING);
  // The note follows the clock.
  EXPECT_THAT(error_of(kWorker1, 40), HasSubstr(") in 40s"));
  // Once registered, the task is READY, and nothing of it shows.
  ASSERT_TRUE(manager_.Register(Report(ps, "127.0.0.1:2003"), At(32)).ok());
  EXPECT_EQ(manager_.state(ps), v1::READY);
  EXPECT_EQ(error_of(ps, 32), "");
  // A refused claim does not hide what ended a task: a stopped one stays
  // "deregistered".
  v1::DeregisterRequest stop;
  *stop.mutable_task() = Report(ps, "").task();
  stop.set_session_id(
      manager_.Register(Report(ps, "127.0.0.1:2003"), At(33))->session_id());
  stop.set_reason("signal 15");
  ASSERT_OK(manager_.Deregister(stop, At(34)));
  EXPECT_FALSE(
      manager_.Register(Report(ps, "127.0.0.1:9999", 400), At(35)).ok());
  EXPECT_THAT(error_of(ps, 35), HasSubstr("deregistered"));
}

// A coordinator that was itself stalled (SIGSTOP, a paused VM) heard no
// heartbeats meanwhile: the stall is not the tasks' silence, and a task
// that beat just before it is not declared DEAD on the first sweep after.
// A task that stays silent is still found.
TEST_F(ClusterManagerTest, ACoordinatorStallIsNotTheTasksSilence) {
  auto response = manager_.Register(Report(kWorker1, "127.0.0.1:2002"), At(0));
  ASSERT_TRUE(response.ok());
  ASSERT_TRUE(
      manager_.Heartbeat(Beat(kWorker1, response->session_id()), At(4)).ok());
  EXPECT_TRUE(manager_.ExpireSilent(At(5)).empty());
  // Stalled from 5 s to 25 s: 2.5 s of it is an ordinary late sweep.
  EXPECT_TRUE(manager_.ExpireSilent(At(25)).empty());
  EXPECT_EQ(manager_.state(kWorker1), v1::READY);
  // Silent on: 1 s before the stall, 2.5 s of it, then 1.5 s after.
  EXPECT_EQ(manager_.ExpireSilent(At(26)), std::vector<TaskId>{});
  EXPECT_EQ(manager_.ExpireSilent(At(27)), std::vector<TaskId>{kWorker1});
  EXPECT_EQ(manager_.state(kWorker1), v1::DEAD);
}

// Nor against a launched task's startup timeout: its Register may be what
// waits unread.
TEST_F(ClusterManagerTest, ACoordinatorStallIsNotCountedAgainstAStartup) {
  manager_.MarkLaunched(kWorker1, 100, /*is_restart=*/false, At(0));
  EXPECT_TRUE(manager_.ExpireSilent(At(20)).empty());
  // Stalled from 20 s to 60 s: 37.5 s of it is not the task's.
  EXPECT_TRUE(manager_.ExpireSilent(At(60)).empty());
  EXPECT_EQ(manager_.state(kWorker1), v1::STARTING);
  // 30 s from its launch, less the stall's 37.5 s: 67.5 s.
  for (int t : {62, 64, 66}) EXPECT_TRUE(manager_.ExpireSilent(At(t)).empty());
  EXPECT_EQ(manager_.ExpireSilent(At(68)), std::vector<TaskId>{kWorker1});
}

TEST_F(ClusterManagerTest, SilentTaskDiesAndMustRegisterAgain) {
  auto response = manager_.Register(Report(kWorker1, "127.0.0.1:2002"), At(0));
  ASSERT_TRUE(response.ok());
  ASSERT_TRUE(
      manager_.Heartbeat(Beat(kWorker1, response->session_id()), At(4)).ok());
  EXPECT_TRUE(manager_.ExpireSilent(At(8)).empty());  // 4 s since the beat
  EXPECT_EQ(manager_.ExpireSilent(At(9)), std::vector<TaskId>{kWorker1});
  EXPECT_EQ(manager_.state(kWorker1), v1::DEAD);
  const absl::Status late =
      manager_.Heartbeat(Beat(kWorker1, response->session_id()), At(10));
  EXPECT_EQ(late.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(
      manager_.Register(Report(kWorker1, "127.0.0.1:2002"), At(10)).ok());
  EXPECT_EQ(manager_.state(kWorker1), v1::READY);
}

TEST_F(ClusterManagerTest, StaleSessionIsNotFound) {
  auto first = manager_.Register(Report(kWorker1, "127.0.0.1:2002"), At(0));
  auto second = manager_.Register(Report(kWorker1, "127.0.0.1:2002"), At(1));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(
      manager_.Heartbeat(Beat(kWorker1, first->session_id()), At(2)).code(),
      absl::StatusCode::kNotFound);
  EXPECT_TRUE(
      manager_.Heartbeat(Beat(kWorker1, second->session_id()), At(2)).ok());
}

TEST_F(ClusterManagerTest, HeartbeatsTellEachTasksClockOffset) {
  auto response = manager_.Register(Report(kWorker1, "127.0.0.1:2002"), At(0));
  ASSERT_TRUE(response.ok());
  auto offset = [&] {
    for (const v1::TaskStatus& task : manager_.Snapshot(At(3))) {
      if (task.task().type() == "worker" && task.task().index() == 1) {
        return task.clock_offset_ms();
      }
    }
    return int64_t{-1};
  };
  EXPECT_EQ(offset(), 0);  // not told yet
  // A task whose clock runs 90 s ahead, then one 2.5 s behind.
  v1::HeartbeatRequest beat = Beat(kWorker1, response->session_id());
  beat.set_sent_unix_ms(absl::ToUnixMillis(At(1)) + 90000);
  ASSERT_TRUE(manager_.Heartbeat(beat, At(1)).ok());
  EXPECT_EQ(offset(), 90000);
  beat.set_sent_unix_ms(absl::ToUnixMillis(At(2)) - 2500);
  ASSERT_TRUE(manager_.Heartbeat(beat, At(2)).ok());
  EXPECT_EQ(offset(), -2500);
  // A task that does not tell keeps the last offset it told.
  beat.set_sent_unix_ms(0);
  ASSERT_TRUE(manager_.Heartbeat(beat, At(3)).ok());
  EXPECT_EQ(offset(), -2500);
}

TEST_F(ClusterManagerTest, LaunchExitRestartCycleCountsRestarts) {
  manager_.MarkLaunched(kWorker1, 100, /*is_restart=*/false, At(0));
  EXPECT_EQ(manager_.state(kWorker1), v1::STARTING);
  ASSERT_TRUE(
      manager_.Register(Report(kWorker1, "127.0.0.1:2002", 100), At(1)).ok());
  EXPECT_EQ(manager_.MarkExited(kWorker1, 100,
                                "process killed by signal 9 (Killed)", At(2)),
            0);
  EXPECT_EQ(manager_.state(kWorker1), v1::DEAD);
  manager_.MarkLaunched(kWorker1, 101, /*is_restart=*/true, At(3));
  EXPECT_EQ(manager_.state(kWorker1), v1::RESTARTING);
  EXPECT_EQ(manager_.restart_count(kWorker1), 1);
  ASSERT_TRUE(
      manager_.Register(Report(kWorker1, "127.0.0.1:2002", 101), At(4)).ok());
  EXPECT_EQ(manager_.state(kWorker1), v1::READY);
  const auto tasks = manager_.Snapshot(At(4));
  const auto it = std::find_if(tasks.begin(), tasks.end(), [](const auto& t) {
    return t.task().type() == "worker" && t.task().index() == 1;
  });
  ASSERT_NE(it, tasks.end());
  EXPECT_EQ(it->restart_count(), 1);
  EXPECT_EQ(it->pid(), 101);
  EXPECT_EQ(it->last_error(), "process killed by signal 9 (Killed)");
}

// A process launched beside a live holder (one a restarted coordinator did
// not adopt) is refused and exits: the holder stays READY.
TEST_F(ClusterManagerTest, AProcessLaunchedBesideALiveHolderLeavesItAlone) {
  ASSERT_TRUE(
      manager_.Register(Report(kWorker1, "127.0.0.1:2002", 50), At(0)).ok());
  manager_.MarkLaunched(kWorker1, 100, /*is_restart=*/false, At(1));
  EXPECT_EQ(manager_.state(kWorker1), v1::READY);
  EXPECT_EQ(
      manager_.MarkExited(kWorker1, 100, "process exited with code 2", At(2)),
      50);
  EXPECT_EQ(manager_.state(kWorker1), v1::READY);
  // The holder's own exit is a death.
  EXPECT_EQ(
      manager_.MarkExited(kWorker1, 50, "process exited with code 1", At(3)),
      0);
  EXPECT_EQ(manager_.state(kWorker1), v1::DEAD);
}

TEST_F(ClusterManagerTest, LaunchedTaskThatNeverRegistersDies) {
  manager_.MarkLaunched(kWorker1, 100, false, At(0));
  EXPECT_TRUE(manager_.ExpireSilent(At(29)).empty());
  EXPECT_EQ(manager_.ExpireSilent(At(30)), std::vector<TaskId>{kWorker1});
}

TEST_F(ClusterManagerTest, DeregisterMarksDead) {
  auto response = manager_.Register(Report(kWorker1, "127.0.0.1:2002"), At(0));
  ASSERT_TRUE(response.ok());
  v1::DeregisterRequest request;
  *request.mutable_task() = Beat(kWorker1, "").task();
  request.set_session_id(response->session_id());
  request.set_reason("signal 15");
  ASSERT_TRUE(manager_.Deregister(request, At(1)).ok());
  EXPECT_EQ(manager_.state(kWorker1), v1::DEAD);
}

TEST_F(ClusterManagerTest,
       DeregisterWithAStaleSessionIsRefusedAndChangesNothing) {
  auto first = manager_.Register(Report(kWorker1, "127.0.0.1:2002"), At(0));
  ASSERT_OK(first);
  auto second = manager_.Register(Report(kWorker1, "127.0.0.1:2002"), At(1));
  ASSERT_OK(second);
  const v1::TaskState live = manager_.state(kWorker1);
  for (const std::string& session : {first->session_id(), std::string("")}) {
    v1::DeregisterRequest request;
    *request.mutable_task() = Beat(kWorker1, "").task();
    request.set_session_id(session);
    request.set_reason("signal 15");
    EXPECT_THAT(manager_.Deregister(request, At(2)),
                testing::StatusIs(absl::StatusCode::kNotFound,
                                  ::testing::HasSubstr("no live session")))
        << "session \"" << session << "\"";
    EXPECT_EQ(manager_.state(kWorker1), live);
  }
  // The live session still heartbeats.
  EXPECT_OK(manager_.Heartbeat(Beat(kWorker1, second->session_id()), At(3)));
}

}  // namespace
}  // namespace cohort::coordinator
