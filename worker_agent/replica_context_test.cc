#include "worker_agent/replica_context.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <thread>

#include "collective/algorithmic_communicator.h"
#include "collective/transports/local_transport.h"
#include "common/checkpoint.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace cohort::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// `n` replicas as threads of this process, over a LocalHub: the agent's own
// wiring for one node.
class Replicas {
 public:
  // `central`: the job uses central storage (one copy of ON_WRITE state).
  Replicas(int n, std::string checkpoint_dir, bool central = false,
           v1::EarlyStopping early_stopping = {},
           absl::Duration timeout = absl::Seconds(10))
      : hub_(n), central_(n) {
    job_.steps = 10;
    job_.early_stopping = std::move(early_stopping);
    job_.num_replicas = n;
    job_.checkpoint_dir = std::move(checkpoint_dir);
    job_.collective_timeout = timeout;
    for (int r = 0; r < n; ++r) {
      comms_.push_back(std::make_unique<collective::AlgorithmicCommunicator>(
          hub_.Connect(r),
          collective::CommunicatorOptions{.timeout = timeout}));
      contexts_.push_back(std::make_unique<ReplicaContextImpl>(
          &job_, r, r, Device{}, comms_.back().get(),
          central ? &central_ : nullptr));
    }
  }

  // One replica per agent, each agent keeping its copies in its own dir of
  // `agent_dirs`: the wiring of a job on several hosts. `checkpoint_step`:
  // the newest checkpoint the coordinator knows the job wrote.
  explicit Replicas(const std::vector<std::string>& agent_dirs,
                    int64_t checkpoint_step = 0)
      : hub_(static_cast<int>(agent_dirs.size())),
        central_(static_cast<int>(agent_dirs.size())),
        agent_jobs_(agent_dirs.size()) {
    const int n = static_cast<int>(agent_dirs.size());
    for (int r = 0; r < n; ++r) {
      JobInfo& job = agent_jobs_[r];
      job.steps = 10;
      job.num_replicas = n;
      job.checkpoint_dir = agent_dirs[r];
      job.checkpoint_step = checkpoint_step;
      job.collective_timeout = absl::Seconds(10);
      comms_.push_back(std::make_unique<collective::AlgorithmicCommunicator>(
          hub_.Connect(r),
          collective::CommunicatorOptions{.timeout = job.collective_timeout}));
      contexts_.push_back(std::make_unique<ReplicaContextImpl>(
          &job, r, /*local_index=*/0, Device{}, comms_.back().get()));
    }
  }

  // Runs `fn` on every replica at once; the statuses by replica.
  std::vector<absl::Status> Run(
      const std::function<absl::Status(ReplicaContextImpl&)>& fn) {
    std::vector<absl::Status> statuses(contexts_.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < contexts_.size(); ++r) {
      threads.emplace_back([&, r] { statuses[r] = fn(*contexts_[r]); });
    }
    for (std::thread& t : threads) t.join();
    return statuses;
  }

 private:
  JobInfo job_;
  collective::LocalHub hub_;
  CentralStorage central_;
  std::vector<JobInfo> agent_jobs_;  // sized once: contexts point into it
  std::vector<std::unique_ptr<collective::Communicator>> comms_;
  std::vector<std::unique_ptr<ReplicaContextImpl>> contexts_;
};

void ExpectAllOk(const std::vector<absl::Status>& statuses) {
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

// Each replica starts its variables from its own id, as an init function
// with per-replica randomness would.
absl::Status CreateState(ReplicaContextImpl& ctx, Optimizer** optimizer) {
  const double w0[2] = {1.0 + ctx.replica_id_in_sync_group(), 2.0};
  absl::StatusOr<Variable*> w = ctx.create_variable(
      {.name = "w", .shape = {2}, .dtype = DType::kFloat64}, w0);
  if (!w.ok()) return w.status();
  const double count = 10.0 * (ctx.replica_id_in_sync_group() + 1);
  for (auto [name, aggregation] : {std::pair{"sum", Aggregation::kSum},
                                   {"mean", Aggregation::kMean},
                                   {"first", Aggregation::kOnlyFirstReplica}}) {
    absl::StatusOr<Variable*> v =
        ctx.create_variable({.name = name,
                             .shape = {1},
                             .dtype = DType::kFloat64,
                             .sync = VariableSync::kOnRead,
                             .aggregation = aggregation},
                            &count);
    if (!v.ok()) return v.status();
  }
  absl::StatusOr<Optimizer*> opt = ctx.create_optimizer(
      {.kind = OptimizerKind::kMomentum, .learning_rate = 0.5}, {*w});
  if (!opt.ok()) return opt.status();
  *optimizer = *opt;
  return absl::OkStatus();
}

// CreateState, then RestoreOrSync: the step the replica starts from.
absl::StatusOr<int64_t> StartState(ReplicaContextImpl& ctx,
                                   Optimizer** optimizer) {
  if (absl::Status s = CreateState(ctx, optimizer); !s.ok()) return s;
  return ctx.RestoreOrSync();
}

// StartState, then a checkpoint of that state at `step`.
absl::Status StartAndCheckpoint(ReplicaContextImpl& ctx, int64_t step) {
  Optimizer* optimizer = nullptr;
  if (absl::StatusOr<int64_t> start = StartState(ctx, &optimizer);
      !start.ok()) {
    return start.status();
  }
  return ctx.SaveCheckpoint(step);
}

// StartState where StartAndCheckpoint(…, step) saved: it resumes there,
// with replica 0's starting values.
absl::Status StartRestored(ReplicaContextImpl& ctx, int64_t step) {
  Optimizer* optimizer = nullptr;
  absl::StatusOr<int64_t> start = StartState(ctx, &optimizer);
  if (!start.ok()) return start.status();
  EXPECT_EQ(*start, step);
  EXPECT_EQ(ctx.find_variable("w")->data<double>()[0], 1.0);
  return absl::OkStatus();
}

double Read(ReplicaContextImpl& ctx, const char* name) {
  double value = 0;
  EXPECT_TRUE(ctx.read_value(*ctx.find_variable(name), &value).ok());
  return value;
}

// Names travel in protobuf strings and JSON: a name that is not UTF-8, or
// holds a control character, is refused where it is made.
TEST(ReplicaContextTest, VariableNamesMustBePrintableUtf8) {
  Replicas replicas(1, "");
  ExpectAllOk(replicas.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
    const double zero[1] = {0};
    for (const char* name : {"", "w\xff", "a\nb"}) {
      absl::StatusOr<Variable*> v = ctx.create_variable(
          {.name = name, .shape = {1}, .dtype = DType::kFloat64}, zero);
      EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument)
          << v.status();
    }
    return ctx
        .create_variable(
            {.name = "dense/\xc3\xa4", .shape = {1}, .dtype = DType::kFloat64},
            zero)
        .status();
  }));
}

TEST(ReplicaContextTest, ColocateWithMustNameAVariableCreatedBefore) {
  Replicas replicas(1, "");
  ExpectAllOk(replicas.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
    absl::StatusOr<Variable*> early = ctx.create_variable(
        {.name = "slot", .shape = {2}, .colocate_with = "w"}, nullptr);
    EXPECT_EQ(early.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(early.status().message(),
                HasSubstr("\"slot\": colocate_with names \"w\", which is not "
                          "a variable created before it"));
    if (absl::StatusOr<Variable*> w =
            ctx.create_variable({.name = "w", .shape = {2}}, nullptr);
        !w.ok()) {
      return w.status();
    }
    return ctx
        .create_variable({.name = "slot", .shape = {2}, .colocate_with = "w"},
                         nullptr)
        .status();
  }));
}

TEST(ReplicaContextTest, StartEqualTrainEqualAndAggregateOnRead) {
  Replicas replicas(3, "");
  std::vector<std::vector<double>> w(3);
  std::vector<std::vector<double>> aggregates(3);
  ExpectAllOk(replicas.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
    Optimizer* optimizer = nullptr;
    absl::StatusOr<int64_t> start = StartState(ctx, &optimizer);
    if (!start.ok()) return start.status();
    EXPECT_EQ(*start, 0);
    // ON_READ variables start from replica 0's value (10) too; then each
    // replica counts on its own, to 10, 20 and 30.
    for (const char* name : {"sum", "mean", "first"}) {
      double* value = ctx.find_variable(name)->data<double>();
      EXPECT_EQ(*value, 10.0)
          << name << " on " << ctx.replica_id_in_sync_group();
      *value += 10.0 * ctx.replica_id_in_sync_group();
    }
    // Gradients differ per replica; the update uses their mean (2, 4).
    double grad[2] = {1.0 + ctx.replica_id_in_sync_group(),
                      2.0 * (1 + ctx.replica_id_in_sync_group())};
    if (absl::Status s = optimizer->apply_gradients(
            std::vector<Tensor>{Tensor{grad, 2, DType::kFloat64}});
        !s.ok()) {
      return s;
    }
    double* data = ctx.find_variable("w")->data<double>();
    w[ctx.replica_id_in_sync_group()] = {data[0], data[1]};
    aggregates[ctx.replica_id_in_sync_group()] = {
        Read(ctx, "sum"), Read(ctx, "mean"), Read(ctx, "first")};
    return absl::OkStatus();
  }));
  // Replica 0's start (1, 2), momentum update m = -0.5 * (2, 4).
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(w[r], ElementsAre(0.0, 0.0)) << r;
    EXPECT_THAT(aggregates[r], ElementsAre(60.0, 20.0, 10.0)) << r;
  }
}

TEST(ReplicaContextTest, MergeCallRunsOnceOnReplicaZeroAndHandsBackItsResult) {
  Replicas replicas(4, "");
  std::atomic<int> runs{0};
  std::vector<std::string> results(4);
  ExpectAllOk(replicas.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
    const int me = ctx.replica_id_in_sync_group();
    int32_t mine = 100 + me;
    absl::StatusOr<std::string> result = ctx.merge_call(
        [&](const PerReplica& values, std::string* out) -> absl::Status {
          ++runs;
          EXPECT_EQ(me, 0) << "the merge function ran on replica " << me;
          int sum = 0;
          for (int r = 0; r < 4; ++r) sum += *values.as<int32_t>(0, r);
          *out = "sum=" + std::to_string(sum);
          return absl::OkStatus();
        },
        std::vector<Tensor>{Tensor{&mine, 1, DType::kInt32}});
    if (!result.ok()) return result.status();
    results[me] = *result;
    return absl::OkStatus();
  }));
  EXPECT_EQ(runs.load(), 1);
  EXPECT_THAT(results, ElementsAre("sum=406", "sum=406", "sum=406", "sum=406"));

  const std::vector<absl::Status> failed =
      replicas.Run([&](ReplicaContextImpl& ctx) {
        return ctx.merge_call(
            [](const PerReplica&) {
              return absl::InternalError("the merge found a NaN");
            },
            {});
      });
  for (const absl::Status& s : failed) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(s.message(), HasSubstr("the merge found a NaN"));
  }
}

TEST(ReplicaContextTest, ReduceGivesEveryReplicaTheSameValue) {
  Replicas replicas(3, "");
  std::vector<double> means(3), maxima(3);
  ExpectAllOk(replicas.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
    const int me = ctx.replica_id_in_sync_group();
    absl::StatusOr<double> mean = ctx.reduce(ReduceOp::kMean, 1.0 + me);
    if (!mean.ok()) return mean.status();
    absl::StatusOr<double> max = ctx.reduce(ReduceOp::kMax, 1.0 + me);
    if (!max.ok()) return max.status();
    means[me] = *mean;
    maxima[me] = *max;
    return absl::OkStatus();
  }));
  EXPECT_THAT(means, ElementsAre(2.0, 2.0, 2.0));
  EXPECT_THAT(maxima, ElementsAre(3.0, 3.0, 3.0));
}

TEST(ReplicaContextTest, EndStepReducesReportedMetricsAndAgreesToStop) {
  Replicas replicas(4, "");
  std::vector<StepEnd> first(4), second(4);
  std::vector<std::map<std::string, double>> metrics(4);
  ExpectAllOk(replicas.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
    const int me = ctx.replica_id_in_sync_group();
    ctx.set_step(0);
    ctx.report("loss", 1.0 + me, ReduceOp::kMean);
    ctx.report("worst", 1.0 + me, ReduceOp::kMax);
    ctx.report("seen", 10, ReduceOp::kSum);
    ctx.report("local", me);  // not reduced: each replica's own
    absl::StatusOr<StepEnd> end = ctx.EndStep();
    if (!end.ok()) return end.status();
    first[me] = *end;
    metrics[me] = ctx.last_metrics();
    ctx.set_step(1);
    if (me == 2) ctx.stop_training("the loss is low enough");
    end = ctx.EndStep();
    if (!end.ok()) return end.status();
    second[me] = *end;
    return absl::OkStatus();
  }));
  for (int r = 0; r < 4; ++r) {
    EXPECT_FALSE(first[r].stop) << r;
    EXPECT_EQ(metrics[r]["loss"], 2.5) << r;
    EXPECT_EQ(metrics[r]["worst"], 4.0) << r;
    EXPECT_EQ(metrics[r]["seen"], 40.0) << r;
    EXPECT_EQ(metrics[r]["local"], r) << r;
    EXPECT_TRUE(second[r].stop) << r;
    EXPECT_EQ(second[r].stopped_by, 2) << r;
  }
  EXPECT_EQ(second[2].reason,
            "replica 2 called stop_training: the loss is low enough");
  EXPECT_EQ(second[0].reason, "");
}

TEST(ReplicaContextTest, EndStepTellsEveryReplicaOfACheckpointOrALeaver) {
  Replicas replicas(4, "");
  std::vector<StepEnd> first(4), second(4);
  std::vector<std::map<std::string, double>> metrics(4);
  ExpectAllOk(replicas.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
    const int me = ctx.replica_id_in_sync_group();
    ctx.set_step(0);
    if (me == 2) ctx.want_checkpoint();
    absl::StatusOr<StepEnd> end = ctx.EndStep();
    if (!end.ok()) return end.status();
    first[me] = *end;
    ctx.set_step(1);
    if (me == 3 || me == 1) ctx.leave();
    ctx.report("loss", me, ReduceOp::kSum);  // still reduced beside the votes
    end = ctx.EndStep();
    if (!end.ok()) return end.status();
    second[me] = *end;
    metrics[me] = ctx.last_metrics();
    return absl::OkStatus();
  }));
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(first[r].checkpoint) << r;
    EXPECT_EQ(first[r].leaving, -1) << r;
    // A wish for a checkpoint lasts one step; leaving, until the end.
    EXPECT_FALSE(second[r].checkpoint) << r;
    EXPECT_EQ(second[r].leaving, 1) << r;
    EXPECT_FALSE(second[r].stop) << r;
    EXPECT_EQ(metrics[r]["loss"], 6.0) << r;
  }
}

TEST(ReplicaContextTest, EarlyStoppingRuleStopsEveryReplicaAtTheSameStep) {
  v1::EarlyStopping rule;
  rule.set_metric("loss");
  rule.set_target(0.5);
  Replicas replicas(2, "", false, rule);
  std::vector<int64_t> stopped_at(2, -1);
  std::vector<std::string> reasons(2);
  ExpectAllOk(replicas.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
    const int me = ctx.replica_id_in_sync_group();
    for (int64_t step = 0; step < 10; ++step) {
      ctx.set_step(step);
      // Replica 1's loss is always lower: only the mean decides.
      ctx.report("loss", (me == 0 ? 1.3 : 0.9) - 0.1 * step, ReduceOp::kMean);
      absl::StatusOr<StepEnd> end = ctx.EndStep();
      if (!end.ok()) return end.status();
      if (end->stop) {
        stopped_at[me] = step + 1;
        reasons[me] = end->reason;
        break;
      }
    }
    return absl::OkStatus();
  }));
  // Mean 1.1 - 0.1 * step reaches 0.5 at step 6 (7 steps done).
  EXPECT_THAT(stopped_at, ElementsAre(7, 7));
  EXPECT_THAT(reasons[0], HasSubstr("reached the target 0.5 at step 7"));
  EXPECT_EQ(reasons[0], reasons[1]);
}

TEST(ReplicaContextTest, LossReductionSumAddsTheReplicasGradients) {
  Replicas replicas(2, "");
  std::vector<double> w(2);
  std::vector<ReduceOp> reductions(2);
  ExpectAllOk(replicas.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
    const double zero = 0;
    absl::StatusOr<Variable*> v = ctx.create_variable(
        {.name = "w", .shape = {1}, .dtype = DType::kFloat64}, &zero);
    if (!v.ok()) return v.status();
    absl::StatusOr<Optimizer*> bad = ctx.create_optimizer(
        {.learning_rate = 1, .loss_reduction = ReduceOp::kMax}, {*v});
    EXPECT_THAT(bad.status().message(), HasSubstr("MEAN or SUM"));
    absl::StatusOr<Optimizer*> sgd = ctx.create_optimizer(
        {.learning_rate = 1, .loss_reduction = ReduceOp::kSum}, {*v});
    if (!sgd.ok()) return sgd.status();
    EXPECT_EQ(ctx.get_loss_reduction(), ReduceOp::kMean);
    double grad = 1.0 + ctx.replica_id_in_sync_group();
    if (absl::Status s = (*sgd)->apply_gradients(
            std::vector<Tensor>{Tensor{&grad, 1, DType::kFloat64}});
        !s.ok()) {
      return s;
    }
    w[ctx.replica_id_in_sync_group()] = *(*v)->data<double>();
    reductions[ctx.replica_id_in_sync_group()] = ctx.get_loss_reduction();
    return absl::OkStatus();
  }));
  // 0 - 1 * (1 + 2): the sum, not the mean.
  EXPECT_THAT(w, ElementsAre(-3.0, -3.0));
  EXPECT_THAT(reductions, ElementsAre(ReduceOp::kSum, ReduceOp::kSum));
}

TEST(ReplicaContextTest, CheckpointRestoresReplicaZerosStateEverywhere) {
  const std::string dir = ::testing::TempDir() + "/replica_ckpt";
  std::filesystem::remove_all(dir);
  {
    Replicas first(2, dir);
    ExpectAllOk(first.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
      Optimizer* optimizer = nullptr;
      if (absl::StatusOr<int64_t> start = StartState(ctx, &optimizer);
          !start.ok()) {
        return start.status();
      }
      // From replica 0's 10, each replica counts on its own: 10 and 20.
      for (const char* name : {"sum", "mean"}) {
        *ctx.find_variable(name)->data<double>() +=
            10.0 * ctx.replica_id_in_sync_group();
      }
      double grad[2] = {1, 1};
      if (absl::Status s = optimizer->apply_gradients(
              std::vector<Tensor>{Tensor{grad, 2, DType::kFloat64}});
          !s.ok()) {
        return s;
      }
      return ctx.SaveCheckpoint(7);
    }));
  }
  Replicas second(2, dir);
  ExpectAllOk(second.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
    Optimizer* optimizer = nullptr;
    absl::StatusOr<int64_t> start = StartState(ctx, &optimizer);
    if (!start.ok()) return start.status();
    EXPECT_EQ(*start, 7);
    const double* w = ctx.find_variable("w")->data<double>();
    EXPECT_EQ(w[0], 0.5);  // 1 - 0.5 * 1
    EXPECT_EQ(w[1], 1.5);
    // The saved sum (30) is carried by replica 0 alone, so it stays 30.
    const double own = *ctx.find_variable("sum")->data<double>();
    EXPECT_EQ(own, ctx.replica_id_in_sync_group() == 0 ? 30.0 : 0.0);
    EXPECT_EQ(Read(ctx, "sum"), 30.0);
    EXPECT_EQ(Read(ctx, "mean"), 15.0);
    return absl::OkStatus();
  }));
}

// A checkpoint that takes longer to read than the collective timeout (a
// slow disk; here a FIFO whose writer comes late) fails no collective of
// the replicas that wait for it.
TEST(ReplicaContextTest, ACheckpointSlowerToReadThanTheCollectiveTimeout) {
  // Rounds come every quarter of it: ample room for a busy machine.
  constexpr absl::Duration kTimeout = absl::Seconds(2);
  const std::string dir = ::testing::TempDir() + "/replica_slow_ckpt";
  std::filesystem::remove_all(dir);
  {
    Replicas first(2, dir, false, {}, kTimeout);
    ExpectAllOk(first.Run(
        [](ReplicaContextImpl& ctx) { return StartAndCheckpoint(ctx, 7); }));
  }
  const std::string data = dir + "/ckpt-7.data";
  absl::StatusOr<std::string> bytes = ReadFile(data);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_EQ(unlink(data.c_str()), 0);
  ASSERT_EQ(mkfifo(data.c_str(), 0600), 0);
  std::thread slow_disk([&] {
    absl::SleepFor(2 * kTimeout);
    // Non-blocking until the reader is there, so that this ends even if
    // it never comes.
    int fd = -1;
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (fd < 0 && absl::Now() < deadline) {
      fd = open(data.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) absl::SleepFor(absl::Milliseconds(10));
    }
    ASSERT_GE(fd, 0) << "the restore never opened the checkpoint";
    fcntl(fd, F_SETFL, 0);
    EXPECT_EQ(write(fd, bytes->data(), bytes->size()),
              static_cast<ssize_t>(bytes->size()));
    close(fd);
  });
  Replicas second(2, dir, false, {}, kTimeout);
  ExpectAllOk(second.Run(
      [](ReplicaContextImpl& ctx) { return StartRestored(ctx, 7); }));
  slow_disk.join();
}

// An agent whose record of its newest checkpoint is damaged, with no
// checkpoint left beside it, has no copy to offer: another agent's copy is
// restored, and the job does not fail for want of one.
TEST(ReplicaContextTest, AnAgentWhoseCheckpointRecordIsDamagedOffersNoCopy) {
  const std::string root = ::testing::TempDir() + "/replica_damaged_latest";
  std::filesystem::remove_all(root);
  const std::vector<std::string> dirs = {root + "/agent0", root + "/agent1"};
  {
    Replicas first(dirs);
    ExpectAllOk(first.Run(
        [](ReplicaContextImpl& ctx) { return StartAndCheckpoint(ctx, 7); }));
  }
  // Agent 1's checkpoints are gone, and its record of them is garbage.
  for (const auto& entry : std::filesystem::directory_iterator(dirs[1])) {
    std::filesystem::remove(entry.path());
  }
  ASSERT_TRUE(WriteFileAtomically(dirs[1] + "/latest", "garbage").ok());

  Replicas second(dirs);
  ExpectAllOk(second.Run(
      [](ReplicaContextImpl& ctx) { return StartRestored(ctx, 7); }));

  // With no readable copy anywhere, starting afresh would throw the job's
  // progress away: every replica fails, naming the damaged record.
  std::filesystem::remove_all(dirs[0]);
  std::filesystem::remove_all(dirs[1]);
  std::filesystem::create_directories(dirs[1]);
  ASSERT_TRUE(WriteFileAtomically(dirs[1] + "/latest", "garbage").ok());
  Replicas third(dirs);
  for (const absl::Status& status :
       third.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
         Optimizer* optimizer = nullptr;
         return StartState(ctx, &optimizer).status();
       })) {
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_THAT(status.message(), HasSubstr("rank 1"));
  }
}

// A copy one agent cannot write fails the checkpoint on every replica: the
// others must not go on as if it were everywhere.
TEST(ReplicaContextTest, ACopyOneAgentCannotWriteFailsTheCheckpointOnEvery) {
  const std::string root = ::testing::TempDir() + "/replica_unwritable_copy";
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  // Agent 0's directory cannot be made: a file stands in its place.
  const std::vector<std::string> dirs = {root + "/agent0", root + "/agent1"};
  ASSERT_TRUE(WriteFileAtomically(dirs[0], "not a directory").ok());
  Replicas replicas(dirs);
  const std::vector<absl::Status> statuses = replicas.Run(
      [](ReplicaContextImpl& ctx) { return StartAndCheckpoint(ctx, 7); });
  EXPECT_FALSE(statuses[0].ok());
  // With the write's own code: as permanent as it is.
  EXPECT_EQ(statuses[1].code(), statuses[0].code()) << statuses[1];
  EXPECT_THAT(statuses[1].message(),
              HasSubstr("replica 0 could not write its copy of checkpoint 7"));
}

// An attempt that resumes from another agent's copy writes the checkpoint
// again where it is missing, though no step may follow it: a chief that
// lost its disk holds the final model again.
TEST(ReplicaContextTest, ARestoreWritesTheCheckpointWhereACopyIsMissing) {
  const std::string root = ::testing::TempDir() + "/replica_missing_copy";
  std::filesystem::remove_all(root);
  const std::vector<std::string> dirs = {root + "/agent0", root + "/agent1"};
  {
    Replicas first(dirs);
    ExpectAllOk(first.Run(
        [](ReplicaContextImpl& ctx) { return StartAndCheckpoint(ctx, 7); }));
  }
  std::filesystem::remove_all(dirs[0]);
  Replicas second(dirs);
  ExpectAllOk(second.Run([](ReplicaContextImpl& ctx) -> absl::Status {
    COHORT_RETURN_IF_ERROR(StartRestored(ctx, 7));
    EXPECT_EQ(ctx.restored_from_rank(), 1);
    return ctx.SaveWhereMissing(7);
  }));
  absl::StatusOr<int64_t> newest = NewestCheckpointStep(dirs[0]);
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(*newest, 7);
  // Nothing is missing now: nothing is written.
  // A rewrite replaces the file by rename: another inode.
  auto inode = [&](const std::string& path) {
    struct stat st {};
    EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
    return st.st_ino;
  };
  const ino_t written = inode(dirs[1] + "/ckpt-7.data");
  Replicas third(dirs);
  ExpectAllOk(third.Run([](ReplicaContextImpl& ctx) -> absl::Status {
    COHORT_RETURN_IF_ERROR(StartRestored(ctx, 7));
    return ctx.SaveWhereMissing(7);
  }));
  EXPECT_EQ(inode(dirs[1] + "/ckpt-7.data"), written);
}

// Checkpoints that every agent lost (wiped disks) fail the job: starting
// again from step 0 would throw its progress away unasked. An older copy
// than the newest the job wrote still serves.
TEST(ReplicaContextTest, CheckpointsEveryAgentLostFailTheJobNamingTheStep) {
  const std::string root = ::testing::TempDir() + "/replica_lost_copies";
  std::filesystem::remove_all(root);
  const std::vector<std::string> dirs = {root + "/agent0", root + "/agent1"};
  {
    Replicas first(dirs);
    ExpectAllOk(first.Run(
        [](ReplicaContextImpl& ctx) { return StartAndCheckpoint(ctx, 5); }));
  }
  Replicas older(dirs, /*checkpoint_step=*/7);
  ExpectAllOk(
      older.Run([](ReplicaContextImpl& ctx) { return StartRestored(ctx, 5); }));

  for (const std::string& dir : dirs) std::filesystem::remove_all(dir);
  Replicas lost(dirs, /*checkpoint_step=*/7);
  for (const absl::Status& status :
       lost.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
         Optimizer* optimizer = nullptr;
         return StartState(ctx, &optimizer).status();
       })) {
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_THAT(status.message(),
                HasSubstr("checkpointed step 7, but no agent holds a copy"));
  }

  // A job that never checkpointed starts afresh.
  Replicas fresh(dirs);
  ExpectAllOk(fresh.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
    Optimizer* optimizer = nullptr;
    absl::StatusOr<int64_t> start = StartState(ctx, &optimizer);
    if (start.ok()) {
      EXPECT_EQ(*start, 0);
    }
    return start.status();
  }));
}

// A variable whose shape changed since the checkpoint is refused, though
// its size did not change: restored, a [2, 3] would fill a [3, 2] scrambled.
TEST(ReplicaContextTest, ACheckpointOfAnotherShapeIsRefusedNamingBoth) {
  const std::string dir = ::testing::TempDir() + "/replica_reshaped";
  std::filesystem::remove_all(dir);
  auto start_with = [&](std::vector<int64_t> shape) {
    Replicas replicas(1, dir);
    return replicas.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
      const std::vector<double> zeros(6, 0.0);
      absl::StatusOr<Variable*> w = ctx.create_variable(
          {.name = "w", .shape = shape, .dtype = DType::kFloat64},
          zeros.data());
      if (!w.ok()) return w.status();
      absl::StatusOr<int64_t> start = ctx.RestoreOrSync();
      if (!start.ok()) return start.status();
      return *start == 0 ? ctx.SaveCheckpoint(5) : absl::OkStatus();
    })[0];
  };
  ASSERT_TRUE(start_with({2, 3}).ok());
  const absl::Status reshaped = start_with({3, 2});
  EXPECT_EQ(reshaped.code(), absl::StatusCode::kFailedPrecondition) << reshaped;
  EXPECT_THAT(reshaped.message(),
              HasSubstr("holds \"w\" as float64 [2,3] (48 bytes); the init "
                        "function creates float64 [3,2] (48 bytes)"));
  EXPECT_TRUE(start_with({2, 3}).ok());
}

// An optimizer's update count is restored like its slots: a checkpoint
// without it is another model's, not one to resume with the count at 0.
TEST(ReplicaContextTest, ACheckpointWithoutAnOptimizersCountIsRefused) {
  const std::string dir = ::testing::TempDir() + "/replica_no_iterations";
  std::filesystem::remove_all(dir);
  auto start = [&](bool with_optimizer) {
    Replicas replicas(1, dir);
    return replicas.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
      const double w0[2] = {1.0, 2.0};
      absl::StatusOr<Variable*> w = ctx.create_variable(
          {.name = "w", .shape = {2}, .dtype = DType::kFloat64}, w0);
      if (!w.ok()) return w.status();
      if (with_optimizer) {
        absl::StatusOr<Optimizer*> sgd = ctx.create_optimizer(
            {.kind = OptimizerKind::kSgd, .learning_rate = 0.5}, {*w});
        if (!sgd.ok()) return sgd.status();
      }
      absl::StatusOr<int64_t> started = ctx.RestoreOrSync();
      if (!started.ok()) return started.status();
      return *started == 0 ? ctx.SaveCheckpoint(5) : absl::OkStatus();
    })[0];
  };
  ASSERT_TRUE(start(/*with_optimizer=*/false).ok());
  const absl::Status refused = start(/*with_optimizer=*/true);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("optimizer0/iterations"));
}

// What a replica saw of an SGD job: its variables' memory and values.
struct SgdRun {
  const void* w = nullptr;
  const void* count = nullptr;  // an ON_READ SUM variable
  std::vector<double> values;   // w after the steps
  double own_count = 0;
  double summed_count = 0;
};

// Three SGD steps of `w` (replica-dependent start and gradients) on
// `replicas`, then, with `save`, a checkpoint at step 3.
std::vector<SgdRun> RunSgd(Replicas& replicas, int n, bool save = false) {
  std::vector<SgdRun> runs(n);
  ExpectAllOk(replicas.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
    const int r = ctx.replica_id_in_sync_group();
    const double w0[2] = {1.0 + r, 2.0};
    absl::StatusOr<Variable*> w = ctx.create_variable(
        {.name = "w", .shape = {2}, .dtype = DType::kFloat64}, w0);
    if (!w.ok()) return w.status();
    const double count0 = 10.0 * (r + 1);
    absl::StatusOr<Variable*> count =
        ctx.create_variable({.name = "count",
                             .shape = {1},
                             .dtype = DType::kFloat64,
                             .sync = VariableSync::kOnRead,
                             .aggregation = Aggregation::kSum},
                            &count0);
    if (!count.ok()) return count.status();
    absl::StatusOr<Optimizer*> sgd = ctx.create_optimizer(
        {.kind = OptimizerKind::kSgd, .learning_rate = 0.5}, {*w});
    if (!sgd.ok()) return sgd.status();
    absl::StatusOr<int64_t> start = ctx.RestoreOrSync();
    if (!start.ok()) return start.status();
    // Each replica counts on its own from replica 0's start (10).
    *(*count)->data<double>() += 10.0 * r;
    for (int step = 0; step < 3; ++step) {
      double grad[2] = {1.0 + r + step, 0.25 * (r + 1)};
      if (absl::Status s = (*sgd)->apply_gradients(
              std::vector<Tensor>{Tensor{grad, 2, DType::kFloat64}});
          !s.ok()) {
        return s;
      }
    }
    const double* data = (*w)->data<double>();
    runs[r] = {.w = data,
               .count = (*count)->data<double>(),
               .values = {data[0], data[1]},
               .own_count = *(*count)->data<double>(),
               .summed_count = Read(ctx, "count")};
    return save ? ctx.SaveCheckpoint(3) : absl::OkStatus();
  }));
  return runs;
}

TEST(ReplicaContextTest, CentralStorageKeepsOneCopyAndUpdatesItOnce) {
  Replicas mirrored_replicas(2, "");
  Replicas central_replicas(2, "", /*central=*/true);
  const std::vector<SgdRun> mirrored = RunSgd(mirrored_replicas, 2);
  const std::vector<SgdRun> central = RunSgd(central_replicas, 2);

  // One buffer for w; ON_READ variables stay per replica, with their own
  // values, aggregated when read.
  EXPECT_EQ(central[0].w, central[1].w);
  EXPECT_NE(central[0].count, central[1].count);
  EXPECT_EQ(central[0].own_count, 10.0);
  EXPECT_EQ(central[1].own_count, 20.0);
  EXPECT_EQ(central[0].summed_count, 30.0);
  EXPECT_NE(mirrored[0].w, mirrored[1].w);

  // Replica 0's start (1, 2), lr 0.5, mean gradients (1.5, 0.375),
  // (2.5, 0.375), (3.5, 0.375): the update applied once per step, exactly
  // as the mirrored copies have it.
  EXPECT_THAT(central[0].values, ElementsAre(1.0 - 3.75, 2.0 - 0.5625));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(central[r].values, mirrored[0].values) << r;
    EXPECT_EQ(mirrored[r].values, mirrored[0].values) << r;
  }
}

TEST(ReplicaContextTest, CheckpointsOfEitherStrategyRestoreInTheOther) {
  const std::string dir = ::testing::TempDir() + "/central_ckpt";
  std::filesystem::remove_all(dir);
  std::vector<double> saved;
  {
    Replicas central(2, dir, /*central=*/true);
    saved = RunSgd(central, 2, /*save=*/true)[0].values;
  }
  for (bool central : {false, true}) {
    SCOPED_TRACE(central ? "central storage" : "mirrored");
    Replicas replicas(2, dir, central);
    ExpectAllOk(replicas.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
      const double w0[2] = {-7, -7};
      absl::StatusOr<Variable*> w = ctx.create_variable(
          {.name = "w", .shape = {2}, .dtype = DType::kFloat64}, w0);
      if (!w.ok()) return w.status();
      const double zero = 0;
      absl::StatusOr<Variable*> count =
          ctx.create_variable({.name = "count",
                               .shape = {1},
                               .dtype = DType::kFloat64,
                               .sync = VariableSync::kOnRead,
                               .aggregation = Aggregation::kSum},
                              &zero);
      if (!count.ok()) return count.status();
      if (absl::StatusOr<Optimizer*> sgd = ctx.create_optimizer(
              {.kind = OptimizerKind::kSgd, .learning_rate = 0.5}, {*w});
          !sgd.ok()) {
        return sgd.status();
      }
      absl::StatusOr<int64_t> start = ctx.RestoreOrSync();
      if (!start.ok()) return start.status();
      EXPECT_EQ(*start, 3);
      const double* data = (*w)->data<double>();
      EXPECT_EQ(std::vector<double>(data, data + 2), saved);
      EXPECT_EQ(Read(ctx, "count"), 30.0);
      return absl::OkStatus();
    }));
  }
}

TEST(ReplicaContextTest, CentralStorageNamesVariablesCreatedDifferently) {
  Replicas replicas(2, "", /*central=*/true);
  const std::vector<absl::Status> statuses =
      replicas.Run([&](ReplicaContextImpl& ctx) {
        const bool first = ctx.replica_id_in_sync_group() == 0;
        return ctx
            .create_variable({.name = first ? "w" : "v", .shape = {2}}, nullptr)
            .status();
      });
  EXPECT_TRUE(statuses[0].ok()) << statuses[0];
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(statuses[1].message(),
              HasSubstr("replica 1 created \"v\" (8 bytes) where local "
                        "replica 0 created \"w\" (8 bytes)"));
}

TEST(ReplicaContextTest, MisuseIsReportedNamingTheProblem) {
  Replicas replicas(1, "");
  ExpectAllOk(replicas.Run([&](ReplicaContextImpl& ctx) -> absl::Status {
    EXPECT_TRUE(ctx.create_variable({.name = "v", .shape = {2}}, nullptr).ok());
    EXPECT_THAT(ctx.create_variable({.name = "v", .shape = {2}}, nullptr)
                    .status()
                    .message(),
                HasSubstr("exists already"));
    absl::StatusOr<Optimizer*> opt =
        ctx.create_optimizer({}, {ctx.find_variable("v")});
    EXPECT_TRUE(opt.ok());
    // Two Adams would both keep "v/m"; SGD (the first) keeps no slots.
    const OptimizerOptions adam{.kind = OptimizerKind::kAdam};
    EXPECT_TRUE(ctx.create_optimizer(adam, {ctx.find_variable("v")}).ok());
    EXPECT_THAT(
        ctx.create_optimizer(adam, {ctx.find_variable("v")}).status().message(),
        HasSubstr("create_optimizer: slot \"v/m\" exists already: \"v\" "
                  "has another optimizer of this kind"));
    float wrong[3] = {};
    EXPECT_THAT((*opt)
                    ->apply_gradients(
                        std::vector<Tensor>{Tensor{wrong, 3, DType::kFloat32}})
                    .message(),
                HasSubstr("the gradient of \"v\" has 3"));
    EXPECT_THAT(ctx.broadcast(Tensor{wrong, 1, DType::kFloat32}, 5).message(),
                HasSubstr("root 5 is not a replica"));
    return absl::OkStatus();
  }));
}

}  // namespace
}  // namespace cohort::agent
