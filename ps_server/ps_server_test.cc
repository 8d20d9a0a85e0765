#include "ps_server/ps_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "ps_server/ps_test_util.h"
#include "tests/testing/status_matchers.h"

namespace cohort::ps {
namespace {

using ::cohort::testing::StatusIs;
using ::testing::HasSubstr;

task::TaskConfig PsTask() {
  task::TaskConfig config;
  config.task = {"ps", 1};
  config.coordinator = "127.0.0.1:1";
  return config;
}

class PsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/ps_server_test_", getpid());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(PsServerTest, OptionsOutOfRangeNameTheirFlag) {
  EXPECT_THAT(
      PsServer::Create(PsTask(), {.service = {.max_chunk_bytes = 0}}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("--max_chunk_bytes must be in [1, ")));
  EXPECT_THAT(PsServer::Create(
                  PsTask(), {.snapshots = {.interval = absl::ZeroDuration()}})
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--snapshot_interval")));
}

TEST_F(PsServerTest, StartsFromTheNewestSnapshotInItsStateDir) {
  {
    VariableStore store({.shard_id = 1});
    google::protobuf::RepeatedPtrField<v1::PsVariableSpec> specs;
    *specs.Add() = test_util::Spec("w", {4, 2});
    ASSERT_TRUE(store.Create("job-9", 9, specs).ok());
    ASSERT_OK(MakeDirectories(dir_));
    int64_t generation = 0;
    ASSERT_TRUE(SnapshotDir(dir_).Write(store.Capture(&generation)).ok());
  }
  absl::StatusOr<std::unique_ptr<PsServer>> server =
      PsServer::Create(PsTask(), {.state_dir = dir_});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->restored().has_value());
  EXPECT_EQ((*server)->store().variable_bytes(), 4 * 2 * 4);
}

TEST_F(PsServerTest, WithoutAStateDirItStartsEmpty) {
  absl::StatusOr<std::unique_ptr<PsServer>> server =
      PsServer::Create(PsTask(), {});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_FALSE((*server)->restored().has_value());
  EXPECT_EQ((*server)->store().variable_bytes(), 0);
}

TEST_F(PsServerTest, AStateDirThatCannotBeADirectoryIsNamed) {
  ASSERT_OK(WriteFileAtomically(dir_, "a file"));
  EXPECT_THAT(
      PsServer::Create(PsTask(), {.state_dir = dir_ + "/shard"}).status(),
      ::testing::Property(&absl::Status::message,
                          HasSubstr("--state_dir " + dir_)));
  std::filesystem::remove(dir_);
}

TEST_F(PsServerTest, ASnapshottedShardRefusesMoreThanOneSnapshotHolds) {
  // Regression: a shard past protobuf's 2 GiB could never be snapshotted,
  // and every attempt copied it under the shard's lock.
  absl::StatusOr<std::unique_ptr<PsServer>> server =
      PsServer::Create(PsTask(), {.state_dir = dir_});
  ASSERT_TRUE(server.ok()) << server.status();
  // 2 GiB of float32: refused before anything is allocated.
  google::protobuf::RepeatedPtrField<v1::PsVariableSpec> specs;
  *specs.Add() = test_util::Spec("w", {int64_t{256} << 20});
  *specs.Add() = test_util::Spec("v", {int64_t{256} << 20});
  const absl::Status refused =
      (*server)->store().Create("job", 1, specs).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("what one snapshot holds"));
  EXPECT_THAT(refused.message(), HasSubstr("more ps tasks"));
}

}  // namespace
}  // namespace cohort::ps
