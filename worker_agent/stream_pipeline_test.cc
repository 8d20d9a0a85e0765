#include "worker_agent/stream_pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/testing/status_matchers.h"

namespace cohort::agent {
namespace {

using ::cohort::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Elements "e0", "e1", ...: `limit` of them, or endless when negative.
// Fails at element `fail_at` when that is set.
class CountingStream final : public DataStream {
 public:
  explicit CountingStream(int64_t limit, DatasetOptions options = {},
                          int64_t fail_at = -1)
      : limit_(limit), options_(options), fail_at_(fail_at) {}

  absl::StatusOr<bool> Next(std::string* element) override {
    if (next_ == fail_at_) return absl::DataLossError("the socket closed");
    if (limit_ >= 0 && next_ >= limit_) return false;
    *element = absl::StrCat("e", next_++);
    return true;
  }
  DatasetOptions options() const override { return options_; }

 private:
  const int64_t limit_;
  const DatasetOptions options_;
  const int64_t fail_at_;
  int64_t next_ = 0;
};

std::vector<std::string> Strings(const Batch& batch) {
  std::vector<std::string> out;
  for (size_t i = 0; i < batch.size(); ++i) {
    out.emplace_back(batch.element(i));
  }
  return out;
}

std::unique_ptr<StreamPipeline> Make(std::unique_ptr<DataStream> stream,
                                     int pipeline, int num_pipelines,
                                     int local, int64_t global) {
  absl::StatusOr<std::unique_ptr<StreamPipeline>> made = StreamPipeline::Create(
      std::move(stream), pipeline, num_pipelines, local, global);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? *std::move(made) : nullptr;
}

TEST(StreamPipelineTest, DataShardingKeepsEveryNthElementAndSplitsPerReplica) {
  auto p0 = Make(std::make_unique<CountingStream>(-1), 0, 2, 2, 8);
  auto p1 = Make(std::make_unique<CountingStream>(-1), 1, 2, 2, 8);
  ASSERT_NE(p0, nullptr);
  ASSERT_NE(p1, nullptr);
  auto s0 = p0->NextStep();
  auto s1 = p1->NextStep();
  ASSERT_TRUE(s0.ok() && s0->has_value());
  ASSERT_TRUE(s1.ok() && s1->has_value());
  EXPECT_THAT(Strings((**s0)[0]), ElementsAre("e0", "e2"));
  EXPECT_THAT(Strings((**s0)[1]), ElementsAre("e4", "e6"));
  EXPECT_THAT(Strings((**s1)[0]), ElementsAre("e1", "e3"));
  EXPECT_THAT(Strings((**s1)[1]), ElementsAre("e5", "e7"));
  auto next = p1->NextStep();
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_THAT(Strings((**next)[0]), ElementsAre("e9", "e11"));
  EXPECT_THAT(p0->description(), HasSubstr("DATA sharding: elements 0, 2, 4"));
}

TEST(StreamPipelineTest, OffShardingKeepsEveryElement) {
  auto p = Make(std::make_unique<CountingStream>(
                    -1, DatasetOptions{.shard_policy = ShardPolicy::kOff}),
                1, 2, 1, 4);
  ASSERT_NE(p, nullptr);
  auto step = p->NextStep();
  ASSERT_TRUE(step.ok() && step->has_value());
  EXPECT_THAT(Strings((**step)[0]), ElementsAre("e0", "e1"));
}

TEST(StreamPipelineTest, AResumedPipelineCutsWhatAnUnbrokenOneWould) {
  for (int pipeline = 0; pipeline < 3; ++pipeline) {
    auto unbroken = Make(std::make_unique<CountingStream>(-1), pipeline, 3, 2, 12);
    auto resumed = Make(std::make_unique<CountingStream>(-1), pipeline, 3, 2, 12);
    ASSERT_NE(unbroken, nullptr);
    ASSERT_NE(resumed, nullptr);
    for (int step = 0; step < 4; ++step) ASSERT_TRUE(unbroken->NextStep().ok());
    ASSERT_TRUE(resumed->SkipTo(4).ok());
    auto a = unbroken->NextStep();
    auto b = resumed->NextStep();
    ASSERT_TRUE(a.ok() && a->has_value() && b.ok() && b->has_value());
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(Strings((**a)[r]), Strings((**b)[r])) << "pipeline " << pipeline;
    }
    EXPECT_EQ(resumed->next_step(), 5);
  }
}

// A long skip goes in chunks, each reported; a stream that ends inside one
// leaves no step to cut.
TEST(StreamPipelineTest, ALongSkipReportsEachChunkAndMayEndInOne) {
  constexpr int64_t kChunk = StreamPipeline::kSkipChunk;
  auto p = Make(
      std::make_unique<CountingStream>(
          2 * kChunk + 5, DatasetOptions{.shard_policy = ShardPolicy::kOff}),
      0, 1, 1, 1);
  ASSERT_NE(p, nullptr);
  std::vector<std::pair<int64_t, int64_t>> reported;
  ASSERT_TRUE(p->SkipTo(2 * kChunk + 3, [&](int64_t done, int64_t total) {
                 reported.emplace_back(done, total);
               }).ok());
  EXPECT_THAT(reported, ElementsAre(std::pair(kChunk, 2 * kChunk + 3),
                                    std::pair(2 * kChunk, 2 * kChunk + 3),
                                    std::pair(2 * kChunk + 3, 2 * kChunk + 3)));
  auto next = p->NextStep();  // the first element after the skip
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_THAT(Strings((**next)[0]),
              ElementsAre(absl::StrCat("e", 2 * kChunk + 3)));

  auto short_stream =
      Make(std::make_unique<CountingStream>(
               kChunk + 5, DatasetOptions{.shard_policy = ShardPolicy::kOff}),
           0, 1, 1, 1);
  ASSERT_NE(short_stream, nullptr);
  ASSERT_TRUE(short_stream->SkipTo(3 * kChunk).ok());
  auto none = short_stream->NextStep();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(StreamPipelineTest, AFiniteStreamEndsAtTheLastFullStep) {
  auto p = Make(std::make_unique<CountingStream>(
                    10, DatasetOptions{.shard_policy = ShardPolicy::kOff}),
                0, 1, 2, 4);
  ASSERT_NE(p, nullptr);
  for (int step = 0; step < 2; ++step) {
    auto s = p->NextStep();
    ASSERT_TRUE(s.ok() && s->has_value()) << "step " << step;
  }
  auto last = p->NextStep();  // 2 elements left of 4
  ASSERT_TRUE(last.ok());
  EXPECT_FALSE(last->has_value());
  auto after = p->NextStep();
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->has_value());
  EXPECT_EQ(p->elements_read(), 10);
}

TEST(StreamPipelineTest, BatchesOwnTheirBytesBeyondThePipeline) {
  auto p = Make(std::make_unique<CountingStream>(-1), 0, 1, 1, 3);
  ASSERT_NE(p, nullptr);
  auto step = p->NextStep();
  ASSERT_TRUE(step.ok() && step->has_value());
  const Batch batch = (**step)[0];
  step = absl::StatusOr<std::optional<std::vector<Batch>>>(std::nullopt);
  p.reset();
  EXPECT_THAT(Strings(batch), ElementsAre("e0", "e1", "e2"));
}

TEST(StreamPipelineTest, PerReplicaBatchesAreOneElementEach) {
  auto p = Make(std::make_unique<CountingStream>(
                    -1, DatasetOptions{.per_replica_batches = true}),
                1, 2, 2, 64);
  ASSERT_NE(p, nullptr);
  auto step = p->NextStep();
  ASSERT_TRUE(step.ok() && step->has_value());
  EXPECT_THAT(Strings((**step)[0]), ElementsAre("e0"));
  EXPECT_THAT(Strings((**step)[1]), ElementsAre("e1"));
}

TEST(StreamPipelineTest, WhatAStreamCannotDoIsRefusedByName) {
  EXPECT_THAT(StreamPipeline::Create(std::make_unique<CountingStream>(
                                         -1, DatasetOptions{.shuffle = true}),
                                     0, 1, 1, 4),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cannot be shuffled")));
  EXPECT_THAT(
      StreamPipeline::Create(
          std::make_unique<CountingStream>(
              -1, DatasetOptions{.shard_policy = ShardPolicy::kFile}),
          0, 1, 1, 4),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("FILE sharding needs record files")));
  EXPECT_THAT(StreamPipeline::Create(std::make_unique<CountingStream>(-1), 0,
                                     2, 2, 6),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("global batch size 6 does not divide over 4")));
  EXPECT_THAT(StreamPipeline::Create(nullptr, 0, 1, 1, 4),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(StreamPipelineTest, TheStreamsOwnErrorIsReturnedWithWhereItHappened) {
  auto p = Make(std::make_unique<CountingStream>(-1, DatasetOptions{}, 5), 0,
                1, 1, 4);
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(p->NextStep().ok());
  EXPECT_THAT(p->NextStep(),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("failed after 5 elements: the socket closed")));
}

}  // namespace
}  // namespace cohort::agent
