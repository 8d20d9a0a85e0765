// The parameter server's service over real gRPC on 127.0.0.1:0, in one
// process: create, pull and push through the generated stub, the errors a
// bad request gets (and that the server keeps serving after each), large
// variables in chunks, snapshots and a restart that restores them.

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "cohort/v1/ps.grpc.pb.h"
#include "common/file_util.h"
#include "coordinator/variable_fetcher.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "ps_server/ps_service.h"
#include "ps_server/ps_test_util.h"
#include "ps_server/snapshot.h"
#include "ps_server/snapshot_loop.h"
#include "ps_server/variable_store.h"
#include "rpc/channel.h"
#include "rpc/server.h"
#include "rpc/status_conversion.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

using ::cohort::ps::test_util::Bytes;
using ::cohort::ps::test_util::Spec;
using ::cohort::ps::test_util::Values;

using ::testing::HasSubstr;

constexpr char kToken[] = "ps-token";
constexpr absl::Duration kRpcTimeout = absl::Seconds(20);

task::TaskConfig PsTaskConfig(int index) {
  task::TaskConfig config;
  config.task = {.type = "ps", .index = index};
  config.coordinator = "127.0.0.1:1";  // never dialled: Run() is not called
  config.daemon.server.security.token = kToken;
  return config;
}

v1::TensorChunk Chunk(const std::string& name, int64_t offset, std::string data,
                      int64_t total) {
  v1::TensorChunk chunk;
  chunk.set_name(name);
  chunk.set_offset(offset);
  chunk.set_total_bytes(total);
  chunk.set_data(std::move(data));
  return chunk;
}

// A whole variable as chunks of at most `chunk_bytes`.
std::vector<v1::TensorChunk> Chunks(const std::string& name,
                                    const std::string& value,
                                    size_t chunk_bytes) {
  std::vector<v1::TensorChunk> chunks;
  for (size_t offset = 0; offset < value.size(); offset += chunk_bytes) {
    chunks.push_back(
        Chunk(name, offset, value.substr(offset, chunk_bytes), value.size()));
  }
  return chunks;
}

struct Pulled {
  std::map<std::string, std::string> values;
  std::map<std::string, int64_t> versions;
  v1::PsShardState shard;
  int messages = 0;
};

// One ps shard's service and server, and a client of it.
class PsShardHarness {
 public:
  PsShardHarness(int64_t max_chunk_bytes, const std::string& state_dir = "",
                 int64_t ack_within_updates = 0)
      : runtime_("ps", PsTaskConfig(0)),
        store_({.shard_id = 0}),
        server_({.listen = "127.0.0.1:0",
                 .security = {.token = std::string(kToken)}}) {
    if (!state_dir.empty()) {
      dir_ = std::make_unique<ps::SnapshotDir>(state_dir);
      absl::StatusOr<ps::RestoredSnapshot> restored =
          dir_->Restore([this](const v1::PsSnapshot& snapshot) {
            return store_.Restore(snapshot);
          });
      EXPECT_TRUE(restored.ok()) << restored.status();
      loop_ = std::make_unique<ps::SnapshotLoop>(
          &store_, dir_.get(),
          ps::SnapshotLoopOptions{.interval = absl::Hours(1),
                                  .every_updates = 0});
      loop_->Start(std::nullopt);
    }
    service_ = std::make_unique<ps::PsService>(
        &runtime_, &store_, loop_.get(),
        ps::PsServiceOptions{.max_chunk_bytes = max_chunk_bytes,
                             .ack_within_updates = ack_within_updates});
    server_.AddService(service_.get());
    EXPECT_TRUE(server_.Start().ok());
    connection_ = std::make_unique<rpc::Connection>(
        server_.DialAddress(), rpc::Security{.token = std::string(kToken)});
    stub_ = v1::ParameterServer::NewStub(connection_->channel());
  }

  ~PsShardHarness() {
    server_.Shutdown(absl::Milliseconds(200));
    if (loop_ != nullptr) loop_->Shutdown();
  }

  v1::ParameterServer::Stub& stub() { return *stub_; }
  std::unique_ptr<grpc::ClientContext> Context() const {
    return connection_->NewContext(kRpcTimeout);
  }
  ps::VariableStore& store() { return store_; }
  const rpc::RpcServer& server() const { return server_; }

  absl::StatusOr<v1::CreateVariablesResponse> Create(
      const std::string& job, int64_t sequence,
      std::vector<v1::PsVariableSpec> specs) {
    v1::CreateVariablesRequest request;
    request.set_job_id(job);
    request.set_job_sequence(sequence);
    for (auto& spec : specs) *request.add_variables() = std::move(spec);
    v1::CreateVariablesResponse response;
    const grpc::Status status =
        stub_->CreateVariables(Context().get(), request, &response);
    if (!status.ok()) return rpc::FromGrpcStatus(status);
    return response;
  }

  absl::StatusOr<Pulled> Pull(const std::string& job,
                              const std::vector<std::string>& names) {
    v1::PullRequest request;
    request.set_job_id(job);
    request.set_worker("worker:0");
    for (const auto& name : names) request.add_names(name);
    auto context = Context();
    std::unique_ptr<grpc::ClientReader<v1::PullResponse>> reader =
        stub_->Pull(context.get(), request);
    Pulled pulled;
    v1::PullResponse message;
    while (reader->Read(&message)) {
      if (pulled.messages++ == 0) pulled.shard = message.shard();
      for (const v1::TensorChunk& chunk : message.chunks()) {
        std::string& value = pulled.values[chunk.name()];
        value.resize(chunk.total_bytes());
        std::memcpy(value.data() + chunk.offset(), chunk.data().data(),
                    chunk.data().size());
        pulled.versions[chunk.name()] = chunk.version();
      }
    }
    const grpc::Status status = reader->Finish();
    if (!status.ok()) return rpc::FromGrpcStatus(status);
    return pulled;
  }

  // Sends `chunks`, `per_message` to a message, meant for `incarnation`
  // (0: any).
  absl::StatusOr<v1::PushResponse> Push(
      const std::string& job, const std::string& worker,
      const std::vector<v1::TensorChunk>& chunks, size_t per_message = 1,
      uint64_t incarnation = 0) {
    auto context = Context();
    v1::PushResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::PushRequest>> writer =
        stub_->Push(context.get(), &response);
    v1::PushRequest request;
    request.set_job_id(job);
    request.set_worker(worker);
    std::set<std::string> names;
    for (const v1::TensorChunk& chunk : chunks) names.insert(chunk.name());
    request.set_num_variables(static_cast<int32_t>(names.size()));
    request.set_incarnation(incarnation);
    for (size_t i = 0; i < chunks.size(); ++i) {
      *request.add_chunks() = chunks[i];
      if (request.chunks_size() == static_cast<int>(per_message) ||
          i + 1 == chunks.size()) {
        // A write fails once the server has finished the call with an
        // error; Finish() then says which.
        if (!writer->Write(request)) break;
        request.Clear();
      }
    }
    writer->WritesDone();
    const grpc::Status status = writer->Finish();
    if (!status.ok()) return rpc::FromGrpcStatus(status);
    return response;
  }

  // A Push stream of `messages` as raw bytes, parsable or not: what a
  // damaged or hostile sender can put on the wire.
  grpc::Status RawPush(const std::vector<std::string>& messages) {
    grpc::CompletionQueue cq;
    grpc::GenericStub stub(connection_->channel());
    auto context = Context();
    // Each step waits for its own tag; the call's deadline bounds each wait.
    auto step = [&cq] {
      void* tag = nullptr;
      bool ok = false;
      return cq.Next(&tag, &ok) && ok;
    };
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
        stub.PrepareCall(context.get(), "/cohort.v1.ParameterServer/Push", &cq);
    call->StartCall(nullptr);
    bool open = step();
    for (const std::string& bytes : messages) {
      if (!open) break;
      grpc::Slice slice(bytes);
      call->Write(grpc::ByteBuffer(&slice, 1), nullptr);
      open = step();
    }
    if (open) {
      call->WritesDone(nullptr);
      step();
    }
    grpc::ByteBuffer response;
    call->Read(&response, nullptr);
    step();
    grpc::Status status;
    call->Finish(&status, nullptr);
    step();
    cq.Shutdown();
    while (step()) {
    }
    return status;
  }

 private:
  task::TaskRuntime runtime_;
  ps::VariableStore store_;
  std::unique_ptr<ps::SnapshotDir> dir_;
  std::unique_ptr<ps::SnapshotLoop> loop_;
  std::unique_ptr<ps::PsService> service_;
  rpc::RpcServer server_;
  std::unique_ptr<rpc::Connection> connection_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

class PsIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    v1::PsVariableSpec w = Spec("w", {8, 16});
    w.mutable_optimizer()->set_kind(v1::PsOptimizer::SGD);
    w.mutable_optimizer()->set_learning_rate(0.5);
    w.set_initial(Bytes(std::vector<float>(128, 1.0f)));
    absl::StatusOr<v1::CreateVariablesResponse> created =
        shard_.Create("job-a", 1, {w, Spec("b", {4})});
    ASSERT_TRUE(created.ok()) << created.status();
    EXPECT_EQ(created->created(), 2);
    EXPECT_NE(created->shard().incarnation(), 0u);
  }

  // A valid push and pull of `w`: the shard is still serving.
  void ExpectServing() {
    const int64_t before = shard_.store().updates();
    absl::StatusOr<v1::PushResponse> pushed =
        shard_.Push("job-a", "worker:0",
                    {Chunk("w", 0, Bytes(std::vector<float>(128, 0.0f)), 512)});
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    EXPECT_EQ(pushed->applied(), 1);
    EXPECT_EQ(pushed->shard().updates(), before + 1);
    absl::StatusOr<Pulled> pulled = shard_.Pull("job-a", {"w", "b"});
    ASSERT_TRUE(pulled.ok()) << pulled.status();
    EXPECT_EQ(pulled->values["w"].size(), 512u);
  }

  PsShardHarness shard_{/*max_chunk_bytes=*/1 << 20};
};

TEST_F(PsIntegrationTest, PushAppliesTheOptimizerAndPullSeesIt) {
  absl::StatusOr<v1::PushResponse> pushed =
      shard_.Push("job-a", "worker:0",
                  {Chunk("w", 0, Bytes(std::vector<float>(128, 0.5f)), 512),
                   Chunk("b", 0, Bytes<float>({1, 2, 3, 4}), 16)},
                  /*per_message=*/2);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->applied(), 2);
  EXPECT_EQ(pushed->shard().updates(), 1);  // one push of two variables
  EXPECT_EQ(pushed->shard().shard_id(), 0);

  absl::StatusOr<Pulled> pulled = shard_.Pull("job-a", {"w", "b"});
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  // SGD: 1 - 0.5 * 0.5; b (no optimizer) takes the pushed value.
  EXPECT_THAT(Values<float>(pulled->values["w"]), ::testing::Each(0.75f));
  EXPECT_THAT(Values<float>(pulled->values["b"]),
              ::testing::ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(pulled->versions["w"], 1);
  EXPECT_EQ(pulled->messages, 1);  // small variables share one message
  EXPECT_EQ(pulled->shard.updates(), 1);
}

TEST_F(PsIntegrationTest, APushMeantForAnotherIncarnationIsRefusedUnapplied) {
  absl::StatusOr<Pulled> before = shard_.Pull("job-a", {"w"});
  ASSERT_TRUE(before.ok()) << before.status();
  const uint64_t incarnation = before->shard.incarnation();
  const std::vector<v1::TensorChunk> gradient = {
      Chunk("w", 0, Bytes(std::vector<float>(128, 0.5f)), 512)};

  // What a sender that last heard from an earlier incarnation sends.
  absl::StatusOr<v1::PushResponse> refused =
      shard_.Push("job-a", "worker:0", gradient, 1, incarnation + 1);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(refused.status().message(),
              HasSubstr(absl::StrCat("meant for incarnation ", incarnation + 1,
                                     ", this is incarnation ", incarnation,
                                     "; none of it was applied")));
  absl::StatusOr<Pulled> after = shard_.Pull("job-a", {"w"});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->values["w"], before->values["w"]);
  EXPECT_EQ(after->shard.updates(), 0);

  absl::StatusOr<v1::PushResponse> pushed =
      shard_.Push("job-a", "worker:0", gradient, 1, incarnation);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->applied(), 1);
}

TEST_F(PsIntegrationTest, PullOfAnUnknownVariableIsNotFound) {
  absl::StatusOr<Pulled> pulled = shard_.Pull("job-a", {"w", "dense/bias"});
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pulled.status().message(),
            "variable 'dense/bias' is not on ps shard 0");
  ExpectServing();
}

TEST_F(PsIntegrationTest, PushOfTheWrongSizeIsInvalidArgument) {
  absl::StatusOr<v1::PushResponse> pushed = shard_.Push(
      "job-a", "worker:0", {Chunk("w", 0, std::string(400, '\0'), 400)});
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pushed.status().message(),
            "push of 'w': 400 bytes, the variable has 512 (shape [8,16] "
            "float32)");
  ExpectServing();

  // The right total, but a stream that ends early.
  pushed = shard_.Push("job-a", "worker:0",
                       {Chunk("w", 0, std::string(400, '\0'), 512)});
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(pushed.status().message()),
              HasSubstr("400 of its 512 bytes"));
  ExpectServing();
}

TEST_F(PsIntegrationTest, CreateWithAnotherShapeOrDtypeIsInvalidArgument) {
  absl::StatusOr<v1::CreateVariablesResponse> created =
      shard_.Create("job-a", 1, {Spec("b", {4}, v1::PS_FLOAT64)});
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(created.status().message()),
              HasSubstr("variable 'b' exists on ps shard 0 with shape [4] "
                        "float32"));
  EXPECT_THAT(std::string(created.status().message()),
              HasSubstr("shape [4] float64"));
  created = shard_.Create("job-a", 1, {Spec("b", {2, 2})});
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  ExpectServing();
  // Declaring it as it is stays fine, and creates nothing.
  created = shard_.Create("job-a", 1, {Spec("b", {4})});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->created(), 0);
}

TEST_F(PsIntegrationTest, AnOversizedChunkIsInvalidArgument) {
  PsShardHarness small(/*max_chunk_bytes=*/256);
  ASSERT_TRUE(small.Create("job", 1, {Spec("w", {128})}).ok());
  absl::StatusOr<v1::PushResponse> pushed = small.Push(
      "job", "worker:0", {Chunk("w", 0, std::string(512, 'x'), 512)});
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(pushed.status().message()),
              HasSubstr("push chunk of 'w' has 512 bytes, over the limit of "
                        "256"));
  // The same bytes in two chunks go through.
  pushed =
      small.Push("job", "worker:0", Chunks("w", std::string(512, 'x'), 256));
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->applied(), 1);
}

TEST_F(PsIntegrationTest, AnotherJobsVariablesArePermissionDenied) {
  absl::StatusOr<v1::PushResponse> pushed =
      shard_.Push("job-b", "worker:0",
                  {Chunk("w", 0, Bytes(std::vector<float>(128, 0.0f)), 512)});
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(pushed.status().message()),
              HasSubstr("holds the variables of job 'job-a', not of job "
                        "'job-b'"));
  absl::StatusOr<Pulled> pulled = shard_.Pull("job-b", {"w"});
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kPermissionDenied);
  ExpectServing();

  // A newer job takes the shard over; then the old one is refused.
  ASSERT_TRUE(shard_.Create("job-b", 2, {Spec("v", {2})}).ok());
  EXPECT_EQ(shard_.Pull("job-a", {"w"}).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(shard_.Create("job-a", 1, {Spec("w", {8, 16})}).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(shard_.Pull("job-b", {"v"}).ok());
}

TEST_F(PsIntegrationTest, APushCutShortByAnUnparsableMessageIsRefused) {
  // gRPC ends the server's side of a stream alike when the sender closes it
  // and when a message cannot be parsed; acknowledging that push would tell
  // the worker that `w` was applied when it never arrived.
  v1::PushRequest first;
  first.set_job_id("job-a");
  first.set_worker("worker:0");
  first.set_num_variables(2);
  *first.add_chunks() = Chunk("b", 0, Bytes<float>({1, 2, 3, 4}), 16);
  const grpc::Status status =
      shard_.RawPush({first.SerializeAsString(), "\xff\xff\xff"});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr("the push ended after 1 of its 2 variables"));

  // A first message that cannot be parsed is no push at all.
  const grpc::Status unread = shard_.RawPush({"\xff\xff\xff"});
  EXPECT_EQ(unread.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(unread.error_message(),
              HasSubstr("the push ended before its first message"));
  // A sender built before the count (0) is not checked against one.
  first.set_num_variables(0);
  EXPECT_TRUE(shard_.RawPush({first.SerializeAsString()}).ok());
  ExpectServing();
}

TEST_F(PsIntegrationTest, EveryCallNeedsTheToken) {
  rpc::Connection anonymous(shard_.server().DialAddress(), rpc::Security{});
  auto stub = v1::ParameterServer::NewStub(anonymous.channel());
  v1::CreateVariablesResponse created;
  EXPECT_EQ(stub->CreateVariables(anonymous.NewContext(kRpcTimeout).get(),
                                  v1::CreateVariablesRequest(), &created)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto context = anonymous.NewContext(kRpcTimeout);
  auto reader = stub->Pull(context.get(), v1::PullRequest());
  v1::PullResponse message;
  while (reader->Read(&message)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  auto push_context = anonymous.NewContext(kRpcTimeout);
  v1::PushResponse pushed;
  auto writer = stub->Push(push_context.get(), &pushed);
  writer->WritesDone();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  ExpectServing();
}

TEST_F(PsIntegrationTest, TheCoordinatorPullsOnlyTheNamedAndRefusesTooMuch) {
  const std::vector<std::string> shards = {shard_.server().DialAddress()};
  const rpc::Security security{.token = std::string(kToken)};
  // "w" holds 512 bytes and "b" 16: asking for "b" alone fits in 100, so
  // "w" was not pulled.
  absl::StatusOr<std::vector<v1::VariableValue>> b =
      coordinator::FetchPsVariables(shards, security, "job-a", "", {"b"},
                                    kRpcTimeout, /*max_bytes=*/100);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->size(), 1u);
  EXPECT_EQ((*b)[0].name(), "b");
  EXPECT_EQ((*b)[0].value().size(), 16u);

  absl::StatusOr<std::vector<v1::VariableValue>> all =
      coordinator::FetchPsVariables(shards, security, "job-a", "", {},
                                    kRpcTimeout,
                                    /*max_bytes=*/100);
  EXPECT_EQ(all.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(all.status().message(), HasSubstr("fetch fewer of them by name"));
  all = coordinator::FetchPsVariables(shards, security, "job-a", "", {},
                                      kRpcTimeout, /*max_bytes=*/528);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 2u);

  absl::StatusOr<std::vector<v1::VariableValue>> missing =
      coordinator::FetchPsVariables(shards, security, "job-a", "", {"zz"},
                                    kRpcTimeout, /*max_bytes=*/100);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("no ps task holds variable zz; the job's variables "
                        "are: b, w"));
}

TEST_F(PsIntegrationTest, TheCoordinatorReadsOnlyTheJobOfTheUidItAsksFor) {
  // A shard that outlived a coordinator holds the earlier cluster's job 1;
  // the new cluster's job 1 has another uid and must not read its values.
  v1::CreateVariablesRequest earlier;
  *earlier.add_variables() = Spec("v", {2});
  ASSERT_TRUE(
      shard_.store()
          .Create("1", 2, earlier.variables(), "uid-earlier", "cluster-earlier")
          .ok());
  const std::vector<std::string> shards = {shard_.server().DialAddress()};
  const rpc::Security security{.token = std::string(kToken)};
  absl::StatusOr<std::vector<v1::VariableValue>> other =
      coordinator::FetchPsVariables(shards, security, "1", "uid-new", {},
                                    kRpcTimeout, /*max_bytes=*/100);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.status().message(), HasSubstr("uid-earlier"));

  absl::StatusOr<std::vector<v1::VariableValue>> own =
      coordinator::FetchPsVariables(shards, security, "1", "uid-earlier", {},
                                    kRpcTimeout, /*max_bytes=*/100);
  ASSERT_TRUE(own.ok()) << own.status();
  ASSERT_EQ(own->size(), 1u);
  EXPECT_EQ((*own)[0].name(), "v");
}

TEST_F(PsIntegrationTest, ALargeVariableMovesInChunks) {
  // 10 MiB with 1 MiB chunks.
  constexpr int64_t kElements = (10 << 20) / 4;
  v1::PsVariableSpec big = Spec("embedding", {kElements / 64, 64});
  big.mutable_optimizer()->set_kind(v1::PsOptimizer::SGD);
  big.mutable_optimizer()->set_learning_rate(1.0);
  ASSERT_TRUE(shard_.Create("job-a", 1, {big}).ok());

  std::vector<float> gradient(kElements);
  for (int64_t i = 0; i < kElements; ++i) gradient[i] = float(i % 1000);
  std::vector<v1::TensorChunk> chunks =
      Chunks("embedding", Bytes(gradient), 1 << 20);
  ASSERT_EQ(chunks.size(), 10u);
  // Out of order, to show the shard reassembles by offset.
  std::swap(chunks[0], chunks[7]);
  absl::StatusOr<v1::PushResponse> pushed =
      shard_.Push("job-a", "worker:1", chunks);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->applied(), 1);

  absl::StatusOr<Pulled> pulled = shard_.Pull("job-a", {"embedding", "b"});
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_GE(pulled->messages, 10);
  const std::vector<float> value = Values<float>(pulled->values["embedding"]);
  ASSERT_EQ(value.size(), static_cast<size_t>(kElements));
  for (int64_t i = 0; i < kElements; ++i) {
    ASSERT_EQ(value[i], -gradient[i]) << "element " << i;
  }
  EXPECT_EQ(pulled->versions["embedding"], 1);
}

// A pull larger than the shard copies at once (16 MiB) streams in batches:
// the first ends with table1 (16 MiB), the second holds table2.
TEST_F(PsIntegrationTest, APullOfMoreThanOneBatchIsWhole) {
  constexpr int64_t kElements = (8 << 20) / 4;  // 8 MiB each
  std::vector<v1::PsVariableSpec> specs;
  std::vector<std::vector<float>> initial(3, std::vector<float>(kElements));
  for (int v = 0; v < 3; ++v) {
    for (int64_t i = 0; i < kElements; ++i) initial[v][i] = float(i % 997 + v);
    v1::PsVariableSpec spec =
        Spec(absl::StrCat("table", v), {kElements / 64, 64});
    spec.set_initial(Bytes(initial[v]));
    specs.push_back(std::move(spec));
  }
  ASSERT_TRUE(shard_.Create("job-a", 1, specs).ok());

  absl::StatusOr<Pulled> pulled =
      shard_.Pull("job-a", {"table0", "table1", "table2"});
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  for (int v = 0; v < 3; ++v) {
    EXPECT_EQ(Values<float>(pulled->values[absl::StrCat("table", v)]),
              initial[v])
        << "table" << v;
  }
}

TEST(PsSnapshotIntegrationTest, ARestartedShardRestoresItsSnapshot) {
  ScratchDir dir;
  const std::string state_dir = dir.path() + "/ps/0";
  uint64_t first_incarnation = 0;
  {
    PsShardHarness shard(1 << 20, state_dir);
    v1::PsVariableSpec w = Spec("w", {4});
    w.mutable_optimizer()->set_kind(v1::PsOptimizer::ADAM);
    w.mutable_optimizer()->set_learning_rate(0.1);
    absl::StatusOr<v1::CreateVariablesResponse> created =
        shard.Create("job", 3, {w});
    ASSERT_TRUE(created.ok()) << created.status();
    first_incarnation = created->shard().incarnation();
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(shard
                      .Push("job", "worker:0",
                            {Chunk("w", 0, Bytes<float>({1, 2, 3, 4}), 16)})
                      .ok());
    }
    v1::SnapshotResponse response;
    const grpc::Status status = shard.stub().Snapshot(
        shard.Context().get(), v1::SnapshotRequest(), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.updates(), 3);
    EXPECT_THAT(response.path(),
                HasSubstr("/ps/0/snapshot-00000000000000000003.bin"));
  }
  PsShardHarness restarted(1 << 20, state_dir);
  // Workers re-declare their variables after a restart; values stay.
  v1::PsVariableSpec w = Spec("w", {4});
  w.mutable_optimizer()->set_kind(v1::PsOptimizer::ADAM);
  w.mutable_optimizer()->set_learning_rate(0.1);
  absl::StatusOr<v1::CreateVariablesResponse> created =
      restarted.Create("job", 3, {w});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->created(), 0);
  EXPECT_EQ(created->shard().restored_updates(), 3);
  EXPECT_NE(created->shard().incarnation(), first_incarnation);
  absl::StatusOr<Pulled> pulled = restarted.Pull("job", {"w"});
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->versions["w"], 3);
  // Three Adam steps of about lr each, against the gradients' signs.
  for (float x : Values<float>(pulled->values["w"])) EXPECT_NEAR(x, -0.3, 0.01);
}

TEST(PsSnapshotIntegrationTest, APushCountsOnceTowardsTheDurabilityBound) {
  // Regression: each variable of a push counted as an update, so a model of
  // more variables than the bound waited for a snapshot at every push.
  ScratchDir dir;
  const std::string state_dir = dir.path() + "/ps/0";
  PsShardHarness shard(1 << 20, state_dir, /*ack_within_updates=*/2);
  ASSERT_TRUE(
      shard.Create("job", 1, {Spec("a", {4}), Spec("b", {4}), Spec("c", {4})})
          .ok());
  ps::SnapshotDir snapshots(state_dir);
  const size_t after_create = snapshots.List()->size();
  auto push = [&shard] {
    return shard.Push("job", "worker:0",
                      {Chunk("a", 0, Bytes<float>({1, 2, 3, 4}), 16),
                       Chunk("b", 0, Bytes<float>({1, 2, 3, 4}), 16),
                       Chunk("c", 0, Bytes<float>({1, 2, 3, 4}), 16)},
                      /*per_message=*/3);
  };
  for (int i = 1; i <= 2; ++i) {
    absl::StatusOr<v1::PushResponse> pushed = push();
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    EXPECT_EQ(pushed->applied(), 3);
    EXPECT_EQ(pushed->shard().updates(), i);
  }
  // Two pushes may wait undurable: none was held for a snapshot.
  EXPECT_EQ(snapshots.List()->size(), after_create);
  // The third is acknowledged once a snapshot holds the first.
  ASSERT_TRUE(push().ok());
  EXPECT_EQ(snapshots.List()->size(), after_create + 1);
}

TEST(PsSnapshotIntegrationTest, ACreateIsAcknowledgedOnlyOnceSaved) {
  // Regression: a create whose snapshot failed was acknowledged, and so was
  // its retry; a restart then brought back the shard's previous owner.
  ScratchDir dir;
  const std::string state_dir = dir.path() + "/ps/0";
  PsShardHarness shard(1 << 20, state_dir);
  std::filesystem::remove_all(state_dir);
  std::filesystem::create_directories(dir.path() + "/ps");
  ASSERT_TRUE(WriteFileAtomically(state_dir, "a file, not a directory").ok());

  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<v1::CreateVariablesResponse> created =
        shard.Create("job", 1, {Spec("w", {4})});
    EXPECT_EQ(created.status().code(), absl::StatusCode::kFailedPrecondition)
        << "attempt " << attempt << ": " << created.status();
    EXPECT_THAT(created.status().message(),
                HasSubstr("ps shard 0 holds the variables but could not "
                          "save them"));
  }

  // The disk mended, the retry saves them.
  ASSERT_TRUE(std::filesystem::remove(state_dir));
  absl::StatusOr<v1::CreateVariablesResponse> created =
      shard.Create("job", 1, {Spec("w", {4})});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->created(), 0);
  ps::SnapshotDir snapshots(state_dir);
  EXPECT_EQ(snapshots.List()->size(), 1u);
  // Declared again, nothing new: acknowledged without another snapshot.
  ASSERT_TRUE(shard.Create("job", 1, {Spec("w", {4})}).ok());
  EXPECT_EQ(snapshots.List()->size(), 1u);
}

TEST(PsSnapshotIntegrationTest, WithoutAStateDirSnapshotIsRefused) {
  PsShardHarness shard(1 << 20);
  v1::SnapshotResponse response;
  const grpc::Status status = shard.stub().Snapshot(
      shard.Context().get(), v1::SnapshotRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("--state_dir"));
}

}  // namespace
}  // namespace cohort::testing
