#include "worker_agent/job_agent.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "common/file_util.h"
#include "common/library_files.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/wait.h"
#include "worker_agent/checkpoint_copies.h"

namespace cohort::agent {
namespace {

using ::cohort::testing::IsOkAndHolds;
using ::cohort::testing::StatusIs;
using ::cohort::testing::WaitUntil;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr absl::Duration kWait = absl::Seconds(20);

// A coordinator that answers every Sync with `assignment` (and `abort`),
// or fails with `sync_error`, and serves `library`.
class FakeJobControl final : public JobControlClient {
 public:
  void Assign(const std::string& job, int attempt, std::string abort = "",
              std::string uid = "") {
    absl::MutexLock lock(&mu_);
    response_.set_sync_interval_ms(5);
    response_.mutable_assignment()->set_job_id(job);
    response_.mutable_assignment()->set_attempt(attempt);
    response_.mutable_assignment()->set_job_uid(std::move(uid));
    response_.set_abort(std::move(abort));
  }
  // Which agent of the job this one is: 0 for the chief's, which keeps no
  // checkpoint copies.
  void SetNode(int node) {
    absl::MutexLock lock(&mu_);
    response_.mutable_assignment()->set_node(node);
  }
  void SetClusterUid(const std::string& uid) {
    absl::MutexLock lock(&mu_);
    response_.set_cluster_uid(uid);
  }
  void SetLibrary(const std::string& digest) {
    absl::MutexLock lock(&mu_);
    response_.mutable_assignment()->mutable_spec()->set_library_digest(digest);
  }
  // Lists the jobs that have not ended ("<id>-<uid>"), as coordinators that
  // know of checkpoint copies do.
  void ListUnended(const std::vector<std::string>& jobs) {
    absl::MutexLock lock(&mu_);
    response_.set_sync_interval_ms(5);
    response_.set_lists_unended_jobs(true);
    response_.clear_unended_jobs();
    for (const std::string& job : jobs) response_.add_unended_jobs(job);
  }
  void Unassign() {
    absl::MutexLock lock(&mu_);
    response_.clear_assignment();
    response_.clear_abort();
  }
  void SetSyncInterval(absl::Duration interval) {
    absl::MutexLock lock(&mu_);
    response_.set_sync_interval_ms(absl::ToInt64Milliseconds(interval));
  }
  void FailSyncs(absl::Status error) {
    absl::MutexLock lock(&mu_);
    sync_error_ = std::move(error);
  }
  // The next `n` reports of an agent that left fail with `error`.
  void FailLeaveReports(int n, absl::Status error) {
    absl::MutexLock lock(&mu_);
    leave_failures_ = n;
    leave_error_ = std::move(error);
  }
  void Serve(std::string library) {
    absl::MutexLock lock(&mu_);
    library_ = std::move(library);
  }
  int syncs() const {
    absl::MutexLock lock(&mu_);
    return syncs_;
  }
  int fetches() const {
    absl::MutexLock lock(&mu_);
    return fetches_;
  }
  v1::AgentJobReport last_report() const {
    absl::MutexLock lock(&mu_);
    return last_report_;
  }

  absl::StatusOr<v1::AgentSyncResponse> Sync(const v1::AgentJobReport& report,
                                             absl::Duration) override {
    absl::MutexLock lock(&mu_);
    ++syncs_;
    if (report.agent_left() && leave_failures_ > 0) {
      --leave_failures_;
      return leave_error_;
    }
    last_report_ = report;
    if (!sync_error_.ok()) return sync_error_;
    return response_;
  }
  absl::StatusOr<std::string> FetchLibrary(const std::string&,
                                           absl::Duration) override {
    absl::MutexLock lock(&mu_);
    ++fetches_;
    return library_;
  }
  absl::StatusOr<v1::ClosureResponse> RunClosures(const v1::ClosureRequest&,
                                                  absl::Duration) override {
    return absl::UnimplementedError("not in these tests");
  }

 private:
  mutable absl::Mutex mu_;
  v1::AgentSyncResponse response_ ABSL_GUARDED_BY(mu_);
  absl::Status sync_error_ ABSL_GUARDED_BY(mu_);
  int leave_failures_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status leave_error_ ABSL_GUARDED_BY(mu_);
  std::string library_ ABSL_GUARDED_BY(mu_);
  int syncs_ ABSL_GUARDED_BY(mu_) = 0;
  int fetches_ ABSL_GUARDED_BY(mu_) = 0;
  v1::AgentJobReport last_report_ ABSL_GUARDED_BY(mu_);
};

// What the fake runners did, by attempt; outlives them.
struct RunnerLog {
  absl::Mutex mu;
  std::map<int, bool> started ABSL_GUARDED_BY(mu);
  std::map<int, absl::Status> aborted ABSL_GUARDED_BY(mu);
  std::map<int, bool> destroyed ABSL_GUARDED_BY(mu);
  std::map<int, bool> left ABSL_GUARDED_BY(mu);  // asked to Leave
  std::map<int, bool> finished ABSL_GUARDED_BY(mu);  // ended on its own
  RunnerOptions last_options ABSL_GUARDED_BY(mu);
  // Runners ignore aborts, as one inside a job's function that never
  // returns would.
  bool stuck ABSL_GUARDED_BY(mu) = false;
  std::vector<std::string> stuck_reports ABSL_GUARDED_BY(mu);

  void SetStuck(bool value) {
    absl::MutexLock lock(&mu);
    stuck = value;
  }
  std::vector<std::string> StuckReports() {
    absl::MutexLock lock(&mu);
    return stuck_reports;
  }

  bool Started(int attempt) {
    absl::MutexLock lock(&mu);
    return started[attempt];
  }
  absl::Status Aborted(int attempt) {
    absl::MutexLock lock(&mu);
    auto it = aborted.find(attempt);
    return it == aborted.end() ? absl::OkStatus() : it->second;
  }
  void Finish(int attempt) {
    absl::MutexLock lock(&mu);
    finished[attempt] = true;
  }
  bool Left(int attempt) {
    absl::MutexLock lock(&mu);
    return left[attempt];
  }
  bool Destroyed(int attempt) {
    absl::MutexLock lock(&mu);
    return destroyed[attempt];
  }
};

class FakeRunner final : public AttemptRunner {
 public:
  FakeRunner(RunnerOptions options, std::shared_ptr<RunnerLog> log)
      : options_(std::move(options)), log_(std::move(log)) {
    absl::MutexLock lock(&log_->mu);
    log_->last_options = options_;
  }
  ~FakeRunner() override {
    absl::MutexLock lock(&log_->mu);
    log_->destroyed[attempt()] = true;
  }
  const v1::AgentJobAssignment& assignment() const override {
    return options_.assignment;
  }
  void Start() override {
    absl::MutexLock lock(&log_->mu);
    log_->started[attempt()] = true;
  }
  void Abort(const absl::Status& status) override {
    absl::MutexLock lock(&log_->mu);
    log_->aborted.try_emplace(attempt(), status);
  }
  v1::AgentJobReport Report() const override {
    v1::AgentJobReport report;
    report.set_job_id(options_.assignment.job_id());
    report.set_attempt(attempt());
    report.set_job_uid(options_.assignment.job_uid());
    report.set_state(v1::AgentJobReport::RUNNING);
    absl::MutexLock lock(&log_->mu);
    if (log_->finished[attempt()]) {
      report.set_state(v1::AgentJobReport::FINISHED);
    } else if (log_->left[attempt()] && !log_->stuck) {
      report.set_state(v1::AgentJobReport::FAILED);
      report.set_agent_left(true);
    }
    return report;
  }
  // Done once aborted or asked to leave (as if it had checkpointed),
  // unless stuck.
  bool done() const override {
    absl::MutexLock lock(&log_->mu);
    return log_->finished[attempt()] ||
           (!log_->stuck &&
            (log_->aborted.contains(attempt()) || log_->left[attempt()]));
  }
  bool Leave() override {
    absl::MutexLock lock(&log_->mu);
    log_->left[attempt()] = true;
    return true;
  }

 private:
  int attempt() const { return options_.assignment.attempt(); }
  const RunnerOptions options_;
  const std::shared_ptr<RunnerLog> log_;
};

class JobAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = absl::StrCat(::testing::TempDir(), "/job_agent_test_", getpid());
    copies_ = absl::StrCat(cache_, "/checkpoints");
    agent_ = std::make_unique<JobAgent>(JobAgentOptions{
        .task = {"worker", 1},
        .job_control = coordinator_,
        .make_runner =
            [log = log_](RunnerOptions options) {
              return std::make_unique<FakeRunner>(std::move(options), log);
            },
        .cache_dir = cache_,
        .checkpoint_copies = copies_,
        .stop_timeout = absl::Milliseconds(100),
        .on_stuck =
            [log = log_](const std::string& why) {
              absl::MutexLock lock(&log->mu);
              log->stuck_reports.push_back(why);
              log->stuck = false;  // lets the agent destroy the runner
            },
        .leave_timeout = absl::Milliseconds(200)});
    agent_->Start();
  }
  void TearDown() override {
    agent_->Shutdown();
    std::filesystem::remove_all(cache_);
  }

  std::shared_ptr<FakeJobControl> coordinator_ =
      std::make_shared<FakeJobControl>();
  std::shared_ptr<RunnerLog> log_ = std::make_shared<RunnerLog>();
  std::string cache_;
  std::string copies_;
  std::unique_ptr<JobAgent> agent_;
};

TEST_F(JobAgentTest, StartsTheAssignedAttemptAndReportsIt) {
  coordinator_->Assign("4", 1);
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(1); }, kWait));
  ASSERT_TRUE(WaitUntil(
      [&] { return coordinator_->last_report().job_id() == "4"; }, kWait));
  const v1::AgentJobReport report = coordinator_->last_report();
  EXPECT_EQ(report.task().type(), "worker");
  EXPECT_EQ(report.task().index(), 1);
  EXPECT_EQ(report.state(), v1::AgentJobReport::RUNNING);
  EXPECT_OK(log_->Aborted(1));
}

TEST_F(JobAgentTest, AnAbortFromTheCoordinatorReachesTheRunnerWithItsReason) {
  coordinator_->Assign("4", 1);
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(1); }, kWait));
  coordinator_->Assign("4", 1, "worker:0 is gone (DEAD)");
  ASSERT_TRUE(WaitUntil([&] { return !log_->Aborted(1).ok(); }, kWait));
  EXPECT_THAT(log_->Aborted(1), StatusIs(absl::StatusCode::kUnavailable,
                                         "worker:0 is gone (DEAD)"));
}

TEST_F(JobAgentTest, ANewAttemptReplacesTheRunnerAndNoAssignmentStopsIt) {
  coordinator_->Assign("4", 1);
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(1); }, kWait));
  coordinator_->Assign("4", 2);
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(2); }, kWait));
  EXPECT_TRUE(log_->Destroyed(1));
  EXPECT_THAT(log_->Aborted(1),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("job 4 attempt 1 was ended")));
  coordinator_->Unassign();
  ASSERT_TRUE(WaitUntil([&] { return log_->Destroyed(2); }, kWait));
  EXPECT_THAT(log_->Aborted(2), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(log_->StuckReports(), IsEmpty());
}

// A new cluster's job 1, attempt 1 is not the earlier cluster's: the uid
// tells them apart.
TEST_F(JobAgentTest, AnAssignmentOfTheSameIdAndAnotherUidReplacesTheRunner) {
  coordinator_->Assign("1", 1, "", "uid-old");
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(1); }, kWait));
  coordinator_->Assign("1", 1, "", "uid-new");
  ASSERT_TRUE(WaitUntil([&] { return log_->Destroyed(1); }, kWait));
  ASSERT_TRUE(WaitUntil(
      [&] { return coordinator_->last_report().job_uid() == "uid-new"; },
      kWait));
}

TEST_F(JobAgentTest, AnAttemptThatDoesNotStopInTimeIsReportedAsStuck) {
  log_->SetStuck(true);
  coordinator_->Assign("4", 1);
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(1); }, kWait));
  coordinator_->Assign("4", 2);
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(2); }, kWait));
  EXPECT_THAT(log_->StuckReports(),
              ElementsAre(AllOf(
                  HasSubstr("job 4 attempt 1 did not stop within 100ms of "
                            "being ended (job 4 attempt 1 was ended by the "
                            "coordinator)"),
                  HasSubstr("(init, step, dataset or stream) has not "
                            "returned"))));
  EXPECT_TRUE(log_->Destroyed(1));
}

TEST_F(JobAgentTest, LeavingLetsTheAttemptEndOnItsOwnBeforeItIsStopped) {
  coordinator_->Assign("4", 1);
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(1); }, kWait));
  agent_->Leave();
  EXPECT_TRUE(log_->Left(1));
  // It ended on its own: nothing aborted it.
  EXPECT_OK(log_->Aborted(1));
  // And the coordinator heard so, with the loop already stopped.
  const v1::AgentJobReport last = coordinator_->last_report();
  EXPECT_EQ(last.state(), v1::AgentJobReport::FAILED);
  EXPECT_TRUE(last.agent_left());
  EXPECT_EQ(last.task().type(), "worker");
  agent_->Shutdown();
  EXPECT_TRUE(log_->Destroyed(1));
  EXPECT_THAT(log_->StuckReports(), IsEmpty());
}

TEST_F(JobAgentTest, ALeavingAgentsReportRidesOutACoordinatorThatBlinks) {
  // Regression: one failed try lost agent_left, and the coordinator charged
  // the job a restart for a routine shutdown.
  coordinator_->Assign("4", 1);
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(1); }, kWait));
  coordinator_->FailLeaveReports(
      2, absl::UnavailableError("the coordinator is restarting"));
  agent_->Leave();
  EXPECT_TRUE(log_->Left(1));
  const v1::AgentJobReport last = coordinator_->last_report();
  EXPECT_TRUE(last.agent_left());
  EXPECT_EQ(last.state(), v1::AgentJobReport::FAILED);
}

TEST_F(JobAgentTest, AnAttemptThatEndedSinceTheLastSyncIsReportedOnLeaving) {
  // Regression: the end was never reported, and the coordinator, hearing
  // no more of the agent, restarted a job that had finished.
  coordinator_->Assign("4", 1);
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(1); }, kWait));
  coordinator_->SetSyncInterval(absl::Hours(1));
  const int syncs = coordinator_->syncs();
  // A sync after the change: the loop now waits an hour for the next.
  ASSERT_TRUE(WaitUntil([&] { return coordinator_->syncs() > syncs; }, kWait));
  log_->Finish(1);
  agent_->Leave();
  EXPECT_FALSE(log_->Left(1));  // nothing to checkpoint for
  EXPECT_EQ(coordinator_->last_report().state(), v1::AgentJobReport::FINISHED);
}

TEST_F(JobAgentTest, AnEndTheCoordinatorHeardIsNotReportedAgainOnLeaving) {
  coordinator_->Assign("4", 1);
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(1); }, kWait));
  log_->Finish(1);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return coordinator_->last_report().state() ==
               v1::AgentJobReport::FINISHED;
      },
      kWait));
  // The loop waits an hour after the next sync, whose report was surely
  // taken after the end.
  coordinator_->SetSyncInterval(absl::Hours(1));
  const int after_end = coordinator_->syncs();
  ASSERT_TRUE(
      WaitUntil([&] { return coordinator_->syncs() > after_end; }, kWait));
  const int syncs = coordinator_->syncs();
  agent_->Leave();
  EXPECT_EQ(coordinator_->syncs(), syncs);
}

TEST_F(JobAgentTest, LeavingWaitsNoLongerThanItsTimeout) {
  log_->SetStuck(true);
  coordinator_->Assign("4", 1);
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(1); }, kWait));
  const absl::Time start = absl::Now();
  agent_->Leave();
  EXPECT_TRUE(log_->Left(1));
  // It waited its 200 ms for the stuck attempt, and not for it to end;
  // the upper bound leaves a busy machine room.
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_FALSE(log_->Destroyed(1));
  // Shutdown then stops it as any ended attempt.
  agent_->Shutdown();
  EXPECT_TRUE(log_->Destroyed(1));
  EXPECT_THAT(log_->StuckReports(), ElementsAre(HasSubstr("job 4 attempt 1")));
}

// A shutdown that comes while the loop waits for an ended attempt to stop
// (up to stop_timeout, minutes) is not held up by that wait, and starts no
// attempt after it.
TEST_F(JobAgentTest, LeavingWhileAnAttemptIsStoppingStartsNoOther) {
  agent_->Shutdown();
  JobAgent agent(JobAgentOptions{.task = {"worker", 1},
                                 .job_control = coordinator_,
                                 .make_runner =
                                     [log = log_](RunnerOptions options) {
                                       return std::make_unique<FakeRunner>(
                                           std::move(options), log);
                                     },
                                 .cache_dir = cache_,
                                 .stop_timeout = absl::Hours(1),
                                 .leave_timeout = absl::Milliseconds(200)});
  agent.Start();
  log_->SetStuck(true);
  coordinator_->Assign("4", 1);
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(1); }, kWait));
  coordinator_->Assign("4", 2);
  // The loop has aborted attempt 1 and waits for it to stop.
  ASSERT_TRUE(WaitUntil([&] { return !log_->Aborted(1).ok(); }, kWait));

  const absl::Time start = absl::Now();
  agent.Leave();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_FALSE(log_->Started(2));
  EXPECT_FALSE(log_->Left(1));  // ended already: nothing to checkpoint for
  log_->SetStuck(false);  // so that the shutdown's own stop ends
  agent.Shutdown();
  EXPECT_TRUE(log_->Destroyed(1));
  EXPECT_FALSE(log_->Started(2));
}

TEST_F(JobAgentTest, AnUnreachableCoordinatorLeavesTheJobRunning) {
  coordinator_->Assign("4", 1);
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(1); }, kWait));
  coordinator_->FailSyncs(absl::UnavailableError("connection refused"));
  const int before = coordinator_->syncs();
  // Several failed syncs later (at the last interval the coordinator gave).
  ASSERT_TRUE(
      WaitUntil([&] { return coordinator_->syncs() >= before + 5; }, kWait));
  EXPECT_OK(log_->Aborted(1));
  EXPECT_FALSE(log_->Destroyed(1));
}

TEST_F(JobAgentTest, FetchedLibrariesAreCheckedAndCachedByDigest) {
  coordinator_->Assign("4", 1);
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(1); }, kWait));
  LibraryFetcher fetch;
  {
    absl::MutexLock lock(&log_->mu);
    fetch = log_->last_options.fetch_library;
  }
  ASSERT_NE(fetch, nullptr);
  EXPECT_THAT(fetch("not-a-digest"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bad library digest")));

  const std::string library =
      "\x7f"
      "ELF step library";
  const std::string digest = Sha256Hex(library);
  coordinator_->Serve("something else");
  EXPECT_THAT(fetch(digest), StatusIs(absl::StatusCode::kDataLoss,
                                      HasSubstr("does not match its digest")));

  coordinator_->Serve(library);
  const std::string path = absl::StrCat(cache_, "/", digest, ".so");
  EXPECT_THAT(fetch(digest), IsOkAndHolds(path));
  EXPECT_THAT(ReadFile(path), IsOkAndHolds(library));
  const int fetches = coordinator_->fetches();
  EXPECT_THAT(fetch(digest), IsOkAndHolds(path));
  EXPECT_EQ(coordinator_->fetches(), fetches);  // from the cache

  // A cached copy that no longer hashes to its digest is fetched again.
  ASSERT_TRUE(WriteFileAtomically(path,
                                  "\x7f"
                                  "ELF another library")
                  .ok());
  EXPECT_THAT(fetch(digest), IsOkAndHolds(path));
  EXPECT_EQ(coordinator_->fetches(), fetches + 1);
  EXPECT_THAT(ReadFile(path), IsOkAndHolds(library));
}

TEST_F(JobAgentTest, CheckpointCopiesOfEndedJobsAreRemoved) {
  namespace fs = std::filesystem;
  const std::string ended = copies_ + "/3-00000000000000aa";
  const std::string running = copies_ + "/4-00000000000000bb";
  // Another cluster's agent may share the directory: not this agent's.
  const std::string others = copies_ + "/3-00000000000000cc";
  for (const std::string& dir : {ended, running, others}) {
    ASSERT_OK(MakeDirectories(dir));
    ASSERT_OK(WriteFileAtomically(dir + "/ckpt-10.data", "0123456789"));
  }
  coordinator_->Assign("3", 1, "", "00000000000000aa");
  coordinator_->SetNode(1);
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(1); }, kWait));
  coordinator_->Assign("4", 2, "", "00000000000000bb");
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(2); }, kWait));
  // A coordinator that does not list unended jobs: nothing is removed.
  const int syncs = coordinator_->syncs();
  ASSERT_TRUE(
      WaitUntil([&] { return coordinator_->syncs() >= syncs + 5; }, kWait));
  EXPECT_TRUE(fs::exists(ended));

  // Job 3 has ended. The running job's copy stays even while the list lags
  // behind the assignment.
  coordinator_->ListUnended({"5-00000000000000dd"});
  ASSERT_TRUE(WaitUntil([&] { return !fs::exists(ended); }, kWait));
  EXPECT_TRUE(fs::exists(running));
  EXPECT_TRUE(fs::exists(others));

  // Job 4 ends.
  coordinator_->Unassign();
  ASSERT_TRUE(WaitUntil([&] { return !fs::exists(running); }, kWait));
  EXPECT_TRUE(fs::exists(others));
}

TEST_F(JobAgentTest, ClaimedCopiesOfJobsThatEndedWhileTheAgentWasDownGo) {
  namespace fs = std::filesystem;
  // Left by this agent before it restarted: job 3 has ended since, job 5
  // has not.
  const std::string ended = copies_ + "/3-00000000000000aa";
  const std::string unended = copies_ + "/5-00000000000000dd";
  // Another cluster's agent shares the directory.
  const std::string others = copies_ + "/3-00000000000000cc";
  // Left by an agent that did not claim its copies.
  const std::string unclaimed = copies_ + "/6-00000000000000ee";
  ASSERT_OK(ClaimCheckpointCopy(ended, "cluster-a"));
  ASSERT_OK(ClaimCheckpointCopy(unended, "cluster-a"));
  ASSERT_OK(ClaimCheckpointCopy(others, "cluster-b"));
  ASSERT_OK(MakeDirectories(unclaimed));
  for (const std::string& dir : {ended, unended, others, unclaimed}) {
    ASSERT_OK(WriteFileAtomically(dir + "/ckpt-10.data", "0123456789"));
  }
  EXPECT_EQ(
      ClaimedCheckpointCopies(copies_, "cluster-a"),
      (std::map<std::string, std::string>{{"3-00000000000000aa", ended},
                                          {"5-00000000000000dd", unended}}));

  // The agent's coordinator serves cluster-a.
  coordinator_->SetClusterUid("cluster-a");
  coordinator_->ListUnended({"5-00000000000000dd"});
  ASSERT_TRUE(WaitUntil([&] { return !fs::exists(ended); }, kWait));
  EXPECT_TRUE(fs::exists(unended));
  EXPECT_TRUE(fs::exists(others));
  EXPECT_TRUE(fs::exists(unclaimed));

  // A job it runs now is claimed for cluster-a too.
  coordinator_->Assign("7", 1, "", "00000000000000ff");
  coordinator_->SetNode(1);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return ClaimedCheckpointCopies(copies_, "cluster-a")
            .contains("7-00000000000000ff");
      },
      kWait));

  // Jobs 5 and 7 end.
  coordinator_->Unassign();
  coordinator_->ListUnended({});
  ASSERT_TRUE(WaitUntil(
      [&] { return ClaimedCheckpointCopies(copies_, "cluster-a").empty(); },
      kWait));
  EXPECT_FALSE(fs::exists(unended));
  EXPECT_TRUE(fs::exists(others));
  EXPECT_TRUE(fs::exists(unclaimed));
}

TEST_F(JobAgentTest, CachedLibrariesUnusedForADayAreRemoved) {
  namespace fs = std::filesystem;
  const std::string cache = cache_ + "/another-cache";
  const std::string stale = LibraryPath(cache, Sha256Hex("stale"));
  const std::string running = LibraryPath(cache, Sha256Hex("running"));
  const std::string recent = LibraryPath(cache, Sha256Hex("recent"));
  const std::string other = cache + "/notes.txt";
  for (const std::string& path : {stale, running, recent, other}) {
    ASSERT_OK(MakeDirectories(cache));
    ASSERT_OK(WriteFileAtomically(path, "bytes"));
  }
  const timespec two_days_ago = absl::ToTimespec(absl::Now() - absl::Hours(48));
  const timespec times[2] = {two_days_ago, two_days_ago};
  for (const std::string& path : {stale, running, other}) {
    ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  }
  coordinator_->Assign("4", 1);
  coordinator_->SetLibrary(Sha256Hex("running"));
  ASSERT_TRUE(WaitUntil([&] { return log_->Started(1); }, kWait));
  // An agent that starts with this cache: it looks at once.
  JobAgent agent(JobAgentOptions{.task = {"worker", 2},
                                 .job_control = coordinator_,
                                 .make_runner =
                                     [log = log_](RunnerOptions options) {
                                       return std::make_unique<FakeRunner>(
                                           std::move(options), log);
                                     },
                                 .cache_dir = cache});
  agent.Start();
  ASSERT_TRUE(WaitUntil([&] { return !fs::exists(stale); }, kWait));
  EXPECT_TRUE(fs::exists(running));  // the running job's
  EXPECT_TRUE(fs::exists(recent));
  EXPECT_TRUE(fs::exists(other));
  agent.Shutdown();
}

}  // namespace
}  // namespace cohort::agent
