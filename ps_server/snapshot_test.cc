#include "ps_server/snapshot.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/synchronization/notification.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/ps_test_util.h"
#include "ps_server/snapshot_loop.h"
#include "ps_server/variable_store.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace cohort::ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

// A fresh directory under the temp dir, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string pattern = TempDirectory() + "/ps_snapshot_test.XXXXXX";
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Routes the default logger into a string for the test's duration.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string text() const { return stream_.str(); }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream stream_;
};

v1::PsSnapshot Snapshot(int64_t updates) {
  v1::PsSnapshot snapshot;
  snapshot.set_shard_id(0);
  snapshot.set_job_id("job");
  snapshot.set_job_sequence(1);
  snapshot.set_updates(updates);
  v1::PsSnapshotVariable* variable = snapshot.add_variables();
  variable->mutable_spec()->set_name("w");
  variable->mutable_spec()->add_shape(2);
  variable->mutable_spec()->set_dtype(v1::PS_INT32);
  variable->set_value(std::string(8, char(updates)));
  variable->set_updates(updates);
  return snapshot;
}

absl::Status AcceptAll(const v1::PsSnapshot&) { return absl::OkStatus(); }

void FlipByte(const std::string& path, size_t offset) {
  std::string contents = *ReadFile(path);
  contents[offset] ^= 0x01;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
}

TEST(SnapshotFileTest, EncodeDecodeRoundTrip) {
  const v1::PsSnapshot snapshot = Snapshot(42);
  absl::StatusOr<std::string> file = EncodeSnapshotFile(snapshot);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->substr(0, 8), "COHORTPS");
  absl::StatusOr<v1::PsSnapshot> decoded = DecodeSnapshotFile(*file);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->SerializeAsString(), snapshot.SerializeAsString());
}

TEST(SnapshotFileTest, DamageIsDetectedAndNamed) {
  const std::string file = *EncodeSnapshotFile(Snapshot(42));
  auto reason = [](absl::string_view contents) {
    absl::StatusOr<v1::PsSnapshot> decoded = DecodeSnapshotFile(contents);
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
    return std::string(decoded.status().message());
  };
  EXPECT_THAT(reason(file.substr(0, 10)), HasSubstr("header"));
  std::string bad_magic = file;
  bad_magic[0] = 'X';
  EXPECT_THAT(reason(bad_magic), HasSubstr("magic"));
  std::string bad_version = file;
  bad_version[8] = 9;
  EXPECT_THAT(reason(bad_version), HasSubstr("format version 9"));
  EXPECT_THAT(reason(file.substr(0, file.size() - 1)), HasSubstr("payload"));
  std::string flipped = file;
  flipped[flipped.size() - 3] ^= 0x10;
  EXPECT_THAT(reason(flipped), HasSubstr("SHA-256"));
}

TEST(SnapshotDirTest, WritesNumberedFilesAndKeepsTheNewestThree) {
  TempDir temp;
  SnapshotDir dir(temp.path() + "/ps/0");
  for (int64_t updates : {1, 5, 12, 100}) {
    absl::StatusOr<std::string> path = dir.Write(Snapshot(updates));
    ASSERT_TRUE(path.ok()) << path.status();
  }
  const std::string base = temp.path() + "/ps/0/snapshot-";
  EXPECT_THAT(*dir.List(), ElementsAre(base + "00000000000000000100.bin",
                                       base + "00000000000000000012.bin",
                                       base + "00000000000000000005.bin"));
}

TEST(SnapshotDirTest, RestoreFallsBackPastACorruptNewestFile) {
  TempDir temp;
  SnapshotDir dir(temp.path());
  ASSERT_TRUE(dir.Write(Snapshot(10)).ok());
  const std::string newest = *dir.Write(Snapshot(20));
  FlipByte(newest, 100);

  CapturedLog log;
  absl::StatusOr<RestoredSnapshot> restored = dir.Restore(AcceptAll);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(restored->snapshot.has_value());
  EXPECT_EQ(restored->snapshot->updates(), 10);
  EXPECT_EQ(restored->path, temp.path() + "/snapshot-00000000000000000010.bin");
  ASSERT_THAT(restored->skipped, SizeIs(1));
  EXPECT_EQ(restored->skipped[0].path, newest);
  EXPECT_THAT(restored->skipped[0].reason, HasSubstr("SHA-256"));
  EXPECT_THAT(log.text(), HasSubstr("[warning]"));
  EXPECT_THAT(log.text(), HasSubstr(newest));
  EXPECT_THAT(log.text(), HasSubstr("SHA-256"));

  // The corrupt file is set aside, so that later snapshots number past it.
  EXPECT_TRUE(std::filesystem::exists(newest + ".corrupt"));
  EXPECT_THAT(*dir.List(), SizeIs(1));
}

TEST(SnapshotDirTest, AFileLargerThanAnySnapshotIsSetAsideUnread) {
  TempDir temp;
  SnapshotDir dir(temp.path());
  ASSERT_TRUE(dir.Write(Snapshot(10)).ok());
  // Sparse: 3 GiB that take no disk, and would take memory if read.
  const std::string huge = temp.path() + "/snapshot-00000000000000000020.bin";
  { std::ofstream create(huge); }
  std::filesystem::resize_file(huge, uintmax_t{3} << 30);

  absl::StatusOr<RestoredSnapshot> restored = dir.Restore(AcceptAll);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(restored->snapshot.has_value());
  EXPECT_EQ(restored->snapshot->updates(), 10);
  ASSERT_THAT(restored->skipped, SizeIs(1));
  EXPECT_THAT(restored->skipped[0].reason,
              HasSubstr("the file has 3221225472 bytes, more than any "
                        "snapshot"));
  EXPECT_TRUE(std::filesystem::exists(huge + ".corrupt"));
}

TEST(SnapshotDirTest, ANewestFileThatCannotBeReadIsKeptAndTheRestoreFails) {
  TempDir temp;
  SnapshotDir dir(temp.path());
  ASSERT_TRUE(dir.Write(Snapshot(10)).ok());
  // Where the newest snapshot should be, something no read gets bytes from
  // (tests run as root, so permissions would not stop one).
  const std::string newest = temp.path() + "/snapshot-00000000000000000020.bin";
  std::filesystem::create_directory(newest);

  absl::StatusOr<RestoredSnapshot> restored = dir.Restore(AcceptAll);
  EXPECT_FALSE(restored.ok());
  EXPECT_THAT(std::string(restored.status().message()),
              HasSubstr(absl::StrCat("cannot restore from ", newest)));
  // Not set aside, not passed over for the older one: the newest state may
  // be there, once it can be read.
  EXPECT_TRUE(std::filesystem::exists(newest));
  EXPECT_FALSE(std::filesystem::exists(newest + ".corrupt"));
}

TEST(SnapshotDirTest, RestoreOfNothingIsFresh) {
  TempDir temp;
  SnapshotDir missing(temp.path() + "/never-made");
  absl::StatusOr<RestoredSnapshot> restored = missing.Restore(AcceptAll);
  ASSERT_TRUE(restored.ok());
  EXPECT_FALSE(restored->snapshot.has_value());

  SnapshotDir all_bad(temp.path());
  FlipByte(*all_bad.Write(Snapshot(3)), 0);
  restored = all_bad.Restore(AcceptAll);
  ASSERT_TRUE(restored.ok());
  EXPECT_FALSE(restored->snapshot.has_value());
  EXPECT_THAT(restored->skipped, SizeIs(1));
}

TEST(SnapshotDirTest, RefusalsOtherThanDataLossEndTheRestore) {
  TempDir temp;
  SnapshotDir dir(temp.path());
  ASSERT_TRUE(dir.Write(Snapshot(3)).ok());
  absl::StatusOr<RestoredSnapshot> restored =
      dir.Restore([](const v1::PsSnapshot&) {
        return absl::FailedPreconditionError("another shard's");
      });
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(*dir.List(), SizeIs(1));  // left in place
}

TEST(SnapshotDirTest, ARestoredStoreMatchesTheSavedOne) {
  TempDir temp;
  SnapshotDir dir(temp.path());
  VariableStore store;
  google::protobuf::RepeatedPtrField<v1::PsVariableSpec> specs;
  v1::PsVariableSpec* w = specs.Add();
  w->set_name("w");
  w->add_shape(3);
  w->set_dtype(v1::PS_FLOAT32);
  w->mutable_optimizer()->set_kind(v1::PsOptimizer::ADAGRAD);
  w->mutable_optimizer()->set_learning_rate(0.1);
  ASSERT_TRUE(store.Create("job", 4, specs).ok());
  ASSERT_TRUE(
      test_util::Push(store, "job", "", "w", std::string(12, '\1')).ok());
  ASSERT_TRUE(dir.Write(store.Capture(nullptr)).ok());

  VariableStore restored;
  absl::StatusOr<RestoredSnapshot> result =
      dir.Restore([&](const v1::PsSnapshot& snapshot) {
        return restored.Restore(snapshot);
      });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(restored.restored_updates(), 1);
  EXPECT_EQ(restored.Capture(nullptr).variables(0).SerializeAsString(),
            store.Capture(nullptr).variables(0).SerializeAsString());
}

class SnapshotLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    google::protobuf::RepeatedPtrField<v1::PsVariableSpec> specs;
    v1::PsVariableSpec* w = specs.Add();
    w->set_name("w");
    w->add_shape(1);
    w->set_dtype(v1::PS_INT32);
    ASSERT_TRUE(store_.Create("job", 1, specs).ok());
  }

  absl::StatusOr<SnapshotRecord> SnapshotNow(SnapshotLoop& loop) {
    absl::Notification done;
    absl::StatusOr<SnapshotRecord> result;
    loop.SnapshotNow([&](absl::StatusOr<SnapshotRecord> record) {
      result = std::move(record);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
    return result;
  }

  // Waits, bounded, for the loop to have written a snapshot with `updates`.
  bool WaitForSnapshot(const SnapshotLoop& loop, int64_t updates) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      if (auto last = loop.last(); last && last->updates >= updates) {
        return true;
      }
      absl::Notification tick;
      tick.WaitForNotificationWithTimeout(absl::Milliseconds(10));
    }
    return false;
  }

  TempDir temp_;
  SnapshotDir dir_{temp_.path()};
  VariableStore store_;
};

TEST_F(SnapshotLoopTest, WritesAfterEnoughUpdates) {
  // A long interval: only the update count can trigger.
  SnapshotLoop loop(&store_, &dir_,
                    {.interval = absl::Hours(1), .every_updates = 3});
  loop.Start(std::nullopt);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        test_util::Push(store_, "job", "", "w", std::string(4, char(i))).ok());
    loop.NoteUpdates();
  }
  EXPECT_TRUE(WaitForSnapshot(loop, 3));
  EXPECT_THAT(*dir_.List(), SizeIs(1));
  loop.Shutdown();
}

TEST_F(SnapshotLoopTest, WhenDurableWaitsForASnapshotHoldingTheUpdates) {
  SnapshotLoop loop(&store_, &dir_,
                    {.interval = absl::Hours(1), .every_updates = 100});
  loop.Start(std::nullopt);
  bool at_once = false;
  loop.WhenDurable(0, [&] { at_once = true; });
  EXPECT_TRUE(at_once);
  // Two updates, far below every_updates: the wait itself makes the loop
  // write, and the callback sees them on disk.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(
        test_util::Push(store_, "job", "", "w", std::string(4, char(i))).ok());
  }
  absl::Notification durable;
  int64_t on_disk = -1;
  loop.WhenDurable(2, [&] {
    on_disk = loop.last().has_value() ? loop.last()->updates : -1;
    durable.Notify();
  });
  ASSERT_TRUE(durable.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_GE(on_disk, 2);
  loop.Shutdown();
}

TEST_F(SnapshotLoopTest, AWaitEndsAtMaxWaitWhileAWriteIsStillUnderWay) {
  // Regression: deadlines were checked only after a write returned, so a
  // push on a slow disk waited for that write and the next.
  absl::Notification writing, release;
  SnapshotLoop loop(
      &store_, &dir_,
      {.interval = absl::Hours(1),
       .every_updates = 100,
       .max_wait = absl::Milliseconds(100),
       .before_write = [&] {
         if (!writing.HasBeenNotified()) writing.Notify();
         release.WaitForNotificationWithTimeout(absl::Seconds(30));
       }});
  loop.Start(std::nullopt);
  ASSERT_TRUE(
      test_util::Push(store_, "job", "", "w", std::string(4, 'a')).ok());
  absl::Notification acknowledged;
  loop.WhenDurable(1, [&] { acknowledged.Notify(); });
  ASSERT_TRUE(writing.WaitForNotificationWithTimeout(absl::Seconds(10)));
  // The write is held up until the wait has ended.
  EXPECT_TRUE(acknowledged.WaitForNotificationWithTimeout(absl::Seconds(10)));
  release.Notify();
  loop.Shutdown();
  EXPECT_EQ(loop.last()->updates, 1);
}

TEST_F(SnapshotLoopTest, WhileWritesFailPushesAreAcknowledgedAtOnce) {
  // Regression: each push waited for the next attempt, a second or more
  // away, and for the capture of the whole shard that it then failed.
  const std::string blocked = temp_.path() + "/not-a-dir";
  ASSERT_TRUE(WriteFileAtomically(blocked, "a file").ok());
  SnapshotDir dir(blocked + "/snapshots");
  SnapshotLoop loop(&store_, &dir,
                    {.interval = absl::Hours(1),
                     .every_updates = 100,
                     .max_wait = absl::Hours(1),
                     .retry_after_failure = absl::Hours(1)});
  loop.Start(std::nullopt);
  ASSERT_TRUE(
      test_util::Push(store_, "job", "", "w", std::string(4, 'a')).ok());
  absl::Notification failed;
  loop.WhenDurable(1, [&] { failed.Notify(); });
  ASSERT_TRUE(failed.WaitForNotificationWithTimeout(absl::Seconds(30)));

  ASSERT_TRUE(
      test_util::Push(store_, "job", "", "w", std::string(4, 'b')).ok());
  bool at_once = false;
  loop.WhenDurable(2, [&] { at_once = true; });
  EXPECT_TRUE(at_once);

  // The disk mended, a request writes at once, and waits are back.
  ASSERT_TRUE(std::filesystem::remove(blocked));
  absl::StatusOr<SnapshotRecord> written = SnapshotNow(loop);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->updates, 2);
  ASSERT_TRUE(
      test_util::Push(store_, "job", "", "w", std::string(4, 'c')).ok());
  absl::Notification durable;
  int64_t on_disk = -1;
  loop.WhenDurable(3, [&] {
    on_disk = loop.last().has_value() ? loop.last()->updates : -1;
    durable.Notify();
  });
  ASSERT_TRUE(durable.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(on_disk, 3);
  loop.Shutdown();
}

TEST_F(SnapshotLoopTest, APushCountedAfterASnapshotMakesTheNextOneDue) {
  // Regression: the count of a push whose variables a snapshot already held
  // changed nothing the loop checked, and a wait for it never ended.
  SnapshotLoop loop(&store_, &dir_,
                    {.interval = absl::Hours(1), .every_updates = 100});
  loop.Start(std::nullopt);
  ASSERT_TRUE(store_.Apply("job", "", "w", std::string(4, 'a')).ok());
  absl::StatusOr<SnapshotRecord> applied = SnapshotNow(loop);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->updates, 0);
  store_.CountPush();
  absl::StatusOr<SnapshotRecord> counted = SnapshotNow(loop);
  ASSERT_TRUE(counted.ok()) << counted.status();
  EXPECT_EQ(counted->updates, 1);
  loop.Shutdown();
}

TEST_F(SnapshotLoopTest, WritesOnTheIntervalOnlyWhenChanged) {
  SnapshotLoop loop(&store_, &dir_,
                    {.interval = absl::Milliseconds(20), .every_updates = 0});
  loop.Start(std::nullopt);
  ASSERT_TRUE(
      test_util::Push(store_, "job", "", "w", std::string(4, 'a')).ok());
  EXPECT_TRUE(WaitForSnapshot(loop, 1));
  const SnapshotRecord first = *loop.last();
  // Several intervals pass with no change: the same snapshot stays last.
  absl::Notification wait;
  wait.WaitForNotificationWithTimeout(absl::Milliseconds(100));
  EXPECT_EQ(loop.last()->unix_ms, first.unix_ms);
  loop.Shutdown();
}

TEST_F(SnapshotLoopTest, RequestsAndShutdown) {
  SnapshotLoop loop(&store_, &dir_,
                    {.interval = absl::Hours(1), .every_updates = 1000});
  loop.Start(std::nullopt);
  // Asked with no change and no snapshot yet: one is written anyway.
  absl::StatusOr<SnapshotRecord> record = SnapshotNow(loop);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->updates, 0);
  // Asked again unchanged: the same one.
  EXPECT_EQ(SnapshotNow(loop)->path, record->path);

  ASSERT_TRUE(
      test_util::Push(store_, "job", "", "w", std::string(4, 'a')).ok());
  loop.Shutdown();  // writes the change
  EXPECT_EQ(loop.last()->updates, 1);
  EXPECT_THAT(*dir_.List(), SizeIs(2));
  // After shutdown, requests are refused rather than left waiting.
  EXPECT_EQ(SnapshotNow(loop).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace cohort::ps
