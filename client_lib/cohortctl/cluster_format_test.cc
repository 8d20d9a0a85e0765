#include "client_lib/cohortctl/cluster_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace cohort::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);

v1::ClusterState StateWithPs(bool snapshotted) {
  v1::ClusterState state;
  state.set_coordinator_address("127.0.0.1:7070");
  v1::TaskStatus* worker = state.add_tasks();
  worker->mutable_task()->set_type("worker");
  worker->set_state(v1::READY);
  v1::TaskStatus* ps = state.add_tasks();
  ps->mutable_task()->set_type("ps");
  ps->mutable_task()->set_index(1);
  ps->set_state(v1::READY);
  v1::PsInfo* info = ps->mutable_ps();
  info->set_shard_id(1);
  info->set_job_id("7");
  info->set_num_variables(12);
  info->set_variable_bytes(3 << 20);
  info->set_updates(1520);
  if (snapshotted) {
    info->set_last_snapshot_unix_ms(absl::ToUnixMillis(kNow) - 4200);
    info->set_last_snapshot_updates(1500);
    info->set_last_snapshot_path("/state/ps/1/snapshot-1500.bin");
  }
  v1::PsVariableInfo* variable = info->add_variables();
  variable->set_name("dense/kernel");
  variable->add_shape(784);
  variable->add_shape(128);
  variable->set_bytes(784 * 128 * 4);
  variable->set_updates(1520);
  return state;
}

TEST(ClusterFormatTest, PsShardsGetTheirOwnTable) {
  const std::string table = ClusterStateToTable(StateWithPs(true), kNow);
  EXPECT_THAT(table, HasSubstr("PS    SHARD  JOB  VARIABLES  BYTES   UPDATES  "
                               "LAST SNAPSHOT\n"));
  EXPECT_THAT(table, HasSubstr("ps:1  1      7    12         3.0MiB  1520     "
                               "4.2s ago (1500 updates)\n"));
  EXPECT_THAT(ClusterStateToTable(StateWithPs(false), kNow),
              HasSubstr("1520     -\n"));
  for (const auto& [bytes, shown] :
       std::vector<std::pair<int64_t, std::string>>{
           {528, "528B"}, {1536, "1.5KiB"}, {int64_t{5} << 30, "5.0GiB"}}) {
    v1::ClusterState state = StateWithPs(false);
    state.mutable_tasks(1)->mutable_ps()->set_variable_bytes(bytes);
    EXPECT_THAT(ClusterStateToTable(state, kNow),
                HasSubstr(absl::StrCat(" ", shown, " ")));
  }
}

TEST(ClusterFormatTest, AClockASecondOrMoreOffIsShown) {
  v1::ClusterState state = StateWithPs(false);
  state.mutable_tasks(0)->set_clock_offset_ms(-30012);
  state.mutable_tasks(1)->set_clock_offset_ms(420);  // within NTP's reach
  const std::string table = ClusterStateToTable(state, kNow);
  EXPECT_THAT(table, HasSubstr("clock -30.0s off"));
  EXPECT_THAT(table, Not(HasSubstr("clock +0.4s")));
}

TEST(ClusterFormatTest, ATaskOfAnotherVersionThanTheCoordinatorsIsShown) {
  v1::ClusterState state = StateWithPs(false);
  state.set_version("0.10.0");
  state.mutable_tasks(0)->set_version("0.9.0");
  state.mutable_tasks(1)->set_version("0.10.0");
  const std::string table = ClusterStateToTable(state, kNow);
  EXPECT_THAT(table, HasSubstr("version 0.9.0, not the coordinator's 0.10.0"));
  EXPECT_THAT(table, Not(HasSubstr("version 0.10.0,")));
}

TEST(ClusterFormatTest, NoPsTableWithoutPsTasks) {
  v1::ClusterState state = StateWithPs(true);
  state.mutable_tasks()->RemoveLast();
  EXPECT_THAT(ClusterStateToTable(state, kNow), Not(HasSubstr("SHARD")));
}

TEST(ClusterFormatTest, JsonCarriesTheShardsCounters) {
  const nlohmann::json json = ClusterStateToJson(StateWithPs(true));
  const nlohmann::json& ps = json["tasks"][1]["ps"];
  EXPECT_EQ(ps["job_id"], "7");
  EXPECT_EQ(ps["updates"], 1520);
  EXPECT_EQ(ps["last_snapshot_updates"], 1500);
  EXPECT_EQ(ps["last_snapshot_path"], "/state/ps/1/snapshot-1500.bin");
  EXPECT_EQ(ps["variables"][0]["name"], "dense/kernel");
  EXPECT_EQ(ps["variables"][0]["shape"], nlohmann::json::array({784, 128}));
}

}  // namespace
}  // namespace cohort::ctl
