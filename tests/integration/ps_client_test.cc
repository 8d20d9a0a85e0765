// The worker's PsClient against real ps shards served in this process
// (ps_server/in_process_ps.h) on 127.0.0.1: sharded variables spread over
// two shards, pushes applied by the shards' optimizers, concurrent workers,
// and the recovery rules when a shard restarts or stays away.

#include "ps_client/ps_client.h"

#include <signal.h>

#include <filesystem>
#include <future>
#include <optional>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "common/subprocess.h"
#include "coordinator/variable_fetcher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_client/partitioner.h"
#include "ps_server/in_process_ps.h"
#include "tests/testing/test_cluster.h"
#include "tests/testing/wait.h"

namespace cohort::ps {
namespace {

using ::cohort::testing::ScratchDir;
using ::cohort::testing::TestBinary;
using ::cohort::testing::WaitUntil;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr char kJob[] = "job-ps-client";

// A float vector's bytes, for the client's spans.
absl::Span<const char> In(const std::vector<float>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
}
absl::Span<char> Out(std::vector<float>& v) {
  return {reinterpret_cast<char*>(v.data()), v.size() * sizeof(float)};
}

std::vector<float> Iota(int n, float step) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = i * step;
  return v;
}

// Shards 0..n-1, each restartable in place on its own port.
class Shards {
 public:
  Shards(int n, const std::string& state_root = "",
         PsServiceOptions service = {})
      : service_(service) {
    for (int i = 0; i < n; ++i) {
      options_.push_back(InProcessPsOptions{
          .shard_id = i,
          .state_dir =
              state_root.empty() ? "" : absl::StrCat(state_root, "/ps", i),
          // Snapshots only on request and at a clean stop.
          .snapshots = {.interval = absl::Hours(1), .every_updates = 0},
          .service = service_});
      shards_.emplace_back();
      Start(i);
    }
  }

  void Start(int i) {
    absl::StatusOr<std::unique_ptr<InProcessPs>> ps =
        InProcessPs::Start(options_[i]);
    ASSERT_TRUE(ps.ok()) << ps.status();
    shards_[i] = *std::move(ps);
    // A restart takes the same port, as a restarted ps task would.
    options_[i].listen = shards_[i]->address();
  }
  void Stop(int i) { shards_[i].reset(); }

  InProcessPs& operator[](int i) { return *shards_[i]; }
  std::vector<std::string> addresses() const {
    std::vector<std::string> out;
    for (const InProcessPsOptions& o : options_) out.push_back(o.listen);
    return out;
  }

 private:
  PsServiceOptions service_;
  std::vector<InProcessPsOptions> options_;
  std::vector<std::unique_ptr<InProcessPs>> shards_;
};

// A delay_relay from 127.0.0.2:`port` to the shard at 127.0.0.1:`port`,
// holding every byte for `delay` each way; ready when returned.
absl::StatusOr<Subprocess> StartRelay(const ScratchDir& dir,
                                      const std::string& port,
                                      const std::string& delay) {
  static int started = 0;
  const std::string name = absl::StrCat(dir.path(), "/relay", ++started);
  absl::StatusOr<Subprocess> relay = Subprocess::Spawn(
      {.argv = {TestBinary("delay_relay"), "--listen_host=127.0.0.2",
                "--target_host=127.0.0.1", absl::StrCat("--ports=", port),
                absl::StrCat("--delay=", delay),
                absl::StrCat("--ready_file=", name, ".ready")},
       .output_file = name + ".log"});
  if (!relay.ok()) return relay.status();
  if (!WaitUntil([&] { return std::filesystem::exists(name + ".ready"); },
                 absl::Seconds(10))) {
    relay->Stop(absl::Seconds(5));
    return absl::DeadlineExceededError("the relay did not start: " +
                                       ReadFile(name + ".log").value_or(""));
  }
  return relay;
}

std::unique_ptr<PsClient> NewClient(const std::vector<std::string>& addresses,
                                    const std::string& worker = "worker:0",
                                    PsClientOptions options = {}) {
  options.ps_addresses = addresses;
  options.job_id = kJob;
  options.job_sequence = options.job_sequence == 0 ? 1 : options.job_sequence;
  options.worker = worker;
  options.rpc_timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<PsClient>> client =
      PsClient::Create(std::move(options));
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

v1::PsOptimizer Sgd(double learning_rate) {
  v1::PsOptimizer o;
  o.set_kind(v1::PsOptimizer::SGD);
  o.set_learning_rate(learning_rate);
  return o;
}

// The test model: a 10x4 embedding and a 4-vector bias split in two, and a
// float scalar kept whole (assigned by push, no optimizer).
struct Model {
  Placement placement;
  std::vector<float> emb = Iota(40, 0.5f);
  std::vector<float> bias = Iota(4, 1.0f);
  std::vector<float> scale = {3.0f};

  explicit Model(int num_ps) {
    absl::StatusOr<Placement> p = PlaceVariables(
        {{"emb", {10, 4}, 4}, {"bias", {4}, 4}, {"scale", {}, 4}}, num_ps,
        {.policy = PartitionPolicy::kFixedShards, .num_shards = 2});
    EXPECT_TRUE(p.ok()) << p.status();
    if (p.ok()) placement = *p;
  }

  absl::Status Create(PsClient& client) const {
    return client.CreateVariables(placement,
                                  {{.optimizer = Sgd(0.5), .initial = In(emb)},
                                   {.optimizer = Sgd(0.5), .initial = In(bias)},
                                   {.initial = In(scale)}});
  }
};

// Pulls the whole model.
struct Pulled {
  std::vector<float> emb = std::vector<float>(40, -1);
  std::vector<float> bias = std::vector<float>(4, -1);
  std::vector<float> scale = std::vector<float>(1, -1);

  absl::Status From(PsClient& client) {
    const PullBuffer buffers[] = {
        {"emb", Out(emb)}, {"bias", Out(bias)}, {"scale", Out(scale)}};
    return client.Pull(buffers);
  }
};

TEST(PsClientTest, ShardedVariablesSpreadOverBothShardsAndTrain) {
  // Pull messages of at most 24 bytes, so that parts come back in pieces.
  Shards shards(2, "", {.max_chunk_bytes = 24});
  Model model(2);
  // emb/part_0 rows 0-4 on ps 0, emb/part_1 rows 5-9 on ps 1, then the
  // counter goes on: bias/part_0 on ps 0, bias/part_1 on ps 1, scale on 0.
  // At most 16 initial bytes per create: each shard's in two messages.
  PsClientOptions small_chunks{.max_chunk_bytes = 12, .max_create_bytes = 16};
  std::unique_ptr<PsClient> client =
      NewClient(shards.addresses(), "worker:0", small_chunks);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(model.Create(*client).ok());
  // Each create that added variables is a generation of the shard's set.
  EXPECT_EQ(shards[0].service().store()->declared_generation(), 2);

  for (const auto& [shard, name] :
       std::vector<std::pair<int, std::string>>{{0, "emb/part_0"},
                                                {1, "emb/part_1"},
                                                {0, "bias/part_0"},
                                                {1, "bias/part_1"},
                                                {0, "scale"}}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(shards[shard].service().store()->Layout(kJob, name).ok());
    EXPECT_EQ(
        shards[1 - shard].service().store()->Layout(kJob, name).status().code(),
        absl::StatusCode::kNotFound);
  }
  absl::StatusOr<VariableLayout> part1 =
      shards[1].service().store()->Layout(kJob, "emb/part_1");
  ASSERT_TRUE(part1.ok());
  EXPECT_THAT(part1->shape, ElementsAreArray({5, 4}));
  // Each part says how many its variable has; the whole scale says none.
  for (int shard = 0; shard < 2; ++shard) {
    absl::StatusOr<std::vector<v1::PsVariableSpec>> listed =
        shards[shard].service().store()->List(kJob);
    ASSERT_TRUE(listed.ok()) << listed.status();
    for (const v1::PsVariableSpec& spec : *listed) {
      EXPECT_EQ(spec.num_parts(), spec.name() == "scale" ? 0 : 2)
          << spec.name();
    }
  }

  Pulled pulled;
  ASSERT_TRUE(pulled.From(*client).ok());
  EXPECT_EQ(pulled.emb, model.emb);
  EXPECT_EQ(pulled.bias, model.bias);
  EXPECT_EQ(pulled.scale, model.scale);

  // A gradient of ones with learning rate 0.5: every weight drops by 0.5.
  // The scale has no optimizer: the push assigns it.
  const std::vector<float> emb_grad(40, 1.0f), bias_grad(4, 1.0f),
      new_scale = {7.0f};
  const PushBuffer push[] = {
      {"emb", In(emb_grad)}, {"bias", In(bias_grad)}, {"scale", In(new_scale)}};
  ASSERT_TRUE(client->Push(push).ok());
  ASSERT_TRUE(pulled.From(*client).ok());
  for (int i = 0; i < 40; ++i) EXPECT_EQ(pulled.emb[i], model.emb[i] - 0.5f);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(pulled.bias[i], model.bias[i] - 0.5f);
  EXPECT_EQ(pulled.scale[0], 7.0f);

  // Both shards applied their parts of the push (shard 0 three, shard 1
  // two): one push each.
  EXPECT_EQ(shards[0].service().ShardState().updates(), 1);
  EXPECT_EQ(shards[1].service().ShardState().updates(), 1);
  EXPECT_NE(client->incarnation(0), 0u);
  EXPECT_NE(client->incarnation(0), client->incarnation(1));
  EXPECT_TRUE(client->TakeRecoveryEvents().empty());

  // A second worker declares the same variables: their values stay.
  std::unique_ptr<PsClient> other = NewClient(shards.addresses(), "worker:1");
  ASSERT_TRUE(model.Create(*other).ok());
  Pulled again;
  ASSERT_TRUE(again.From(*other).ok());
  EXPECT_EQ(again.emb, pulled.emb);
}

TEST(PsClientTest, AShardInProcessWithAStateDirHoldsWhatOneSnapshotHolds) {
  // Regression: an in-process shard kept the unsnapshotted cap, and made
  // shards no snapshot could hold, where cohort-ps refuses them.
  ScratchDir state;
  Shards shards(1, state.path());
  // 2 GiB of float32: refused before anything is allocated.
  absl::StatusOr<Placement> placement = PlaceVariables(
      {{"w", {int64_t{256} << 20}, 4}, {"v", {int64_t{256} << 20}, 4}}, 1, {});
  ASSERT_TRUE(placement.ok()) << placement.status();
  std::unique_ptr<PsClient> client = NewClient(shards.addresses());
  const absl::Status refused = client->CreateVariables(*placement, {{}, {}});
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("what one snapshot holds"));
}

TEST(PsClientTest, ConcurrentWorkersShareOneClient) {
  Shards shards(2);
  absl::StatusOr<Placement> placement = PlaceVariables(
      {{"w", {64, 8}, 4}}, 2,
      {.policy = PartitionPolicy::kMinSize, .min_shard_bytes = 256});
  ASSERT_TRUE(placement.ok());
  ASSERT_THAT(placement->variables[0].parts, SizeIs(2));
  std::unique_ptr<PsClient> client = NewClient(shards.addresses());
  ASSERT_TRUE(
      client->CreateVariables(*placement, {{.optimizer = Sgd(1)}}).ok());

  constexpr int kThreads = 4, kPushes = 25;
  const std::vector<float> ones(512, 1.0f);
  std::vector<absl::Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> value(512);
      for (int i = 0; i < kPushes && results[t].ok(); ++i) {
        const PullBuffer pull[] = {{"w", Out(value)}};
        results[t] = client->Pull(pull);
        if (!results[t].ok()) break;
        const PushBuffer push[] = {{"w", In(ones)}};
        results[t] = client->Push(push);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;

  std::vector<float> value(512);
  const PullBuffer pull[] = {{"w", Out(value)}};
  ASSERT_TRUE(client->Pull(pull).ok());
  EXPECT_EQ(value, std::vector<float>(512, -kThreads * kPushes));
}

TEST(PsClientTest, RejectsMisuseAndNamesTheShardOnErrors) {
  Shards shards(2);
  Model model(2);
  std::unique_ptr<PsClient> client = NewClient(shards.addresses());
  Pulled pulled;
  EXPECT_EQ(pulled.From(*client).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(model.Create(*client).ok());

  std::vector<float> small(3);
  const PullBuffer wrong_size[] = {{"emb", Out(small)}};
  EXPECT_THAT(std::string(client->Pull(wrong_size).message()),
              HasSubstr("buffer of 12 bytes for \"emb\" of 160"));
  const PullBuffer unknown[] = {{"nope", Out(small)}};
  EXPECT_EQ(client->Pull(unknown).code(), absl::StatusCode::kInvalidArgument);
  // Twice in one push would apply the gradient twice.
  std::vector<float> grad(40);
  const PushBuffer twice[] = {{"emb", In(grad)}, {"emb", In(grad)}};
  const absl::Status repeated = client->Push(twice);
  EXPECT_EQ(repeated.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(repeated.message()),
              HasSubstr("\"emb\" is given twice"));
  EXPECT_EQ(client->CreateVariables(model.placement, {}).code(),
            absl::StatusCode::kInvalidArgument);
  // An initial value no message to a ps task can carry names its variable.
  absl::StatusOr<Placement> huge =
      PlaceVariables({{"table", {64 << 20, 1}, 4}}, 2, {});
  ASSERT_TRUE(huge.ok()) << huge.status();
  const std::vector<char> zeros(size_t{256} << 20);
  const absl::Status too_large =
      client->CreateVariables(*huge, {{.initial = absl::MakeConstSpan(zeros)}});
  EXPECT_EQ(too_large.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_large.message()),
              HasSubstr("variable \"table\": an initial value of 268435456 "
                        "bytes is over the"));

  // A newer job takes the shards; the older job's calls are refused, and
  // the error says which shard refused.
  PsClientOptions newer{.job_sequence = 2};
  newer.ps_addresses = shards.addresses();
  newer.job_id = "job-newer";
  absl::StatusOr<std::unique_ptr<PsClient>> successor = PsClient::Create(newer);
  ASSERT_TRUE(successor.ok());
  ASSERT_TRUE(model.Create(**successor).ok());
  const absl::Status refused = pulled.From(*client);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("ps:0: "));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("job-newer"));
}

TEST(PsClientTest, AShardThatNeverAnswersFailsAfterTheRecoveryTimeout) {
  Shards shards(1);
  const int free_port = *PickUnusedPort();
  const std::string dead = absl::StrCat("127.0.0.1:", free_port);
  std::unique_ptr<PsClient> client =
      NewClient({shards.addresses()[0], dead}, "worker:0",
                {.recovery_timeout = absl::Milliseconds(300)});
  Model model(2);
  const absl::Time start = absl::Now();
  const absl::Status status = model.Create(*client);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(absl::StrCat("ps:1 at ", dead,
                                     " did not come back within 0.3s: ")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(PsClientTest, ARestartedShardIsReportedAndKeepsItsSnapshot) {
  ScratchDir dir;
  Shards shards(2, dir.path());
  Model model(2);
  std::unique_ptr<PsClient> client = NewClient(shards.addresses());
  ASSERT_TRUE(model.Create(*client).ok());
  const std::vector<float> emb_grad(40, 1.0f);
  const PushBuffer push[] = {{"emb", In(emb_grad)}};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client->Push(push).ok());
  const uint64_t before = client->incarnation(1);

  // A clean restart: the last snapshot holds all 3 updates of shard 1.
  shards.Stop(1);
  shards.Start(1);
  EXPECT_EQ(shards[1].restored_updates(), 3);
  Pulled pulled;
  ASSERT_TRUE(pulled.From(*client).ok());
  for (int i = 0; i < 40; ++i) EXPECT_EQ(pulled.emb[i], model.emb[i] - 1.5f);

  std::vector<PsRecoveryEvent> events = client->TakeRecoveryEvents();
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].shard, 1);
  EXPECT_EQ(events[0].old_incarnation, before);
  EXPECT_EQ(events[0].new_incarnation, client->incarnation(1));
  EXPECT_NE(events[0].new_incarnation, before);
  EXPECT_EQ(events[0].updates_seen, 3);
  EXPECT_EQ(events[0].restored_updates, 3);
  EXPECT_EQ(events[0].lost, 0);
  EXPECT_TRUE(client->TakeRecoveryEvents().empty());
}

TEST(PsClientTest, APushToAShardThatRestartedUnseenGoesToItsNewIncarnation) {
  ScratchDir dir;
  Shards shards(2, dir.path());
  Model model(2);
  std::unique_ptr<PsClient> client = NewClient(shards.addresses());
  ASSERT_TRUE(model.Create(*client).ok());
  const std::vector<float> emb_grad(40, 1.0f);
  const PushBuffer push[] = {{"emb", In(emb_grad)}};
  ASSERT_TRUE(client->Push(push).ok());
  const uint64_t before = client->incarnation(1);

  // Restarted from its snapshot, which holds the push; the client has not
  // heard from it since. Its next push is refused, unapplied, as meant for
  // the old incarnation, and sent again to the new one.
  shards.Stop(1);
  shards.Start(1);
  const absl::Status pushed = client->Push(push);
  ASSERT_TRUE(pushed.ok()) << pushed;
  EXPECT_NE(client->incarnation(1), before);

  Pulled pulled;
  ASSERT_TRUE(pulled.From(*client).ok());
  // Two pushes of 1.0 at a learning rate of 0.5, each applied once.
  for (int i = 0; i < 40; ++i) EXPECT_EQ(pulled.emb[i], model.emb[i] - 1.0f);
  std::vector<PsRecoveryEvent> events = client->TakeRecoveryEvents();
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].shard, 1);
  EXPECT_EQ(events[0].old_incarnation, before);
  EXPECT_EQ(events[0].lost, 0);
}

// A new cluster's job 1 takes the shards over from an earlier cluster's
// job 1, whose workers still run: they neither update nor read the new
// job's variables, and are told why.
TEST(PsClientTest,
     AnEarlierClustersJobOfTheSameIdCannotTouchTheNewOnesVariables) {
  ScratchDir dir;
  Shards shards(2, dir.path());
  Model model(2);
  std::unique_ptr<PsClient> earlier =
      NewClient(shards.addresses(), "worker:0",
                {.job_uid = "uid-old", .cluster_uid = "cluster-old"});
  ASSERT_TRUE(model.Create(*earlier).ok());
  std::unique_ptr<PsClient> current =
      NewClient(shards.addresses(), "worker:0",
                {.job_uid = "uid-new", .cluster_uid = "cluster-new"});
  ASSERT_TRUE(model.Create(*current).ok());

  const std::vector<float> emb_grad(40, 1.0f);
  const PushBuffer push[] = {{"emb", In(emb_grad)}};
  const absl::Status refused = earlier->Push(push);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("of uid uid-new, not of this job '" +
                        std::string(kJob) + "' of uid uid-old"));
  Pulled stale;
  EXPECT_EQ(stale.From(*earlier).code(), absl::StatusCode::kPermissionDenied);

  ASSERT_TRUE(current->Push(push).ok());
  Pulled pulled;
  ASSERT_TRUE(pulled.From(*current).ok());
  // One push of 1.0 at a learning rate of 0.5: the earlier one's was not
  // applied.
  for (int i = 0; i < 40; ++i) EXPECT_EQ(pulled.emb[i], model.emb[i] - 0.5f);

  // Both shards restart from their snapshots. The earlier job's push, meant
  // for an incarnation gone, is still refused as another job's: told that
  // the shards restarted, it would declare its variables again and take
  // them back.
  shards.Stop(0);
  shards.Stop(1);
  shards.Start(0);
  shards.Start(1);
  const absl::Status after_restart = earlier->Push(push);
  EXPECT_EQ(after_restart.code(), absl::StatusCode::kPermissionDenied)
      << after_restart;
  Pulled kept;
  ASSERT_TRUE(kept.From(*current).ok());
  for (int i = 0; i < 40; ++i) EXPECT_EQ(kept.emb[i], model.emb[i] - 0.5f);
}

TEST(PsClientTest, AShardBackWithoutSnapshotGetsTheVariablesAgain) {
  Shards shards(2);  // no state dir: a restart loses everything
  Model model(2);
  // Every variable in a create of its own: recreating sends them all.
  std::unique_ptr<PsClient> client =
      NewClient(shards.addresses(), "worker:0", {.max_create_bytes = 1});
  ASSERT_TRUE(model.Create(*client).ok());
  const std::vector<float> emb_grad(40, 1.0f);
  const PushBuffer push[] = {{"emb", In(emb_grad)}};
  ASSERT_TRUE(client->Push(push).ok());
  ASSERT_TRUE(client->Push(push).ok());

  shards.Stop(1);
  shards.Start(1);
  // The pull is refused (NOT_FOUND), the client recreates its variables
  // from their initial values, sees the new incarnation and pulls again.
  Pulled pulled;
  ASSERT_TRUE(pulled.From(*client).ok());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(pulled.emb[i], model.emb[i] - 1.0f);
  for (int i = 20; i < 40; ++i) EXPECT_EQ(pulled.emb[i], model.emb[i]);

  std::vector<PsRecoveryEvent> events = client->TakeRecoveryEvents();
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].shard, 1);
  EXPECT_EQ(events[0].updates_seen, 2);
  EXPECT_EQ(events[0].restored_updates, 0);
  EXPECT_EQ(events[0].lost, 2);
}

// A push whose answer was lost (its link cut after the shard applied it)
// is not sent again to the shard that applied it, even by a client that had
// not heard the shard's incarnation: a push meant for incarnation 0 matches
// any, and could not tell the shard that applied it from a restarted one.
TEST(PsClientTest, APushWhoseAnswerWasLostIsNotAppliedTwice) {
  ScratchDir dir;
  Shards shards(1);
  const std::vector<float> zeros(4, 0.0f), ones(4, 1.0f);
  absl::StatusOr<Placement> placement = PlaceVariables({{"a", {4}, 4}}, 1, {});
  ASSERT_TRUE(placement.ok()) << placement.status();
  const std::vector<PsVariableOptions> options = {
      {.optimizer = Sgd(1), .initial = In(zeros)}};
  std::unique_ptr<PsClient> first = NewClient(shards.addresses(), "worker:0");
  ASSERT_TRUE(first->CreateVariables(*placement, options).ok());

  // The client under test reaches the shard through a relay that holds
  // every byte for 500 ms each way: a window to cut the link in after the
  // shard applied the push and before its answer is back.
  const std::string address = shards.addresses()[0];
  const std::string port = address.substr(address.rfind(':') + 1);
  std::optional<Subprocess> relay;
  auto start_relay = [&] {
    absl::StatusOr<Subprocess> spawned = StartRelay(dir, port, "500ms");
    ASSERT_TRUE(spawned.ok()) << spawned.status();
    relay.emplace(*std::move(spawned));
  };
  const absl::Cleanup stop_relay = [&] {
    if (relay.has_value()) relay->Stop(absl::Seconds(5));
  };
  // Its create finds nothing there: it knows no incarnation.
  std::unique_ptr<PsClient> client =
      NewClient({"127.0.0.2:" + port}, "worker:1",
                {.recovery_timeout = absl::Seconds(6)});
  EXPECT_EQ(client->CreateVariables(*placement, options).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(client->incarnation(0), 0u);
  start_relay();

  const PushBuffer push[] = {{"a", In(ones)}};
  std::future<absl::Status> pushed =
      std::async(std::launch::async, [&] { return client->Push(push); });
  VariableStore& store = *shards[0].service().store();
  ASSERT_TRUE(
      WaitUntil([&] { return store.updates() == 1; }, absl::Seconds(30)));
  relay->Signal(SIGKILL);  // the answer is still in the relay
  relay->Stop(absl::Seconds(5));
  start_relay();
  const absl::Status status = pushed.get();
  // Applied once. The answer is an error only when the cut beat it back.
  EXPECT_EQ(store.updates(), 1);
  if (!status.ok()) {
    EXPECT_THAT(status.message(), HasSubstr("it is not re-sent")) << status;
  }
}

// The coordinator's fetch of a job's variables asks the shards in turn,
// within one deadline: shards that each answer within it, slowly, do not
// add up past it.
TEST(PsClientTest, AFetchAsksTheShardsInTurnWithinOneDeadline) {
  ScratchDir dir;
  Shards shards(1);
  absl::StatusOr<Placement> placement = PlaceVariables({{"a", {4}, 4}}, 1, {});
  ASSERT_TRUE(placement.ok()) << placement.status();
  std::unique_ptr<PsClient> client = NewClient(shards.addresses());
  ASSERT_TRUE(client->CreateVariables(*placement, {{}}).ok());
  // Each ask goes through a relay holding every byte 1 s each way: a new
  // connection and a call take 4 s or more, well within the fetch's 6 s,
  // and three of them well past it.
  const std::string address = shards.addresses()[0];
  const std::string port = address.substr(address.rfind(':') + 1);
  absl::StatusOr<Subprocess> relay = StartRelay(dir, port, "1s");
  ASSERT_TRUE(relay.ok()) << relay.status();
  const absl::Cleanup stop_relay = [&] { relay->Stop(absl::Seconds(5)); };
  const std::string relayed = "127.0.0.2:" + port;
  const absl::Status fetched =
      coordinator::FetchPsVariables({relayed, relayed, relayed},
                                    rpc::Security{}, kJob, "", {},
                                    absl::Seconds(6), /*max_bytes=*/1 << 20)
          .status();
  EXPECT_EQ(fetched.code(), absl::StatusCode::kDeadlineExceeded) << fetched;
  EXPECT_THAT(fetched.message(), HasSubstr("ps:"));
}

TEST(PsClientTest, CallsWaitForAShardThatIsBeingRestarted) {
  ScratchDir dir;
  Shards shards(2, dir.path());
  Model model(2);
  std::unique_ptr<PsClient> client = NewClient(shards.addresses());
  ASSERT_TRUE(model.Create(*client).ok());

  shards.Stop(1);
  // Issued while shard 1 is down: the push waits for it, then is sent to
  // the new incarnation (whose snapshot cannot hold it).
  const std::vector<float> emb_grad(40, 1.0f);
  std::future<absl::Status> pushed = std::async(std::launch::async, [&] {
    const PushBuffer push[] = {{"emb", In(emb_grad)}};
    return client->Push(push);
  });
  EXPECT_EQ(pushed.wait_for(std::chrono::milliseconds(300)),
            std::future_status::timeout);
  shards.Start(1);
  ASSERT_EQ(pushed.wait_for(std::chrono::seconds(20)),
            std::future_status::ready);
  const absl::Status status = pushed.get();
  ASSERT_TRUE(status.ok()) << status;

  Pulled pulled;
  ASSERT_TRUE(pulled.From(*client).ok());
  // Applied exactly once on both shards.
  for (int i = 0; i < 40; ++i) EXPECT_EQ(pulled.emb[i], model.emb[i] - 0.5f);
  std::vector<PsRecoveryEvent> events = client->TakeRecoveryEvents();
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].shard, 1);
  EXPECT_EQ(events[0].lost, 0);
}

TEST(PsClientTest, ShutdownEndsAWaitForAShard) {
  Shards shards(1);
  std::unique_ptr<PsClient> client = NewClient(shards.addresses());
  absl::StatusOr<Placement> placement = PlaceVariables({{"v", {4}, 4}}, 1);
  ASSERT_TRUE(placement.ok());
  ASSERT_TRUE(client->CreateVariables(*placement, {{}}).ok());
  shards.Stop(0);
  std::future<absl::Status> pulled = std::async(std::launch::async, [&] {
    std::vector<float> v(4);
    const PullBuffer pull[] = {{"v", Out(v)}};
    return client->Pull(pull);
  });
  EXPECT_EQ(pulled.wait_for(std::chrono::milliseconds(200)),
            std::future_status::timeout);
  client->Shutdown();
  ASSERT_EQ(pulled.wait_for(std::chrono::seconds(10)),
            std::future_status::ready);
  EXPECT_EQ(pulled.get().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace cohort::ps
