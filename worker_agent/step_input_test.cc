#include "worker_agent/step_input.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/wait.h"

namespace cohort::agent {
namespace {

using ::cohort::testing::StatusIs;
using ::cohort::testing::WaitUntil;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Elements of 8 bytes holding their index: `limit` of them, or endless.
// Counts what was read; blocks before element `gate_at` until opened.
class IndexStream final : public DataStream {
 public:
  explicit IndexStream(int64_t limit, int64_t gate_at = -1)
      : limit_(limit), gate_at_(gate_at) {}

  absl::StatusOr<bool> Next(std::string* element) override {
    if (next_ == gate_at_) gate_.WaitForNotification();
    if (limit_ >= 0 && next_ >= limit_) return false;
    element->assign(reinterpret_cast<const char*>(&next_), sizeof(next_));
    ++next_;
    read_.store(next_);
    return true;
  }
  DatasetOptions options() const override {
    return {.shard_policy = ShardPolicy::kOff};
  }

  void Open() { gate_.Notify(); }
  int64_t read() const { return read_.load(); }

 private:
  const int64_t limit_;
  const int64_t gate_at_;
  absl::Notification gate_;
  int64_t next_ = 0;
  std::atomic<int64_t> read_{0};
};

Device Cpu(int index) { return {.kind = Device::Kind::kCpu, .index = index}; }

std::unique_ptr<StepInput> FromStream(std::unique_ptr<DataStream> stream,
                                      int local, int64_t global,
                                      StepInput::Options options) {
  absl::StatusOr<std::unique_ptr<StreamPipeline>> pipeline =
      StreamPipeline::Create(std::move(stream), 0, 1, local, global);
  EXPECT_TRUE(pipeline.ok()) << pipeline.status();
  for (int r = 0; r < local; ++r) options.devices.push_back(Cpu(r));
  absl::StatusOr<std::unique_ptr<StepInput>> input =
      StepInput::Create(nullptr, *std::move(pipeline), std::move(options));
  EXPECT_TRUE(input.ok()) << input.status();
  return input.ok() ? *std::move(input) : nullptr;
}

std::vector<int64_t> Indices(const Batch& batch) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < batch.size(); ++i) out.push_back(batch.As<int64_t>(i)[0]);
  return out;
}

TEST(StepInputTest, ReplicasTakeTheirOwnBatchOfEachStepFromADataSet) {
  std::vector<std::string> elements;
  for (int i = 0; i < 16; ++i) elements.push_back(absl::StrCat("e", i));
  absl::StatusOr<std::unique_ptr<InputPipeline>> pipeline = InputPipeline::Create(
      std::make_unique<InMemoryDataset>(elements, DatasetOptions{}), 0, 1, 2, 4,
      /*seed=*/1);
  ASSERT_TRUE(pipeline.ok());
  const InputPipeline& reference = **pipeline;
  const std::vector<Batch> expected = reference.BatchesForStep(3);
  std::vector<std::string> want0{std::string(expected[0].element(0)),
                                 std::string(expected[0].element(1))};
  std::vector<std::string> want1{std::string(expected[1].element(0)),
                                 std::string(expected[1].element(1))};
  absl::StatusOr<std::unique_ptr<StepInput>> input = StepInput::Create(
      *std::move(pipeline), nullptr,
      {.devices = {Cpu(0), Cpu(1)}, .end_step = 10, .prefetch_steps = 2});
  ASSERT_TRUE(input.ok()) << input.status();
  ASSERT_TRUE((*input)->Begin(3).ok());
  auto b0 = (*input)->Take(0, 3, Cpu(0));
  auto b1 = (*input)->Take(1, 3, Cpu(1));
  ASSERT_TRUE(b0.ok() && b0->has_value() && b1.ok() && b1->has_value());
  EXPECT_THAT((**b0).element(0), want0[0]);
  EXPECT_THAT((**b0).element(1), want0[1]);
  EXPECT_THAT((**b1).element(0), want1[0]);
  EXPECT_FALSE((*input)->can_end());
  EXPECT_THAT((*input)->description(), HasSubstr("2 steps prefetched"));
}

TEST(StepInputTest, TheInputThreadPreparesTheNextStepWhileReplicasHoldThisOne) {
  auto stream = std::make_unique<IndexStream>(-1);
  IndexStream* raw = stream.get();
  auto input = FromStream(std::move(stream), 2, 4,
                          {.end_step = 100, .prefetch_steps = 1});
  ASSERT_NE(input, nullptr);
  ASSERT_TRUE(input->Begin(0).ok());
  auto b0 = input->Take(0, 0, Cpu(0));
  auto b1 = input->Take(1, 0, Cpu(1));
  ASSERT_TRUE(b0.ok()) << b0.status();
  ASSERT_TRUE(b0.ok() && b0->has_value() && b1.ok() && b1->has_value());
  EXPECT_THAT(Indices(**b0), ElementsAre(0, 1));
  EXPECT_THAT(Indices(**b1), ElementsAre(2, 3));
  // Step 1 is read while the replicas still hold step 0.
  EXPECT_TRUE(WaitUntil([&] { return raw->read() == 8; }, absl::Seconds(30)));
  auto c0 = input->Take(0, 1, Cpu(0));
  ASSERT_TRUE(c0.ok() && c0->has_value());
  EXPECT_THAT(Indices(**c0), ElementsAre(4, 5));
  // Step 2 waits for replica 1 to let go of step 0.
  EXPECT_EQ(raw->read(), 8);
  auto c1 = input->Take(1, 1, Cpu(1));
  ASSERT_TRUE(c1.ok() && c1->has_value());
  EXPECT_TRUE(WaitUntil([&] { return raw->read() == 12; }, absl::Seconds(30)));
}

TEST(StepInputTest, AFiniteStreamSaysWhichStepItCannotFill) {
  auto input = FromStream(std::make_unique<IndexStream>(10), 1, 4,
                          {.end_step = 100, .prefetch_steps = 1});
  ASSERT_NE(input, nullptr);
  ASSERT_TRUE(input->Begin(0).ok());
  EXPECT_TRUE(input->can_end());
  for (int step = 0; step < 2; ++step) {
    auto b = input->Take(0, step, Cpu(0));
    ASSERT_TRUE(b.ok() && b->has_value()) << "step " << step;
    auto more = input->HasStep(step + 1);
    ASSERT_TRUE(more.ok());
    EXPECT_EQ(*more, step == 0) << "step " << step;
  }
  auto after = input->Take(0, 2, Cpu(0));
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->has_value());
}

// Elements as IndexStream's, until element `fail_at`, which is an error.
class FailingStream final : public DataStream {
 public:
  explicit FailingStream(int64_t fail_at) : fail_at_(fail_at) {}

  absl::StatusOr<bool> Next(std::string* element) override {
    if (next_ == fail_at_) {
      return absl::DataLossError(absl::StrCat("bad record ", next_));
    }
    element->assign(reinterpret_cast<const char*>(&next_), sizeof(next_));
    ++next_;
    return true;
  }
  DatasetOptions options() const override {
    return {.shard_policy = ShardPolicy::kOff};
  }

 private:
  const int64_t fail_at_;
  int64_t next_ = 0;
};

// Steps cut before the stream failed are still trained: the error is for
// the first step it cost.
TEST(StepInputTest, AStreamErrorSparesTheStepsCutBeforeIt) {
  auto input = FromStream(std::make_unique<FailingStream>(8), 1, 4,
                          {.end_step = 100, .prefetch_steps = 2});
  ASSERT_NE(input, nullptr);
  ASSERT_TRUE(input->Begin(0).ok());
  auto b0 = input->Take(0, 0, Cpu(0));
  ASSERT_TRUE(b0.ok() && b0->has_value()) << b0.status();
  // Step 2, cut while step 0 is held, fails: step 1 was cut before it.
  EXPECT_THAT(input->HasStep(2).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("bad record 8")));
  auto b1 = input->Take(0, 1, Cpu(0));
  ASSERT_TRUE(b1.ok()) << b1.status();
  ASSERT_TRUE(b1->has_value());
  EXPECT_THAT(Indices(**b1), ElementsAre(4, 5, 6, 7));
  EXPECT_THAT(input->Take(0, 2, Cpu(0)).status(),
              StatusIs(absl::StatusCode::kDataLoss));
}

TEST(StepInputTest, WithoutPrefetchTheReplicasCutEachStepThemselves) {
  auto stream = std::make_unique<IndexStream>(-1);
  IndexStream* raw = stream.get();
  auto input = FromStream(std::move(stream), 2, 2,
                          {.end_step = 50, .prefetch_steps = 0});
  ASSERT_NE(input, nullptr);
  ASSERT_TRUE(input->Begin(0).ok());
  std::vector<std::vector<int64_t>> seen(2);
  std::vector<std::thread> replicas;
  for (int local = 0; local < 2; ++local) {
    replicas.emplace_back([&, local] {
      for (int64_t step = 0; step < 50; ++step) {
        auto b = input->Take(local, step, Cpu(local));
        ASSERT_TRUE(b.ok() && b->has_value());
        seen[local].push_back(Indices(**b)[0]);
      }
    });
  }
  for (std::thread& t : replicas) t.join();
  for (int64_t step = 0; step < 50; ++step) {
    EXPECT_EQ(seen[0][step], 2 * step);
    EXPECT_EQ(seen[1][step], 2 * step + 1);
  }
  EXPECT_EQ(raw->read(), 100);  // nothing read ahead
}

TEST(StepInputTest, PrefetchToDevicePacksEachReplicasBatchInItsMemory) {
  auto input = FromStream(std::make_unique<IndexStream>(-1), 2, 6,
                          {.end_step = 10, .prefetch_steps = 1,
                           .to_device = true});
  ASSERT_NE(input, nullptr);
  ASSERT_TRUE(input->Begin(0).ok());
  for (int64_t step = 0; step < 3; ++step) {
    for (int local = 0; local < 2; ++local) {
      auto b = input->Take(local, step, Cpu(local));
      ASSERT_TRUE(b.ok() && b->has_value());
      const Batch& batch = **b;
      ASSERT_NE(batch.device_data(), nullptr);
      EXPECT_EQ(batch.element_bytes(), sizeof(int64_t));
      const int64_t* packed = batch.device_as<int64_t>();
      for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(packed[i], step * 6 + local * 3 + static_cast<int64_t>(i));
        EXPECT_NE(static_cast<const void*>(batch.element(i).data()),
                  static_cast<const void*>(packed + i));
      }
    }
  }
}

TEST(StepInputTest, DeviceCopiesNeedElementsOfOneSize) {
  std::vector<std::string> ragged{"a", "bb", "c", "dd"};
  absl::StatusOr<std::unique_ptr<InputPipeline>> pipeline = InputPipeline::Create(
      std::make_unique<InMemoryDataset>(ragged, DatasetOptions{}), 0, 1, 1, 2, 1);
  ASSERT_TRUE(pipeline.ok());
  absl::StatusOr<std::unique_ptr<StepInput>> input = StepInput::Create(
      *std::move(pipeline), nullptr,
      {.devices = {Cpu(0)}, .end_step = 2, .prefetch_steps = 1, .to_device = true});
  ASSERT_TRUE(input.ok());
  ASSERT_TRUE((*input)->Begin(0).ok());
  EXPECT_THAT((*input)->Take(0, 0, Cpu(0)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("element 1 has 2 bytes where element 0 has 1")));
}

TEST(StepInputTest, OptionsThatCannotWorkAreRefused) {
  auto pipeline = [] {
    return *StreamPipeline::Create(std::make_unique<IndexStream>(-1), 0, 1, 1, 1);
  };
  EXPECT_THAT(StepInput::Create(nullptr, pipeline(),
                                {.devices = {Cpu(0)}, .end_step = 1,
                                 .prefetch_steps = 0, .to_device = true}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("prefetch_steps must be at least 1")));
  EXPECT_THAT(StepInput::Create(nullptr, pipeline(),
                                {.devices = {Cpu(0)}, .end_step = 1,
                                 .prefetch_steps = -1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("prefetch_steps is -1")));
  EXPECT_THAT(StepInput::Create(nullptr, nullptr,
                                {.devices = {Cpu(0)}, .end_step = 1}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(StepInputTest, AStalledStreamFailsTheWaitAtItsLimitAndOnAbort) {
  auto stream = std::make_unique<IndexStream>(-1, /*gate_at=*/0);
  IndexStream* raw = stream.get();
  auto input = FromStream(std::move(stream), 1, 1,
                          {.end_step = 10, .prefetch_steps = 1,
                           .wait_limit = absl::Milliseconds(100)});
  ASSERT_NE(input, nullptr);
  ASSERT_TRUE(input->Begin(0).ok());
  EXPECT_THAT(input->Take(0, 0, Cpu(0)),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("the input of step 0 was not ready")));
  input->Abort(absl::AbortedError("a peer was lost"));
  EXPECT_THAT(input->HasStep(0),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("a peer was lost")));
  raw->Open();  // lets the input thread finish its read, so Shutdown joins
  input->Shutdown();
}

// Endless elements holding their index, whose Skip takes `per_chunk` for
// every StreamPipeline::kSkipChunk elements it passes over.
class SlowSkipStream final : public DataStream {
 public:
  explicit SlowSkipStream(absl::Duration per_chunk) : per_chunk_(per_chunk) {}

  absl::StatusOr<bool> Next(std::string* element) override {
    element->assign(reinterpret_cast<const char*>(&next_), sizeof(next_));
    ++next_;
    return true;
  }
  absl::StatusOr<bool> Skip(int64_t n) override {
    const int64_t chunks =
        (n + StreamPipeline::kSkipChunk - 1) / StreamPipeline::kSkipChunk;
    absl::SleepFor(per_chunk_ * chunks);
    next_ += n;
    return true;
  }
  DatasetOptions options() const override {
    return {.shard_policy = ShardPolicy::kOff};
  }

 private:
  const absl::Duration per_chunk_;
  int64_t next_ = 0;
};

// Resuming needs a skip (3 s here) longer than the replicas' wait limit
// (1.5 s); it moves on every 100 ms, so they wait it out instead of failing
// the attempt, whose next try would skip again from the start.
TEST(StepInputTest, AResumedStreamsLongSkipIsWaitedForWhileItMovesOn) {
  const int64_t resume_at = 30 * StreamPipeline::kSkipChunk;
  auto input = FromStream(
      std::make_unique<SlowSkipStream>(absl::Milliseconds(100)), 1, 1,
      {.end_step = resume_at + 10,
       .prefetch_steps = 1,
       .wait_limit = absl::Milliseconds(1500)});
  ASSERT_NE(input, nullptr);
  ASSERT_TRUE(input->Begin(resume_at).ok());
  absl::StatusOr<std::optional<Batch>> batch =
      input->Take(0, resume_at, Cpu(0));
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(batch->has_value());
  EXPECT_THAT(Indices(**batch), ElementsAre(resume_at));
  input->Shutdown();
}

}  // namespace
}  // namespace cohort::agent
