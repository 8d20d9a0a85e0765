#include "ps_server/variable_store.h"

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/ps_test_util.h"

namespace cohort::ps {
namespace {

using ::cohort::ps::test_util::Bytes;
using ::cohort::ps::test_util::Spec;
using ::cohort::ps::test_util::Values;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Specs = google::protobuf::RepeatedPtrField<v1::PsVariableSpec>;

v1::PsVariableSpec Sgd(v1::PsVariableSpec spec, double lr) {
  spec.mutable_optimizer()->set_kind(v1::PsOptimizer::SGD);
  spec.mutable_optimizer()->set_learning_rate(lr);
  return spec;
}

Specs List(std::vector<v1::PsVariableSpec> specs) {
  Specs out;
  for (auto& spec : specs) *out.Add() = std::move(spec);
  return out;
}

// The whole value of one variable, put back together from Pull's chunks.
std::string PullOne(const VariableStore& store, const JobRef& job,
                    const std::string& name, int64_t* version = nullptr) {
  absl::StatusOr<std::vector<v1::PullResponse>> messages =
      store.Pull(job, {name}, 1 << 20);
  EXPECT_TRUE(messages.ok()) << messages.status();
  std::string value;
  if (!messages.ok()) return value;
  for (const auto& message : *messages) {
    for (const auto& chunk : message.chunks()) {
      value.resize(chunk.total_bytes());
      std::memcpy(value.data() + chunk.offset(), chunk.data().data(),
                  chunk.data().size());
      if (version != nullptr) *version = chunk.version();
    }
  }
  return value;
}

TEST(VariableStoreTest, CreateIsIdempotentAndKeepsValues) {
  VariableStore store({.shard_id = 2});
  v1::PsVariableSpec w = Sgd(Spec("w", {2}), 1.0);
  w.set_initial(Bytes<float>({1, 2}));
  EXPECT_EQ(*store.Create("job-a", 1, List({w})), 1);
  ASSERT_TRUE(
      test_util::Push(store, "job-a", "worker:0", "w", Bytes<float>({1, 1}))
          .ok());

  // Another worker's init (and a restart's) declares it again: no change.
  EXPECT_EQ(*store.Create("job-a", 1, List({w, Spec("b", {3})})), 1);
  int64_t version = 0;
  EXPECT_THAT(Values<float>(PullOne(store, "job-a", "w", &version)),
              ElementsAre(0, 1));
  EXPECT_EQ(version, 1);
  EXPECT_THAT(Values<float>(PullOne(store, "job-a", "b")),
              ElementsAre(0, 0, 0));
  EXPECT_EQ(store.updates(), 1);

  v1::PsInfo info;
  store.FillInfo(&info);
  EXPECT_EQ(info.job_id(), "job-a");
  EXPECT_EQ(info.num_variables(), 2);
  EXPECT_EQ(info.variable_bytes(), 8 + 12);
  EXPECT_EQ(info.updates(), 1);
  ASSERT_EQ(info.variables_size(), 2);
  EXPECT_EQ(info.variables(1).name(), "w");
  EXPECT_EQ(info.variables(1).updates(), 1);
  EXPECT_THAT(info.variables(1).shape(), ElementsAre(2));
}

TEST(VariableStoreTest, ListGivesTheJobsSpecsWithoutInitialValues) {
  VariableStore store;
  v1::PsVariableSpec w = Spec("w", {2});
  w.set_initial(std::string(8, '\1'));
  ASSERT_TRUE(store.Create("job-a", 1, List({w, Spec("b", {3})})).ok());
  absl::StatusOr<std::vector<v1::PsVariableSpec>> listed = store.List("job-a");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].name(), "b");
  EXPECT_EQ((*listed)[1].name(), "w");
  EXPECT_TRUE((*listed)[1].initial().empty());
  // Another job's variables are not listed as this one's.
  absl::StatusOr<std::vector<v1::PsVariableSpec>> other = store.List("job-b");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(other.status().message().find("job-a"), std::string::npos);
}

TEST(VariableStoreTest, AMismatchedRedeclarationIsRefusedByName) {
  VariableStore store;
  ASSERT_TRUE(store.Create("job", 1, List({Spec("w", {8, 16})})).ok());
  absl::StatusOr<int> created =
      store.Create("job", 1, List({Spec("w", {8, 16}, v1::PS_FLOAT64)}));
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(created.status().message()),
              HasSubstr("variable 'w' exists on ps shard 0 with shape [8,16] "
                        "float32"));
  EXPECT_THAT(std::string(created.status().message()),
              HasSubstr("[8,16] float64"));
  created = store.Create("job", 1, List({Spec("w", {16, 8})}));
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  // Nothing of a refused request is created.
  created = store.Create("job", 1, List({Spec("new", {1}), Spec("w", {4})}));
  EXPECT_FALSE(created.ok());
  EXPECT_EQ(store.Layout("job", "new").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(VariableStoreTest, MalformedSpecsAreRefused) {
  VariableStore store;
  auto refused = [&](v1::PsVariableSpec spec, const std::string& expected) {
    absl::StatusOr<int> created = store.Create("job", 1, List({spec}));
    EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument)
        << expected;
    EXPECT_THAT(std::string(created.status().message()), HasSubstr(expected));
  };
  refused(Spec("", {1}), "no name");
  refused(Spec("w", {2, 0}), "positive dimensions");
  refused(Spec("w", {-1}), "positive dimensions");
  refused(Spec("w", {2}, v1::PS_DTYPE_UNSPECIFIED), "dtype is required");
  refused(Spec("w", {2}, static_cast<v1::PsDType>(99)), "unknown dtype 99");
  refused(Spec("w", std::vector<int64_t>(255, 1)),
          "shape has 255 dimensions; at most 254");
  v1::PsVariableSpec short_initial = Spec("w", {4});
  short_initial.set_initial(std::string(12, '\0'));
  refused(short_initial, "initial has 12 bytes; shape [4] float32 has 16");
  refused(Sgd(Spec("w", {4}), -0.5), "learning_rate");
  v1::PsVariableSpec aggregated_sgd = Sgd(Spec("w", {4}), 0.5);
  aggregated_sgd.set_aggregation(v1::PS_AGGREGATION_SUM);
  refused(aggregated_sgd, "takes no optimizer");
  refused(Sgd(Spec("w", {4}, v1::PS_INT32), 0.5), "float");
  absl::StatusOr<int> twice =
      store.Create("job", 1, List({Spec("w", {1}), Spec("w", {1})}));
  EXPECT_THAT(std::string(twice.status().message()), HasSubstr("twice"));
  EXPECT_EQ(store.Create("", 1, List({Spec("w", {1})})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(VariableStoreTest, ANewerJobReplacesTheOlderOne) {
  VariableStore store({.shard_id = 1});
  ASSERT_TRUE(store.Create("old", 1, List({Spec("w", {4})})).ok());
  ASSERT_TRUE(
      test_util::Push(store, "old", "", "w", Bytes<float>({1, 2, 3, 4})).ok());

  EXPECT_EQ(*store.Create("new", 2, List({Spec("v", {2})})), 1);
  EXPECT_EQ(store.Layout("new", "w").status().code(),
            absl::StatusCode::kNotFound);
  // The old job is refused by name, for reads, writes and creates.
  absl::Status pull = store.Pull("old", {"w"}, 1024).status();
  EXPECT_EQ(pull.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(pull.message()), HasSubstr("'new'"));
  EXPECT_THAT(std::string(pull.message()), HasSubstr("'old'"));
  EXPECT_EQ(test_util::Push(store, "old", "", "v", Bytes<float>({1, 2})).code(),
            absl::StatusCode::kPermissionDenied);
  absl::StatusOr<int> stale = store.Create("old", 1, List({Spec("w", {4})}));
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(stale.status().message()),
              HasSubstr("older than job 'new'"));
  EXPECT_EQ(store.Create("other", 2, List({Spec("w", {4})})).status().code(),
            absl::StatusCode::kPermissionDenied);

  // The shard's update count spans jobs.
  EXPECT_EQ(store.updates(), 1);
  v1::PsInfo info;
  store.FillInfo(&info);
  EXPECT_EQ(info.job_id(), "new");
  EXPECT_EQ(info.num_variables(), 1);
}

TEST(VariableStoreTest, AnotherClustersJobOfTheSameIdGetsNoneOfItsVariables) {
  // A shard outlives its coordinator's state; the new cluster's job ids
  // start at 1 again.
  const v1::PsVariableSpec w = Sgd(Spec("w", {2}), 1.0);
  VariableStore first({.shard_id = 0});
  ASSERT_TRUE(first.Create("1", 1, List({w}), "uid-a").ok());
  ASSERT_TRUE(test_util::Push(first, "1", "", "w", Bytes<float>({1, 2})).ok());
  VariableStore store({.shard_id = 0});
  int64_t generation = 0;
  ASSERT_TRUE(store.Restore(first.Capture(&generation)).ok());

  // The same job, after the shard restarted: its values are kept.
  EXPECT_EQ(*store.Create("1", 1, List({w}), "uid-a"), 0);
  EXPECT_THAT(Values<float>(PullOne(store, "1", "w")), ElementsAre(-1, -2));

  EXPECT_EQ(*store.Create("1", 1, List({w}), "uid-b"), 1);
  EXPECT_THAT(Values<float>(PullOne(store, "1", "w")), ElementsAre(0, 0));
  // A client that does not say which job it is matches the owner.
  EXPECT_EQ(*store.Create("1", 1, List({w})), 0);
  EXPECT_EQ(store.Capture(&generation).job_uid(), "uid-b");

  // The earlier job's workers, still running, neither update nor read the
  // new owner's variables.
  const JobRef earlier{"1", "uid-a"};
  const absl::Status pushed =
      test_util::Push(store, earlier, "worker:0", "w", Bytes<float>({5, 5}));
  EXPECT_EQ(pushed.code(), absl::StatusCode::kPermissionDenied) << pushed;
  EXPECT_THAT(std::string(pushed.message()),
              HasSubstr("variable 'w': ps shard 0 holds the variables of job "
                        "'1' of uid uid-b, not of this job '1' of uid uid-a"));
  EXPECT_EQ(store.Pull(earlier, {"w"}, 1 << 20).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store.List(earlier).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(Values<float>(PullOne(store, "1", "w")), ElementsAre(0, 0));
  ASSERT_TRUE(test_util::Push(store, JobRef{"1", "uid-b"}, "worker:0", "w",
                              Bytes<float>({1, 1}))
                  .ok());
  EXPECT_THAT(Values<float>(PullOne(store, "1", "w")), ElementsAre(-1, -1));
}

TEST(VariableStoreTest, AnotherClustersJobReplacesTheOwnerWhateverItsId) {
  // The old cluster reached job 3; the new one's ids start at 1 again.
  const v1::PsVariableSpec w = Sgd(Spec("w", {2}), 1.0);
  VariableStore first({.shard_id = 0});
  ASSERT_TRUE(first.Create("3", 3, List({w}), "uid-a", "cluster-a").ok());
  ASSERT_TRUE(test_util::Push(first, "3", "", "w", Bytes<float>({1, 2})).ok());
  VariableStore store({.shard_id = 0});
  int64_t generation = 0;
  ASSERT_TRUE(store.Restore(first.Capture(&generation)).ok());

  // Within the old cluster, an older job is still refused.
  EXPECT_EQ(
      store.Create("2", 2, List({w}), "uid-x", "cluster-a").status().code(),
      absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(*store.Create("1", 1, List({w}), "uid-b", "cluster-b"), 1);
  EXPECT_THAT(Values<float>(PullOne(store, "1", "w")), ElementsAre(0, 0));
  const v1::PsSnapshot owner = store.Capture(&generation);
  EXPECT_EQ(owner.job_id(), "1");
  EXPECT_EQ(owner.cluster_uid(), "cluster-b");
  // And within the new one, the order holds again.
  EXPECT_EQ(*store.Create("2", 2, List({w}), "uid-c", "cluster-b"), 1);
  EXPECT_EQ(
      store.Create("1", 1, List({w}), "uid-b", "cluster-b").status().code(),
      absl::StatusCode::kPermissionDenied);
}

TEST(VariableStoreTest, AShardRestoredWithoutAUidLearnsItFromItsOwner) {
  const v1::PsVariableSpec w = Sgd(Spec("w", {2}), 1.0);
  VariableStore first({.shard_id = 0});
  ASSERT_TRUE(first.Create("1", 1, List({w})).ok());
  ASSERT_TRUE(test_util::Push(first, "1", "", "w", Bytes<float>({1, 2})).ok());
  VariableStore store({.shard_id = 0});
  int64_t generation = 0;
  ASSERT_TRUE(store.Restore(first.Capture(&generation)).ok());
  const int64_t before = store.generation();
  EXPECT_EQ(*store.Create("1", 1, List({w}), "uid-a"), 0);
  EXPECT_THAT(Values<float>(PullOne(store, "1", "w")), ElementsAre(-1, -2));
  EXPECT_GT(store.generation(), before) << "the uid is for the next snapshot";
  EXPECT_EQ(store.Capture(&generation).job_uid(), "uid-a");
}

TEST(VariableStoreTest, PullErrorsNameTheVariableAndTheShard) {
  VariableStore store({.shard_id = 3});
  ASSERT_TRUE(store.Create("job", 1, List({Spec("w", {1})})).ok());
  absl::Status status = store.Pull("job", {"w", "x"}, 1024).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "variable 'x' is not on ps shard 3");
}

TEST(VariableStoreTest, APullNamingAVariableTwiceIsRefused) {
  // Each name is copied into the reply: 10000 of one large variable would
  // take 10000 times its memory.
  VariableStore store;
  ASSERT_TRUE(store.Create("job", 1, List({Spec("w", {4})})).ok());
  absl::Status status = store.Pull("job", {"w", "w"}, 1024).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "the pull names variable 'w' twice");
}

// a and b (40 bytes each), big (400), c (20), all float32.
absl::StatusOr<int> CreateABBigC(VariableStore& store) {
  return store.Create("job", 1,
                      List({Spec("a", {10}), Spec("b", {10}),
                            Spec("big", {100}), Spec("c", {5})}));
}

TEST(VariableStoreTest, PullBatchesSmallVariablesAndSplitsLargeOnes) {
  VariableStore store;
  ASSERT_TRUE(CreateABBigC(store).ok());
  // 40 + 40 bytes share a message of at most 128; big (400) takes four
  // chunks of 128, 128, 128, 16; c (20) joins big's last.
  absl::StatusOr<std::vector<v1::PullResponse>> messages =
      store.Pull("job", {"a", "b", "big", "c"}, 128);
  ASSERT_TRUE(messages.ok()) << messages.status();
  std::vector<std::vector<std::string>> layout;
  for (const auto& message : *messages) {
    int64_t bytes = 0;
    std::vector<std::string> chunks;
    for (const auto& chunk : message.chunks()) {
      chunks.push_back(absl::StrCat(chunk.name(), "@", chunk.offset(), "+",
                                    chunk.data().size(), "/",
                                    chunk.total_bytes()));
      bytes += chunk.data().size();
    }
    EXPECT_LE(bytes, 128);
    layout.push_back(chunks);
  }
  EXPECT_THAT(layout, ElementsAre(ElementsAre("a@0+40/40", "b@0+40/40"),
                                  ElementsAre("big@0+128/400"),
                                  ElementsAre("big@128+128/400"),
                                  ElementsAre("big@256+128/400"),
                                  ElementsAre("big@384+16/400", "c@0+20/20")));
}

// A stream copies one batch at a time: each ends with the variable that
// takes it to the batch size, and the first checks every name.
TEST(VariableStoreTest, PullInBatchesEndsEachAtTheBatchSize) {
  VariableStore store;
  ASSERT_TRUE(CreateABBigC(store).ok());
  auto names = [](const std::vector<v1::PullResponse>& messages) {
    std::vector<std::string> out;
    for (const auto& message : messages) {
      for (const auto& chunk : message.chunks()) {
        if (chunk.offset() == 0) out.push_back(chunk.name());
      }
    }
    return out;
  };
  const std::vector<std::string> all = {"a", "b", "big", "c"};
  size_t next = 0;
  absl::StatusOr<std::vector<v1::PullResponse>> batch =
      store.Pull("job", all, 128, &next, /*batch_bytes=*/60);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_THAT(names(*batch), ElementsAre("a", "b"));  // 40, then 80 >= 60
  EXPECT_EQ(next, 2u);
  batch = store.Pull("job", all, 128, &next, 60);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_THAT(names(*batch), ElementsAre("big"));
  EXPECT_EQ(next, 3u);
  batch = store.Pull("job", all, 128, &next, 60);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_THAT(names(*batch), ElementsAre("c"));
  EXPECT_EQ(next, 4u);

  next = 0;
  EXPECT_EQ(
      store.Pull("job", {"a", "b", "missing"}, 128, &next, 60).status().code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(next, 0u);
}

TEST(VariableStoreTest, WorkersValuesCountAgainstTheShardLimit) {
  // 400 bytes of value and 523 of keeping; room for one worker's copy
  // (and the name it is kept under).
  VariableStore store({.max_shard_bytes = 1500});
  v1::PsVariableSpec sum = Spec("sum", {100});
  sum.set_aggregation(v1::PS_AGGREGATION_SUM);
  ASSERT_TRUE(store.Create("job", 1, List({sum})).ok());
  const std::string value = Bytes<float>(std::vector<float>(100, 1));
  ASSERT_TRUE(test_util::Push(store, "job", "worker:0", "sum", value).ok());
  // Its next value replaces the first: no more room is taken.
  ASSERT_TRUE(test_util::Push(store, "job", "worker:0", "sum", value).ok());
  const absl::Status refused =
      test_util::Push(store, "job", "worker:1", "sum", value);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("worker 'worker:1''s value"));
  // A name is kept with each value: a long one is refused, not counted.
  const absl::Status long_name =
      test_util::Push(store, "job", std::string(300, 'w'), "sum", value);
  EXPECT_EQ(long_name.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(long_name.message(),
              HasSubstr("names a worker of 300 bytes; at most 256"));
  // A create counts the workers' values too: without worker:0's, another
  // variable of one element and its keeping would fit.
  const absl::Status create =
      store.Create("job", 1, List({Spec("b", {1})})).status();
  EXPECT_EQ(create.code(), absl::StatusCode::kResourceExhausted) << create;
}

TEST(VariableStoreTest, AShapeCountsAgainstTheShardLimit) {
  // A shape of 200 ones holds 4 bytes of value, and 1600 of dimensions.
  VariableStore store({.max_shard_bytes = 3000});
  const std::vector<int64_t> ones(200, 1);
  EXPECT_EQ(store.Create("job", 1, List({Spec("a", ones), Spec("b", ones)}))
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(store.Create("job", 1, List({Spec("a", ones)})).ok());
}

TEST(VariableStoreTest, AggregatedVariablesCombineTheWorkersLatestValues) {
  VariableStore store;
  v1::PsVariableSpec sum = Spec("sum", {2});
  sum.set_aggregation(v1::PS_AGGREGATION_SUM);
  sum.set_initial(Bytes<float>({9, 9}));
  v1::PsVariableSpec mean = Spec("mean", {2}, v1::PS_INT64);
  mean.set_aggregation(v1::PS_AGGREGATION_MEAN);
  v1::PsVariableSpec first = Spec("first", {1}, v1::PS_FLOAT64);
  first.set_aggregation(v1::PS_AGGREGATION_ONLY_FIRST_WORKER);
  ASSERT_TRUE(store.Create("job", 1, List({sum, mean, first})).ok());

  // Before any push: the initial value.
  EXPECT_THAT(Values<float>(PullOne(store, "job", "sum")), ElementsAre(9, 9));

  ASSERT_TRUE(
      test_util::Push(store, "job", "worker:1", "sum", Bytes<float>({1, 2}))
          .ok());
  ASSERT_TRUE(
      test_util::Push(store, "job", "worker:0", "sum", Bytes<float>({10, 20}))
          .ok());
  // A worker's later push replaces its earlier value.
  ASSERT_TRUE(
      test_util::Push(store, "job", "worker:1", "sum", Bytes<float>({3, 4}))
          .ok());
  int64_t version = 0;
  EXPECT_THAT(Values<float>(PullOne(store, "job", "sum", &version)),
              ElementsAre(13, 24));
  EXPECT_EQ(version, 3);

  ASSERT_TRUE(test_util::Push(store, "job", "worker:0", "mean",
                              Bytes<int64_t>({10, -3}))
                  .ok());
  ASSERT_TRUE(test_util::Push(store, "job", "worker:1", "mean",
                              Bytes<int64_t>({20, -4}))
                  .ok());
  EXPECT_THAT(Values<int64_t>(PullOne(store, "job", "mean")),
              ElementsAre(15, -3));

  ASSERT_TRUE(
      test_util::Push(store, "job", "worker:2", "first", Bytes<double>({2}))
          .ok());
  ASSERT_TRUE(
      test_util::Push(store, "job", "chief:0", "first", Bytes<double>({1.5}))
          .ok());
  EXPECT_THAT(Values<double>(PullOne(store, "job", "first")), ElementsAre(1.5));

  const absl::Status anonymous =
      test_util::Push(store, "job", "", "sum", Bytes<float>({1, 1}));
  EXPECT_EQ(anonymous.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(anonymous.message()), HasSubstr("names no worker"));
}

TEST(VariableStoreTest, ApplyRefusesTheWrongSize) {
  VariableStore store;
  ASSERT_TRUE(store.Create("job", 1, List({Spec("w", {8, 16})})).ok());
  const absl::Status status =
      test_util::Push(store, "job", "", "w", std::string(400, '\0'));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "push of 'w': 400 bytes, the variable has 512 (shape [8,16] "
            "float32)");
}

TEST(VariableStoreTest, ConcurrentPushesToOneVariableAllApply) {
  VariableStore store;
  ASSERT_TRUE(store.Create("job", 1, List({Sgd(Spec("w", {64}), 1.0)})).ok());
  const std::string gradient = Bytes(std::vector<float>(64, -1.0f));
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&] {
      for (int i = 0; i < 250; ++i) {
        EXPECT_TRUE(test_util::Push(store, "job", "", "w", gradient).ok());
      }
    });
  }
  for (auto& worker : workers) worker.join();
  // Every update applied whole: each element moved by exactly 1000.
  EXPECT_THAT(Values<float>(PullOne(store, "job", "w")),
              ::testing::Each(1000.0f));
  EXPECT_EQ(store.updates(), 1000);
}

TEST(VariableStoreTest, CaptureAndRestoreRoundTrip) {
  VariableStore store({.shard_id = 1});
  v1::PsVariableSpec adam = Spec("adam", {3});
  adam.mutable_optimizer()->set_kind(v1::PsOptimizer::ADAM);
  adam.mutable_optimizer()->set_learning_rate(0.1);
  v1::PsVariableSpec agg = Spec("agg", {1});
  agg.set_aggregation(v1::PS_AGGREGATION_MEAN);
  ASSERT_TRUE(store.Create("job", 7, List({adam, agg})).ok());
  ASSERT_TRUE(
      test_util::Push(store, "job", "", "adam", Bytes<float>({1, 2, 3})).ok());
  ASSERT_TRUE(
      test_util::Push(store, "job", "worker:0", "agg", Bytes<float>({4})).ok());

  int64_t generation = 0;
  const v1::PsSnapshot snapshot = store.Capture(&generation);
  EXPECT_EQ(generation, store.generation());
  EXPECT_EQ(snapshot.updates(), 2);

  VariableStore restored({.shard_id = 1});
  ASSERT_TRUE(restored.Restore(snapshot).ok());
  EXPECT_EQ(restored.restored_updates(), 2);
  EXPECT_EQ(restored.updates(), 2);
  EXPECT_EQ(PullOne(restored, "job", "adam"), PullOne(store, "job", "adam"));
  EXPECT_EQ(PullOne(restored, "job", "agg"), PullOne(store, "job", "agg"));
  // The optimizer state came along: the next step matches the original's.
  ASSERT_TRUE(
      test_util::Push(store, "job", "", "adam", Bytes<float>({1, 1, 1})).ok());
  ASSERT_TRUE(
      test_util::Push(restored, "job", "", "adam", Bytes<float>({1, 1, 1}))
          .ok());
  EXPECT_EQ(PullOne(restored, "job", "adam"), PullOne(store, "job", "adam"));
  // The sequence came along too.
  EXPECT_EQ(restored.Create("older", 6, List({})).status().code(),
            absl::StatusCode::kPermissionDenied);

  VariableStore other_shard({.shard_id = 0});
  EXPECT_EQ(other_shard.Restore(snapshot).code(),
            absl::StatusCode::kFailedPrecondition);
  v1::PsSnapshot broken = snapshot;
  broken.mutable_variables(0)->mutable_value()->pop_back();
  EXPECT_EQ(restored.Restore(broken).code(), absl::StatusCode::kDataLoss);
}

TEST(VariableStoreTest, ACaptureHoldsEveryPushItsGenerationCounts) {
  VariableStore store({.shard_id = 0});
  ASSERT_TRUE(store.Create("job", 1, List({Spec("w", {1 << 20})})).ok());
  const int64_t base_updates = store.updates();
  const int64_t base_generation = store.generation();
  std::atomic<bool> done{false};
  std::thread pusher([&] {
    while (!done.load()) store.CountPush();
  });
  for (int i = 0; i < 200; ++i) {
    int64_t generation = 0;
    const v1::PsSnapshot snapshot = store.Capture(&generation);
    // Only counts move the generation here: each it shows is in the file.
    ASSERT_GE(snapshot.updates() - base_updates, generation - base_generation)
        << "capture " << i;
  }
  done = true;
  pusher.join();
}

TEST(VariableStoreTest, ManyTinyVariablesCountTheirKeepingAndAreListedInPart) {
  VariableStore store({.max_shard_bytes = 1 << 20});
  Specs specs;
  for (int i = 0; i < 4096; ++i) {
    *specs.Add() = Spec(absl::StrFormat("v%04d", i), {1});
  }
  // 4096 x 4 bytes of values would fit 256 times over.
  const absl::Status refused = store.Create("job", 1, specs).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("would hold 2166784 bytes"));

  specs.DeleteSubrange(1000, specs.size() - 1000);
  ASSERT_TRUE(store.Create("job", 1, specs).ok());
  v1::PsInfo info;
  store.FillInfo(&info);
  EXPECT_EQ(info.num_variables(), 1000);
  EXPECT_EQ(info.variable_bytes(), 4000);
  ASSERT_EQ(info.variables_size(), VariableStore::kMaxListedVariables);
  EXPECT_EQ(info.variables(0).name(), "v0000");
  EXPECT_EQ(info.variables(255).name(), "v0255");
}

TEST(VariableStoreTest, TheShardLimitBoundsCreates) {
  VariableStore store({.max_shard_bytes = 1000});
  v1::PsVariableSpec adam = Spec("w", {100});
  adam.mutable_optimizer()->set_kind(v1::PsOptimizer::ADAM);
  adam.mutable_optimizer()->set_learning_rate(0.1);
  // 400 bytes of value plus 800 of m and v.
  EXPECT_EQ(store.Create("job", 1, List({adam})).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(store.Create("job", 1, List({Spec("w", {100})})).ok());
}

}  // namespace
}  // namespace cohort::ps
