#include "worker_agent/input_pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/record_dataset.h"

namespace cohort::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAreArray;

std::vector<std::string> Elements(int64_t n) {
  std::vector<std::string> elements;
  for (int64_t i = 0; i < n; ++i) elements.push_back(absl::StrCat("e", i));
  return elements;
}

std::unique_ptr<Dataset> Memory(int64_t n, DatasetOptions options = {}) {
  return std::make_unique<InMemoryDataset>(Elements(n), options);
}

// A data set made of files holding `file_sizes` elements each, in memory.
class FakeFileDataset final : public Dataset {
 public:
  FakeFileDataset(std::vector<int64_t> file_sizes, DatasetOptions options)
      : options_(options) {
    begins_.push_back(0);
    for (int64_t n : file_sizes) begins_.push_back(begins_.back() + n);
    elements_ = Elements(begins_.back());
  }
  int64_t size() const override {
    return static_cast<int64_t>(elements_.size());
  }
  std::string_view Get(int64_t index) const override {
    return elements_[index];
  }
  DatasetOptions options() const override { return options_; }
  int num_files() const override {
    return static_cast<int>(begins_.size()) - 1;
  }
  int64_t file_begin(int file) const override { return begins_[file]; }

 private:
  std::vector<std::string> elements_;
  std::vector<int64_t> begins_;
  DatasetOptions options_;
};

std::unique_ptr<Dataset> Files(std::vector<int64_t> sizes,
                               DatasetOptions options = {}) {
  return std::make_unique<FakeFileDataset>(std::move(sizes), options);
}

std::unique_ptr<InputPipeline> Make(std::unique_ptr<Dataset> dataset,
                                    int pipeline, int num_pipelines,
                                    int local_replicas, int64_t global_batch,
                                    uint64_t seed = 1) {
  absl::StatusOr<std::unique_ptr<InputPipeline>> made =
      InputPipeline::Create(std::move(dataset), pipeline, num_pipelines,
                            local_replicas, global_batch, seed);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? *std::move(made) : nullptr;
}

// Replica `replica`'s batch of `step`, as strings.
std::vector<std::string> Batch(const InputPipeline& pipeline, int64_t step,
                               int replica = 0) {
  const std::vector<cohort::Batch> batches = pipeline.BatchesForStep(step);
  std::vector<std::string> out;
  for (size_t i = 0; i < batches[replica].size(); ++i) {
    out.emplace_back(batches[replica].element(i));
  }
  return out;
}

// Every element of `step`, over all local replicas.
std::vector<std::string> Step(const InputPipeline& pipeline, int64_t step) {
  std::vector<std::string> out;
  for (const cohort::Batch& batch : pipeline.BatchesForStep(step)) {
    for (size_t i = 0; i < batch.size(); ++i) {
      out.emplace_back(batch.element(i));
    }
  }
  return out;
}

std::string CreateError(std::unique_ptr<Dataset> dataset, int pipeline,
                        int num_pipelines, int local_replicas,
                        int64_t global_batch) {
  absl::StatusOr<std::unique_ptr<InputPipeline>> made =
      InputPipeline::Create(std::move(dataset), pipeline, num_pipelines,
                            local_replicas, global_batch, 1);
  EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument)
      << made.status();
  return std::string(made.status().message());
}

TEST(InputPipelineTest, OffGivesEveryPipelineEverything) {
  const DatasetOptions off{.shard_policy = ShardPolicy::kOff};
  auto p0 = Make(Memory(5, off), 0, 2, 1, 4);
  auto p1 = Make(Memory(5, off), 1, 2, 1, 4);
  EXPECT_THAT(Batch(*p0, 0), ElementsAre("e0", "e1"));
  EXPECT_THAT(Batch(*p1, 0), ElementsAre("e0", "e1"));
  // Positions 4, 5: the end of epoch 0, the start of epoch 1.
  EXPECT_THAT(Batch(*p1, 2), ElementsAre("e4", "e0"));
  EXPECT_THAT(p0->description(), StartsWith("OFF sharding"));
}

TEST(InputPipelineTest, PerReplicaBatchesGoOneToEachReplicaUnsplit) {
  // The function's own batches: element i is one replica's whole batch.
  const DatasetOptions user{.per_replica_batches = true};
  auto p1 = Make(Memory(5, user), 1, 2, 2, 64);
  EXPECT_THAT(Batch(*p1, 0, 0), ElementsAre("e0"));
  EXPECT_THAT(Batch(*p1, 0, 1), ElementsAre("e1"));
  // Not sharded over the pipelines, and repeated: step 2 is e4, then e0.
  EXPECT_THAT(Step(*p1, 2), ElementsAre("e4", "e0"));
  EXPECT_THAT(p1->description(),
              StartsWith("per-replica batches from the dataset function: 5 "
                         "batches, one per replica a step"));
  EXPECT_EQ(p1->shard_size(), 5);

  EXPECT_THAT(CreateError(Memory(5, {.shard_policy = ShardPolicy::kData,
                                     .per_replica_batches = true}),
                          0, 2, 1, 4),
              HasSubstr("shard_policy must be kAuto or kOff"));
}

TEST(InputPipelineTest, DataKeepsEveryNthElementAndRepeats) {
  const DatasetOptions data{.shard_policy = ShardPolicy::kData};
  auto p1 = Make(Memory(10, data), 1, 2, 1, 4);
  EXPECT_THAT(Batch(*p1, 0), ElementsAre("e1", "e3"));
  EXPECT_THAT(Batch(*p1, 1), ElementsAre("e5", "e7"));
  EXPECT_THAT(Batch(*p1, 2), ElementsAre("e9", "e1"));
  EXPECT_THAT(p1->description(),
              HasSubstr("DATA sharding: elements 1, 3, 5, ... of 10 "
                        "(5 elements)"));
}

TEST(InputPipelineTest, DataPipelinesTogetherTakeWhatOneWould) {
  for (const bool shuffle : {false, true}) {
    const DatasetOptions data{.shard_policy = ShardPolicy::kData,
                              .shuffle = shuffle};
    auto single = Make(Memory(12, data), 0, 1, 2, 6, /*seed=*/9);
    auto p0 = Make(Memory(12, data), 0, 2, 1, 6, /*seed=*/9);
    auto p1 = Make(Memory(12, data), 1, 2, 1, 6, /*seed=*/9);
    for (int64_t step = 0; step < 9; ++step) {
      std::vector<std::string> both = Step(*p0, step);
      const std::vector<std::string> second = Step(*p1, step);
      both.insert(both.end(), second.begin(), second.end());
      EXPECT_THAT(both, UnorderedElementsAreArray(Step(*single, step)))
          << "step " << step << (shuffle ? " shuffled" : "");
    }
  }
}

TEST(InputPipelineTest, FileOwnsEveryNthFile) {
  const DatasetOptions file{.shard_policy = ShardPolicy::kFile};
  auto p0 = Make(Files({3, 1, 2, 2}, file), 0, 2, 1, 20);
  EXPECT_THAT(Batch(*p0, 0), ElementsAre("e0", "e1", "e2", "e4", "e5", "e0",
                                         "e1", "e2", "e4", "e5"));
  EXPECT_THAT(p0->description(),
              StartsWith("FILE sharding: files 0, 2 of 4 (5 elements)"));
  auto p1 = Make(Files({3, 1, 2, 2}, file), 1, 2, 1, 4);
  EXPECT_THAT(Batch(*p1, 0), ElementsAre("e3", "e6"));
}

TEST(InputPipelineTest, StepSplitsContiguouslyOverLocalReplicas) {
  auto p = Make(Memory(20), 0, 1, 2, 8);
  EXPECT_THAT(Batch(*p, 1, 0), ElementsAre("e8", "e9", "e10", "e11"));
  EXPECT_THAT(Batch(*p, 1, 1), ElementsAre("e12", "e13", "e14", "e15"));
}

TEST(InputPipelineTest, ShuffleIsDeterministicAndChangesEachEpoch) {
  const DatasetOptions shuffled{.shard_policy = ShardPolicy::kOff,
                                .shuffle = true};
  auto a = Make(Memory(32, shuffled), 0, 1, 1, 32, /*seed=*/42);
  auto b = Make(Memory(32, shuffled), 0, 1, 1, 32, /*seed=*/42);
  auto other_seed = Make(Memory(32, shuffled), 0, 1, 1, 32, /*seed=*/43);
  // One step is one epoch here.
  EXPECT_EQ(Step(*a, 0), Step(*b, 0));
  EXPECT_EQ(Step(*a, 5), Step(*b, 5));
  EXPECT_NE(Step(*a, 0), Step(*a, 1));
  EXPECT_NE(Step(*a, 0), Step(*other_seed, 0));
  EXPECT_NE(Step(*a, 0), Elements(32));
  for (int64_t epoch : {0, 1, 7}) {
    EXPECT_THAT(Step(*a, epoch), UnorderedElementsAreArray(Elements(32)));
  }
  // Random access: asking out of order changes nothing.
  const std::vector<std::string> late = Step(*a, 100);
  EXPECT_EQ(Step(*b, 3), Step(*a, 3));
  EXPECT_EQ(Step(*b, 100), late);
}

TEST(InputPipelineTest, ShuffledFileShardKeepsItsFiles) {
  const DatasetOptions file{.shard_policy = ShardPolicy::kFile,
                            .shuffle = true};
  auto p0 = Make(Files({3, 1, 2, 2}, file), 0, 2, 1, 10);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const std::vector<std::string> step = Step(*p0, epoch);
    EXPECT_THAT(std::vector<std::string>(step.begin(), step.begin() + 5),
                UnorderedElementsAreArray({"e0", "e1", "e2", "e4", "e5"}));
  }
}

TEST(InputPipelineTest, AutoChoosesFileOnlyWithEnoughFiles) {
  EXPECT_THAT(Make(Files({2, 2}), 1, 2, 1, 2)->description(),
              StartsWith("FILE sharding (chosen by AUTO): files 1 of 2"));
  EXPECT_THAT(Make(Files({2, 2}), 1, 3, 1, 3)->description(),
              StartsWith("DATA sharding (chosen by AUTO)"));
  EXPECT_THAT(Make(Memory(6), 0, 2, 1, 2)->description(),
              StartsWith("DATA sharding (chosen by AUTO)"));
}

TEST(InputPipelineTest, FileWithoutFilesFails) {
  const DatasetOptions file{.shard_policy = ShardPolicy::kFile};
  EXPECT_THAT(CreateError(Memory(6, file), 0, 1, 1, 2),
              StartsWith("FILE sharding needs a record-file dataset"));
}

TEST(InputPipelineTest, FileWithTooFewFilesFails) {
  const DatasetOptions file{.shard_policy = ShardPolicy::kFile};
  EXPECT_EQ(CreateError(Files({4}, file), 0, 2, 1, 2),
            "FILE sharding: 1 record file for 2 input pipelines (agents); "
            "each needs at least one. Use ShardPolicy::kData (every agent "
            "reads every file and keeps its share) or write more files");
}

TEST(InputPipelineTest, IndivisibleGlobalBatchFails) {
  EXPECT_THAT(CreateError(Memory(6), 0, 2, 2, 10),
              HasSubstr("global batch size 10 does not divide over 4 "
                        "replicas (2 input pipelines x 2 local replicas)"));
}

TEST(InputPipelineTest, EmptyDataSetOrShardFails) {
  EXPECT_THAT(CreateError(Memory(0), 0, 1, 1, 1), HasSubstr("empty"));
  const DatasetOptions data{.shard_policy = ShardPolicy::kData};
  EXPECT_THAT(CreateError(Memory(1, data), 1, 2, 1, 2),
              HasSubstr("has 1 element for 2 input pipelines (agents); "
                        "pipeline 1 gets none"));
  const DatasetOptions file{.shard_policy = ShardPolicy::kFile};
  EXPECT_THAT(CreateError(Files({2, 0, 3, 0}, file), 1, 2, 1, 2),
              HasSubstr("files 1, 3 of 4 hold no records"));
}

class RecordDatasetTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(testing::TempDir(), "/record_dataset_", getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WriteFile(const std::string& name,
                        const std::vector<std::string>& records) {
    const std::string path = absl::StrCat(dir_, "/", name);
    auto writer = RecordWriter::Create(path);
    EXPECT_TRUE(writer.ok()) << writer.status();
    for (const std::string& r : records) EXPECT_TRUE((*writer)->Write(r).ok());
    EXPECT_TRUE((*writer)->Close().ok());
    return path;
  }

  std::string dir_;
};

TEST_F(RecordDatasetTest, ReadsFilesInOrderAndKeepsTheirBounds) {
  const std::vector<std::string> files = {
      WriteFile("a", {"a0", "a1"}), WriteFile("b", {}), WriteFile("c", {"c0"})};
  absl::StatusOr<std::unique_ptr<Dataset>> dataset = OpenRecordFiles(
      files, {.shard_policy = ShardPolicy::kFile, .shuffle = true});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const Dataset& d = **dataset;
  EXPECT_EQ(d.size(), 3);
  EXPECT_EQ(d.num_files(), 3);
  EXPECT_EQ(d.file_begin(0), 0);
  EXPECT_EQ(d.file_begin(1), 2);
  EXPECT_EQ(d.file_begin(2), 2);
  EXPECT_EQ(d.file_begin(3), 3);
  EXPECT_EQ(d.Get(2), "c0");
  EXPECT_TRUE(d.options().shuffle);

  // FILE sharding over the real files: pipeline 0 of 2 owns a and c.
  auto p0 = Make(*std::move(dataset), 0, 2, 1, 6);
  EXPECT_THAT(p0->description(), StartsWith("FILE sharding: files 0, 2 of 3"));
}

TEST_F(RecordDatasetTest, EmptyListAndMissingFileFail) {
  EXPECT_EQ(OpenRecordFiles({}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status missing =
      OpenRecordFiles({WriteFile("a", {"x"}), dir_ + "/nope"}, {}).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()), HasSubstr(dir_ + "/nope"));
}

}  // namespace
}  // namespace cohort::agent
