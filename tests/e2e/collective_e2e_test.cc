// Collectives across rank processes over gRPC, with the real coordinator's
// store for rendezvous: correctness, a rank killed mid-all-reduce,
// mismatched calls, and buffers lent to a peer that stopped reading.

#include <signal.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;

// A coordinator that only serves the store: no tasks to launch.
absl::StatusOr<std::unique_ptr<CoordinatorProcess>> StartStore(
    const ScratchDir& dir) {
  const std::string spec = dir.Write(
      "store.json", absl::StrCat(R"({"cluster": {"worker": ["127.0.0.1:)",
                                 *PickUnusedPort(), R"("]}})"));
  return CoordinatorProcess::Start(
      dir, {absl::StrCat("--cluster_spec=", spec), "--launch=none"});
}

struct Rank {
  Subprocess process;
  std::string output_file;
  std::string Output() const { return ReadFile(output_file).value_or(""); }
};

std::vector<Rank> StartRanks(const ScratchDir& dir, const std::string& store,
                             const std::string& group, int size,
                             const std::vector<std::string>& flags) {
  std::vector<Rank> ranks;
  for (int r = 0; r < size; ++r) {
    std::vector<std::string> argv = {
        TestBinary("collective_rank"), absl::StrCat("--store=", store),
        absl::StrCat("--group=", group), absl::StrCat("--rank=", r),
        absl::StrCat("--size=", size)};
    argv.insert(argv.end(), flags.begin(), flags.end());
    const std::string out =
        absl::StrCat(dir.path(), "/", group, "-rank", r, ".log");
    absl::StatusOr<Subprocess> process =
        Subprocess::Spawn({.argv = argv, .output_file = out});
    EXPECT_TRUE(process.ok()) << process.status();
    if (process.ok()) ranks.push_back({*std::move(process), out});
  }
  return ranks;
}

void StopAll(std::vector<Rank>& ranks) {
  for (Rank& rank : ranks) rank.process.Stop(absl::Seconds(2));
}

struct Setup {
  int ranks;
  bool shared_memory;  // else every byte goes over gRPC
};

class CollectiveE2eTest : public ::testing::TestWithParam<Setup> {};

TEST_P(CollectiveE2eTest, EveryCollectiveMatchesTheReference) {
  const int size = GetParam().ranks;
  ScratchDir dir;
  auto store = StartStore(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<Rank> ranks =
      StartRanks(dir, (*store)->address(), "check", size,
                 {"--mode=check",
                  absl::StrCat("--shared_memory=",
                               GetParam().shared_memory ? "true" : "false")});
  ASSERT_EQ(ranks.size(), size);
  for (Rank& rank : ranks) {
    std::optional<ExitStatus> exit = rank.process.Wait(absl::Seconds(100));
    ASSERT_TRUE(exit.has_value()) << "rank still running";
    EXPECT_TRUE(exit->exited() && exit->exit_code() == 0) << rank.Output();
    EXPECT_THAT(rank.Output(), HasSubstr("OK rank"));
  }
  StopAll(ranks);
}

INSTANTIATE_TEST_SUITE_P(Setups, CollectiveE2eTest,
                         ::testing::Values(Setup{2, true}, Setup{4, true},
                                           Setup{2, false}, Setup{4, false}));

// Two ranks on one host, as two users (in one IPC namespace): rank 1 may
// not open the ring rank 0 made for it, so those bytes go over gRPC, and
// every collective is still right.
TEST(CollectiveSharedMemoryE2eTest, ARingOneRankMayNotOpenFallsBackToGrpc) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to run a rank as nobody";
  const std::vector<std::string> as_nobody = {
      "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  std::vector<std::string> probe = as_nobody;
  probe.push_back(TestBinary("collective_rank"));
  probe.push_back("--help");
  if (CommandResult can = RunCommand(probe); can.exit_code != 0) {
    GTEST_SKIP() << "cannot run collective_rank as nobody: " << can.output;
  }
  ScratchDir dir;
  auto store = StartStore(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<Rank> ranks;
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> argv = {
        TestBinary("collective_rank"),
        absl::StrCat("--store=", (*store)->address()),
        "--group=users",
        absl::StrCat("--rank=", r),
        "--size=2",
        "--mode=check"};
    if (r == 1) argv.insert(argv.begin(), as_nobody.begin(), as_nobody.end());
    const std::string out = absl::StrCat(dir.path(), "/users-rank", r, ".log");
    absl::StatusOr<Subprocess> process =
        Subprocess::Spawn({.argv = argv, .output_file = out});
    ASSERT_TRUE(process.ok()) << process.status();
    ranks.push_back({*std::move(process), out});
  }
  for (Rank& rank : ranks) {
    const std::optional<ExitStatus> exit =
        rank.process.Wait(absl::Seconds(100));
    ASSERT_TRUE(exit.has_value()) << "rank still running\n" << rank.Output();
    EXPECT_TRUE(exit->exited() && exit->exit_code() == 0) << rank.Output();
  }
  EXPECT_THAT(ranks[1].Output(),
              HasSubstr("cannot open the shared-memory ring to rank 0"));
}

class MessageSizeE2eTest : public ::testing::TestWithParam<int> {};

// Every byte over gRPC, in messages on both sides of the sizes where
// payloads start to be lent: each all-reduce ends, with what it lent handed
// back, long before its 20 s timeout. A lent message that gRPC kept would
// hold its collective to that timeout and fail it.
TEST_P(MessageSizeE2eTest, EveryAllReduceEndsWithItsLentBuffersBack) {
  const int size = GetParam();
  ScratchDir dir;
  auto store = StartStore(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<Rank> ranks =
      StartRanks(dir, (*store)->address(), "sizes", size,
                 {"--mode=sizes", "--shared_memory=false", "--timeout=20s"});
  ASSERT_EQ(ranks.size(), size);
  for (Rank& rank : ranks) {
    std::optional<ExitStatus> exit = rank.process.Wait(absl::Seconds(100));
    ASSERT_TRUE(exit.has_value()) << "rank still running";
    EXPECT_THAT(rank.Output(), HasSubstr("OK rank"));
  }
  StopAll(ranks);
}

INSTANTIATE_TEST_SUITE_P(Ranks, MessageSizeE2eTest, ::testing::Values(2, 3, 4));

class KilledRankTest : public ::testing::TestWithParam<bool> {};

// A dead peer is seen from its closed connection, not waited out: each
// operation's timeout is 60 s, and both survivors end well within a quarter
// of it (about a second on an idle machine).
TEST_P(KilledRankTest, IsNamedByEverySurvivorLongBeforeTheTimeout) {
  ScratchDir dir;
  auto store = StartStore(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  const int size = 3;
  // 64 MiB all-reduces, back to back, until something breaks.
  std::vector<Rank> ranks = StartRanks(
      dir, (*store)->address(), "kill", size,
      {"--mode=loop", absl::StrCat("--count=", (64 << 20) / 4),
       absl::StrCat("--shared_memory=", GetParam() ? "true" : "false"),
       "--iterations=1000000",
       absl::StrCat("--progress_file=", dir.path(), "/progress")});
  ASSERT_EQ(ranks.size(), size);
  // Kill rank 1 once the group is in the middle of its work.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return std::atoi(
                   ReadFile(dir.path() + "/progress").value_or("0").c_str()) >=
               1;
      },
      absl::Seconds(60)))
      << ranks[0].Output();
  ranks[1].process.Signal(SIGKILL);
  const absl::Time deadline = absl::Now() + absl::Seconds(15);
  for (int r : {0, 2}) {
    std::optional<ExitStatus> exit =
        ranks[r].process.Wait(deadline - absl::Now());
    ASSERT_TRUE(exit.has_value())
        << "rank " << r << " hangs after its peer died";
    EXPECT_EQ(exit->exit_code(), 1);
    const std::string output = ranks[r].Output();
    EXPECT_THAT(output, HasSubstr("ERROR UNAVAILABLE"));
    EXPECT_THAT(output, HasSubstr("rank 1 (127.0.0.1:"));
    EXPECT_THAT(output, HasSubstr("is gone"));
  }
  StopAll(ranks);
}

// Shared memory between ring neighbours, and gRPC only.
INSTANTIATE_TEST_SUITE_P(Transports, KilledRankTest, ::testing::Bool());

TEST(CollectiveFailureE2eTest, MismatchedCollectivesFailOnBothRanksNamingBoth) {
  ScratchDir dir;
  auto store = StartStore(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<Rank> ranks = StartRanks(dir, (*store)->address(), "mismatch", 2,
                                       {"--mode=mismatch", "--timeout=20s"});
  ASSERT_EQ(ranks.size(), 2);
  for (Rank& rank : ranks) {
    std::optional<ExitStatus> exit = rank.process.Wait(absl::Seconds(15));
    ASSERT_TRUE(exit.has_value());
    const std::string output = rank.Output();
    EXPECT_THAT(output, HasSubstr("ERROR FAILED_PRECONDITION"));
    EXPECT_THAT(output, HasSubstr("allreduce float32 sum 1000"));
    EXPECT_THAT(output, HasSubstr("allgather float32 10"));
  }
  StopAll(ranks);
}

TEST(CollectiveFailureE2eTest,
     ARankThatNeverJoinsIsNamedWhileAwaitedAndAtTheEnd) {
  ScratchDir dir;
  auto store = StartStore(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  // Rank 0 of 2 alone: rank 1 was never started (a wrong spec, a host down).
  const std::string out = dir.path() + "/alone.log";
  absl::StatusOr<Subprocess> rank = Subprocess::Spawn(
      {.argv = {TestBinary("collective_rank"),
                absl::StrCat("--store=", (*store)->address()), "--group=alone",
                // The first wait (10 s) ends well inside this, even on a
                // busy machine, and logs whom it waits for.
                "--rank=0", "--size=2", "--timeout=15s"},
       .output_file = out});
  ASSERT_TRUE(rank.ok()) << rank.status();
  std::optional<ExitStatus> exit = rank->Wait(absl::Seconds(60));
  ASSERT_TRUE(exit.has_value()) << "a lone rank still waits";
  EXPECT_TRUE(exit->exited() && exit->exit_code() == 1);
  const std::string output = ReadFile(out).value_or("");
  EXPECT_THAT(output, HasSubstr("rank 0 of group \"alone\": waiting for "
                                "rank 1 of 2 to join"));
  EXPECT_THAT(output, HasSubstr("ERROR DEADLINE_EXCEEDED: rank 1 of 2 in group "
                                "\"alone\" did not join within 15s"));
  EXPECT_THAT(output, HasSubstr("store key \"alone/address/1\" was not set"));
}

// Rank 0 lends to a rank the test has stopped (SIGSTOP: no FIN, as from a
// host that lost power), then waits for the buffer with `flags`; returns
// rank 0's exit and output, or nullopt when it did not exit in 25 s.
std::optional<std::pair<ExitStatus, std::string>> LendToAStoppedPeer(
    const std::vector<std::string>& flags) {
  ScratchDir dir;
  auto store = StartStore(dir);
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return std::nullopt;
  const std::string go = dir.path() + "/go";
  std::vector<std::string> all = {"--mode=stall", "--shared_memory=false",
                                  "--timeout=60s",
                                  absl::StrCat("--go_file=", go)};
  all.insert(all.end(), flags.begin(), flags.end());
  std::vector<Rank> ranks =
      StartRanks(dir, (*store)->address(), "stall", 2, all);
  // A stopped rank never exits by itself: kill both, however the test ends.
  struct KillOnExit {
    std::vector<Rank>& ranks;
    ~KillOnExit() {
      for (Rank& rank : ranks) rank.process.Signal(SIGKILL);
      StopAll(ranks);
    }
  } kill_on_exit{ranks};
  EXPECT_EQ(ranks.size(), 2);
  if (ranks.size() != 2) return std::nullopt;
  const bool ready = WaitUntil(
      [&] { return ranks[0].Output().find("READY") != std::string::npos; },
      absl::Seconds(60));
  EXPECT_TRUE(ready) << ranks[0].Output();
  if (!ready) return std::nullopt;
  ranks[1].process.Signal(SIGSTOP);
  EXPECT_TRUE(WriteFileAtomically(go, "go").ok());
  std::optional<ExitStatus> exit = ranks[0].process.Wait(absl::Seconds(25));
  if (!exit.has_value()) return std::nullopt;
  return std::make_pair(*exit, ranks[0].Output());
}

// The group's abort (a peer declared dead) ends the wait for lent buffers:
// a survivor does not wait out the operation's deadline (60 s here).
TEST(CollectiveFailureE2eTest, AnAbortEndsTheWaitForLentBuffers) {
  const auto ended = LendToAStoppedPeer({"--abort_after=1s"});
  ASSERT_TRUE(ended.has_value())
      << "rank 0 waits for its lent buffer past the group's abort";
  EXPECT_TRUE(ended->first.exited() && ended->first.exit_code() == 1)
      << ended->second;
  EXPECT_THAT(ended->second,
              HasSubstr("could not finish sending to rank 1 (127.0.0.1:"));
}

TEST(CollectiveFailureE2eTest, LentBuffersComeBackFromAStoppedPeer) {
  // The reclaim gives up after 2 s; closing the stream and its connection
  // must free the buffer well within the 30 s after which the rank would
  // abort.
  const auto ended = LendToAStoppedPeer({});
  ASSERT_TRUE(ended.has_value()) << "rank 0 still waits on a stopped peer";
  EXPECT_TRUE(ended->first.exited() && ended->first.exit_code() == 1)
      << ended->second;
  EXPECT_THAT(ended->second, HasSubstr("ERROR DEADLINE_EXCEEDED"));
  EXPECT_THAT(ended->second,
              HasSubstr("could not finish sending to rank 1 (127.0.0.1:"));
}

}  // namespace
}  // namespace cohort::testing
