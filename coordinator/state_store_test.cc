#include "coordinator/state_store.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort::coordinator {
namespace {

using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const std::string dir =
      absl::StrCat(testing::TempDir(), "/state_store_", name);
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(StateStoreTest, EmptyDirHasNoState) {
  StateStore store(FreshDir("empty"));
  absl::StatusOr<std::optional<PersistedState>> loaded = store.Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(loaded->has_value());
}

TEST(StateStoreTest, SaveThenLoadRoundTrips) {
  StateStore store(FreshDir("roundtrip"));
  PersistedState state;
  state.incarnation = 3;
  state.cluster_uid = "0123456789abcdef0123456789abcdef";
  state.coordinator_address = "127.0.0.1:7070";
  state.cluster_spec_json = R"({"cluster":{"worker":["127.0.0.1:2001"]}})";
  state.tasks.push_back({.task = {"worker", 0},
                         .launched = true,
                         .pid = 1234,
                         .restart_count = 2});
  ASSERT_TRUE(store.Save(state).ok());
  absl::StatusOr<std::optional<PersistedState>> loaded = store.Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  const PersistedState& got = **loaded;
  EXPECT_EQ(got.incarnation, 3);
  EXPECT_EQ(got.cluster_uid, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(got.coordinator_address, "127.0.0.1:7070");
  EXPECT_THAT(got.cluster_spec_json, HasSubstr("127.0.0.1:2001"));
  ASSERT_EQ(got.tasks.size(), 1);
  EXPECT_EQ(got.tasks[0].task, (TaskId{"worker", 0}));
  EXPECT_EQ(got.tasks[0].pid, 1234);
  EXPECT_EQ(got.tasks[0].restart_count, 2);
  EXPECT_TRUE(got.tasks[0].launched);
}

TEST(StateStoreTest, AFileFromBeforeClusterUidsLoadsWithoutOne) {
  const std::string dir = FreshDir("before_uids");
  StateStore store(dir);
  ASSERT_TRUE(MakeDirectories(dir).ok());
  ASSERT_TRUE(WriteFileAtomically(store.path(),
                                  R"({"format": 1, "incarnation": 4,
                                      "coordinator_address": "x",
                                      "cluster_spec": {}, "tasks": []})")
                  .ok());
  absl::StatusOr<std::optional<PersistedState>> loaded = store.Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->incarnation, 4);
  EXPECT_EQ((*loaded)->cluster_uid, "");
}

TEST(StateStoreTest, CorruptFileIsAnErrorNamingIt) {
  const std::string dir = FreshDir("corrupt");
  StateStore store(dir);
  ASSERT_TRUE(MakeDirectories(dir).ok());
  for (const char* text : {"{not json", R"({"format": 1})", "[]",
                           R"({"format": 1, "incarnation": 1,
                               "coordinator_address": "x", "cluster_spec": {},
                               "tasks": [{"task": "worker"}]})",
                           R"({"format": 1, "incarnation": 1,
                               "coordinator_address": "x", "cluster_spec": {},
                               "tasks": [], "cluster_uid": 7})"}) {
    ASSERT_TRUE(WriteFileAtomically(store.path(), text).ok());
    absl::StatusOr<std::optional<PersistedState>> loaded = store.Load();
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss) << text;
    EXPECT_THAT(std::string(loaded.status().message()),
                HasSubstr(store.path()));
  }
}

}  // namespace
}  // namespace cohort::coordinator
