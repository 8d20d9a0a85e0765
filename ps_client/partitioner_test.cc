#include "ps_client/partitioner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cohort::ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A part as {name, ps, first_row, rows, byte_offset, bytes}, for compact
// expectations.
struct P {
  std::string name;
  int ps;
  int64_t first_row, rows, byte_offset, bytes;
  bool operator==(const P&) const = default;
};
void PrintTo(const P& p, std::ostream* os) {
  *os << "{" << p.name << " ps" << p.ps << " rows " << p.first_row << "+"
      << p.rows << " bytes " << p.byte_offset << "+" << p.bytes << "}";
}

std::vector<P> Parts(const VariablePlacement& v) {
  std::vector<P> out;
  for (const VariablePart& p : v.parts) {
    out.push_back({p.name, p.ps, p.first_row, p.rows, p.byte_offset, p.bytes});
  }
  return out;
}

Placement Place(const std::vector<VariableDecl>& vars, int num_ps,
                const PartitionerOptions& options) {
  absl::StatusOr<Placement> placement = PlaceVariables(vars, num_ps, options);
  EXPECT_TRUE(placement.ok()) << placement.status();
  return placement.ok() ? *placement : Placement{};
}

int64_t Parts(std::vector<int64_t> shape, int num_ps,
              const PartitionerOptions& options) {
  Placement p = Place({{"v", shape, 4}}, num_ps, options);
  return p.variables.empty() ? -1 : p.variables[0].parts.size();
}

TEST(PartitionerTest, NoneRoundRobinsWholeVariablesInOrder) {
  Placement p = Place({{"a", {10, 4}, 4}, {"b", {}, 4}, {"c", {3}, 8}}, 2, {});
  ASSERT_EQ(p.variables.size(), 3u);
  EXPECT_THAT(Parts(p.variables[0]), ElementsAre(P{"a", 0, 0, 10, 0, 160}));
  EXPECT_THAT(Parts(p.variables[1]), ElementsAre(P{"b", 1, 0, 0, 0, 4}));
  EXPECT_THAT(Parts(p.variables[2]), ElementsAre(P{"c", 0, 0, 3, 0, 24}));
  EXPECT_EQ(p.variables[0].bytes, 160);
  EXPECT_EQ(p.Find("c"), &p.variables[2]);
  EXPECT_EQ(p.Find("d"), nullptr);
}

TEST(PartitionerTest, FixedShardsSplitsAsTfWithACountThatContinues) {
  PartitionerOptions fixed{.policy = PartitionPolicy::kFixedShards,
                           .num_shards = 3};
  // 7 rows of 2 floats (8 bytes a row): 3 + 2 + 2 rows.
  Placement p = Place({{"v", {7, 2}, 4}, {"w", {5}, 4}}, 2, fixed);
  EXPECT_THAT(
      Parts(p.variables[0]),
      ElementsAre(P{"v/part_0", 0, 0, 3, 0, 24}, P{"v/part_1", 1, 3, 2, 24, 16},
                  P{"v/part_2", 0, 5, 2, 40, 16}));
  // The counter went on at 3: w's parts start on ps 1.
  EXPECT_THAT(
      Parts(p.variables[1]),
      ElementsAre(P{"w/part_0", 1, 0, 2, 0, 8}, P{"w/part_1", 0, 2, 2, 8, 8},
                  P{"w/part_2", 1, 4, 1, 16, 4}));
  EXPECT_THAT(p.variables[0].parts[1].shape, ElementsAre(2, 2));
}

TEST(PartitionerTest, ColocatedVariablesShareAPsTaskWholeAndTakeNoTurn) {
  const Placement p =
      Place({{"embedding", {8, 4}, 4},
             {"accumulator", {8, 4}, 4, "embedding"},
             {"bias", {4}, 4},
             {"bias_count", {}, 8, "bias"}},
            3, {.policy = PartitionPolicy::kFixedShards, .num_shards = 2});
  // embedding: parts on ps 0 and 1; bias: 2 parts, ps 2 and 0.
  EXPECT_THAT(Parts(p.variables[1]),
              ElementsAre(P{"accumulator", 0, 0, 8, 0, 128}));
  EXPECT_EQ(p.variables[2].parts[0].ps, 2);
  EXPECT_EQ(p.variables[2].parts[1].ps, 0);
  EXPECT_THAT(Parts(p.variables[3]),
              ElementsAre(P{"bias_count", 2, 0, 0, 0, 8}));

  absl::StatusOr<Placement> unknown =
      PlaceVariables({{"slot", {2}, 4, "w"}, {"w", {2}, 4}}, 2, {});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("variable \"slot\": colocate_with names \"w\", which "
                        "is not a variable created before it"));
}

TEST(PartitionerTest, FixedShardsNeverMakesMorePartsThanRows) {
  PartitionerOptions fixed{.policy = PartitionPolicy::kFixedShards,
                           .num_shards = 4};
  EXPECT_EQ(Parts({2, 3}, 2, fixed), 2);
  EXPECT_EQ(Parts({9}, 2, fixed), 4);
}

TEST(PartitionerTest, ScalarsAreNeverSplit) {
  PartitionerOptions fixed{.policy = PartitionPolicy::kFixedShards,
                           .num_shards = 3};
  Placement p = Place({{"s", {}, 4}, {"t", {3}, 4}}, 3, fixed);
  EXPECT_THAT(Parts(p.variables[0]), ElementsAre(P{"s", 0, 0, 0, 0, 4}));
  EXPECT_THAT(Parts(p.variables[1]), ElementsAre(P{"t/part_0", 1, 0, 1, 0, 4},
                                                 P{"t/part_1", 2, 1, 1, 4, 4},
                                                 P{"t/part_2", 0, 2, 1, 8, 4}));
}

TEST(PartitionerTest, MinSizeAsTfDocumentsIt) {
  // TF's own examples: 6 float rows of 4 bytes, min_shard_bytes=4.
  EXPECT_EQ(Parts({6, 1}, 4,
                  {.policy = PartitionPolicy::kMinSize,
                   .min_shard_bytes = 4,
                   .max_shards = 2}),
            2);
  EXPECT_EQ(Parts({6, 1}, 4,
                  {.policy = PartitionPolicy::kMinSize,
                   .min_shard_bytes = 4,
                   .max_shards = 10}),
            6);
}

TEST(PartitionerTest, MinSizeDefaultsTo256KiBAndTheNumberOfPsTasks) {
  const PartitionerOptions min_size{.policy = PartitionPolicy::kMinSize};
  EXPECT_EQ(Parts({1024, 256}, 4, min_size), 4);   // 1 MiB: 4 x 256 KiB
  EXPECT_EQ(Parts({1024, 256}, 2, min_size), 2);   // capped by 2 ps tasks
  EXPECT_EQ(Parts({100, 256}, 4, min_size), 1);    // 100 KiB
  EXPECT_EQ(Parts({1000, 256}, 4, min_size), 4);   // 3.9: ceil, as TF
  EXPECT_EQ(Parts({3, 1 << 20}, 8, min_size), 3);  // capped by dim0

  Placement p = Place({{"emb", {1024, 256}, 4}}, 4, min_size);
  EXPECT_THAT(Parts(p.variables[0]),
              ElementsAre(P{"emb/part_0", 0, 0, 256, 0, 262144},
                          P{"emb/part_1", 1, 256, 256, 262144, 262144},
                          P{"emb/part_2", 2, 512, 256, 524288, 262144},
                          P{"emb/part_3", 3, 768, 256, 786432, 262144}));
}

TEST(PartitionerTest, MaxSizeAsTfDocumentsIt) {
  EXPECT_EQ(Parts({6, 1}, 2,
                  {.policy = PartitionPolicy::kMaxSize, .max_shard_bytes = 4}),
            6);
  EXPECT_EQ(Parts({6, 1}, 2,
                  {.policy = PartitionPolicy::kMaxSize,
                   .max_shard_bytes = 4,
                   .max_shards = 2}),
            2);
  EXPECT_EQ(
      Parts({6, 1}, 2,
            {.policy = PartitionPolicy::kMaxSize, .max_shard_bytes = 1024}),
      1);
}

TEST(PartitionerTest, MaxSizeCountsWholeRows) {
  // Rows of 4 bytes, at most 10 bytes a part: 2 rows a part, 5 parts (not
  // ceil(40 / 10) = 4, which would make 12-byte parts).
  EXPECT_EQ(Parts({10, 1}, 2,
                  {.policy = PartitionPolicy::kMaxSize, .max_shard_bytes = 10}),
            5);
  // A row bigger than the limit is a part of its own.
  EXPECT_EQ(Parts({3, 4}, 2,
                  {.policy = PartitionPolicy::kMaxSize, .max_shard_bytes = 2}),
            3);
  // 16 MiB of float32 rows of 4 KiB under 4 MiB parts: 4 parts.
  const PartitionerOptions max4m{.policy = PartitionPolicy::kMaxSize,
                                 .max_shard_bytes = 4 << 20};
  Placement p = Place({{"big", {4096, 1024}, 4}}, 2, max4m);
  EXPECT_THAT(Parts(p.variables[0]),
              ElementsAre(P{"big/part_0", 0, 0, 1024, 0, 4 << 20},
                          P{"big/part_1", 1, 1024, 1024, 4 << 20, 4 << 20},
                          P{"big/part_2", 0, 2048, 1024, 8 << 20, 4 << 20},
                          P{"big/part_3", 1, 3072, 1024, 12 << 20, 4 << 20}));
}

TEST(PartitionerTest, PartsCoverTheVariableExactly) {
  const PartitionerOptions fixed{.policy = PartitionPolicy::kFixedShards,
                                 .num_shards = 7};
  for (int64_t rows : {1, 6, 7, 8, 13, 100}) {
    Placement p = Place({{"v", {rows, 3}, 8}}, 3, fixed);
    int64_t next_row = 0, next_byte = 0;
    for (const VariablePart& part : p.variables[0].parts) {
      EXPECT_EQ(part.first_row, next_row);
      EXPECT_EQ(part.byte_offset, next_byte);
      EXPECT_EQ(part.bytes, part.rows * 24);
      next_row += part.rows;
      next_byte += part.bytes;
    }
    EXPECT_EQ(next_row, rows);
    EXPECT_EQ(next_byte, p.variables[0].bytes);
  }
}

TEST(PartitionerTest, RejectsBadInputsNamingThem) {
  auto error = [](const std::vector<VariableDecl>& vars, int num_ps,
                  const PartitionerOptions& options) {
    absl::StatusOr<Placement> p = PlaceVariables(vars, num_ps, options);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(p.status().message());
  };
  const std::vector<VariableDecl> ok = {{"v", {4}, 4}};
  EXPECT_THAT(error(ok, 0, {}), HasSubstr("at least one ps task"));
  EXPECT_THAT(
      error(ok, 2, {.policy = PartitionPolicy::kFixedShards, .num_shards = 0}),
      HasSubstr("num_shards"));
  EXPECT_THAT(error(ok, 2, {.policy = PartitionPolicy::kMaxSize}),
              HasSubstr("max_shard_bytes"));
  EXPECT_THAT(
      error(ok, 2, {.policy = PartitionPolicy::kMinSize, .min_shard_bytes = 0}),
      HasSubstr("min_shard_bytes"));
  EXPECT_THAT(
      error(ok, 2, {.policy = PartitionPolicy::kMinSize, .max_shards = -1}),
      HasSubstr("max_shards"));
  EXPECT_THAT(error({{"v", {4, -1}, 4}}, 2, {}),
              HasSubstr("\"v\": negative dimension in shape [4,-1]"));
  // No shard holds an empty variable.
  EXPECT_THAT(error({{"e", {0, 5}, 4}}, 2, {}),
              HasSubstr("\"e\": zero dimension in shape [0,5]: a ps "
                        "variable holds at least one element"));
  EXPECT_THAT(error({{"v", {4}, 0}}, 2, {}), HasSubstr("element size"));
  EXPECT_THAT(error({{"", {4}, 4}}, 2, {}), HasSubstr("empty name"));
  EXPECT_THAT(error({{"v", {4}, 4}, {"v", {2}, 4}}, 2, {}),
              HasSubstr("used twice"));
  // A split variable's part names clash with a variable of that name.
  EXPECT_THAT(error({{"a/part_1", {}, 4}, {"a", {4}, 4}}, 2,
                    {.policy = PartitionPolicy::kFixedShards, .num_shards = 2}),
              HasSubstr("\"a/part_1\" is used twice"));
  EXPECT_THAT(error({{"huge", {int64_t{1} << 40, int64_t{1} << 40}, 4}}, 2, {}),
              HasSubstr("overflows"));
}

TEST(PartitionerTest, PolicyNamesRoundTrip) {
  for (PartitionPolicy p :
       {PartitionPolicy::kNone, PartitionPolicy::kFixedShards,
        PartitionPolicy::kMinSize, PartitionPolicy::kMaxSize}) {
    absl::StatusOr<PartitionPolicy> parsed =
        ParsePartitionPolicy(PartitionPolicyName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(ParsePartitionPolicy("round_robin").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cohort::ps
