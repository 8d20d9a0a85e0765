#include "ps_server/push_assembler.h"

#include <cstring>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort::ps {
namespace {

using ::testing::HasSubstr;

v1::TensorChunk Chunk(const std::string& name, int64_t offset,
                      const std::string& data, int64_t total) {
  v1::TensorChunk chunk;
  chunk.set_name(name);
  chunk.set_offset(offset);
  chunk.set_data(data);
  chunk.set_total_bytes(total);
  return chunk;
}

class PushAssemblerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    google::protobuf::RepeatedPtrField<v1::PsVariableSpec> specs;
    v1::PsVariableSpec* w = specs.Add();
    w->set_name("w");
    w->add_shape(8);
    w->add_shape(16);
    w->set_dtype(v1::PS_INT32);  // no optimizer: a push assigns
    v1::PsVariableSpec* b = specs.Add();
    b->set_name("b");
    b->add_shape(4);
    b->set_dtype(v1::PS_INT32);
    ASSERT_TRUE(store_.Create("job", 1, specs).ok());
  }

  std::string Value(const std::string& name) {
    absl::StatusOr<std::vector<v1::PullResponse>> pulled =
        store_.Pull("job", {name}, 1 << 20);
    return pulled.ok() ? pulled->front().chunks(0).data() : "";
  }

  absl::Status Add(PushAssembler& assembler, v1::TensorChunk chunk) {
    return assembler.Add(&chunk);
  }

  VariableStore store_;
};

TEST_F(PushAssemblerTest, ChunksInAnyOrderApplyOnceComplete) {
  std::string value(512, '\0');
  for (int i = 0; i < 512; ++i) value[i] = char(i * 7);
  PushAssembler assembler(&store_, 200);
  ASSERT_TRUE(assembler.Begin("job", "worker:0", 2).ok());
  ASSERT_TRUE(Add(assembler, Chunk("w", 400, value.substr(400), 512)).ok());
  ASSERT_TRUE(Add(assembler, Chunk("w", 0, value.substr(0, 200), 512)).ok());
  EXPECT_EQ(assembler.applied(), 0);
  EXPECT_EQ(Value("w"), std::string(512, '\0'));
  ASSERT_TRUE(
      Add(assembler, Chunk("w", 200, value.substr(200, 200), 512)).ok());
  EXPECT_EQ(assembler.applied(), 1);
  EXPECT_EQ(Value("w"), value);
  // A whole small variable in one chunk.
  ASSERT_TRUE(Add(assembler, Chunk("b", 0, std::string(16, 'x'), 16)).ok());
  EXPECT_EQ(assembler.applied(), 2);
  EXPECT_TRUE(assembler.End().ok());
  // The service counts the push, once, at the stream's end.
  EXPECT_EQ(store_.updates(), 0);
}

TEST_F(PushAssemblerTest, AVariableCreatedAnewWithAnotherSizeMidPushIsRefused) {
  PushAssembler assembler(&store_, 200);
  ASSERT_TRUE(assembler.Begin("job", "worker:0", 1).ok());
  ASSERT_TRUE(Add(assembler, Chunk("w", 0, std::string(200, 'a'), 512)).ok());
  // The job's next attempt declares w twice as large.
  google::protobuf::RepeatedPtrField<v1::PsVariableSpec> specs;
  v1::PsVariableSpec* w = specs.Add();
  w->set_name("w");
  w->add_shape(16);
  w->add_shape(16);
  w->set_dtype(v1::PS_INT32);
  ASSERT_TRUE(store_.Create("job", 2, specs).ok());
  const absl::Status status =
      Add(assembler, Chunk("w", 800, std::string(200, 'b'), 1024));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), HasSubstr("'w' is now 1024 bytes"));
  EXPECT_EQ(Value("w"), std::string(1024, '\0'));
}

TEST_F(PushAssemblerTest, AVariableUpdatedTwiceInOnePushIsRefused) {
  // A second update of it would apply its gradient twice.
  PushAssembler assembler(&store_, 1024);
  ASSERT_TRUE(assembler.Begin("job", "worker:0", 1).ok());
  ASSERT_TRUE(Add(assembler, Chunk("b", 0, std::string(16, 'x'), 16)).ok());
  const absl::Status twice =
      Add(assembler, Chunk("b", 0, std::string(16, 'y'), 16));
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(twice.message(), "the push updates 'b' twice");
  EXPECT_EQ(Value("b"), std::string(16, 'x'));
}

TEST_F(PushAssemblerTest, AWrongTotalNamesBothSizesAndTheLayout) {
  PushAssembler assembler(&store_, 1024);
  ASSERT_TRUE(assembler.Begin("job", "", 1).ok());
  const absl::Status status =
      Add(assembler, Chunk("w", 0, std::string(400, 'x'), 400));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "push of 'w': 400 bytes, the variable has 512 (shape [8,16] "
            "int32)");
}

TEST_F(PushAssemblerTest, OversizedChunksAreRefused) {
  PushAssembler assembler(&store_, 100);
  ASSERT_TRUE(assembler.Begin("job", "", 1).ok());
  const absl::Status status =
      Add(assembler, Chunk("w", 0, std::string(101, 'x'), 512));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("101 bytes, over the limit of 100"));
}

TEST_F(PushAssemblerTest, OverlapsAndOutOfRangeChunksAreRefused) {
  PushAssembler assembler(&store_, 1024);
  ASSERT_TRUE(assembler.Begin("job", "", 1).ok());
  ASSERT_TRUE(Add(assembler, Chunk("w", 100, std::string(100, 'x'), 512)).ok());
  absl::Status status =
      Add(assembler, Chunk("w", 150, std::string(10, 'x'), 512));
  EXPECT_THAT(std::string(status.message()), HasSubstr("overlaps"));
  status = Add(assembler, Chunk("w", 50, std::string(51, 'x'), 512));
  EXPECT_THAT(std::string(status.message()), HasSubstr("overlaps"));
  status = Add(assembler, Chunk("w", 199, std::string(2, 'x'), 512));
  EXPECT_THAT(std::string(status.message()), HasSubstr("overlaps"));
  EXPECT_TRUE(Add(assembler, Chunk("w", 200, std::string(1, 'x'), 512)).ok());
  status = Add(assembler, Chunk("w", 500, std::string(13, 'x'), 512));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("[500, 513)"));
  status = Add(assembler, Chunk("w", -1, std::string(1, 'x'), 512));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  // An offset whose end overflows is named without the sum.
  status = Add(assembler, Chunk("w", std::numeric_limits<int64_t>::max() - 1,
                                std::string(8, 'x'), 512));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("covers 8 bytes from offset 9223372036854775806"));
}

TEST_F(PushAssemblerTest, TinyChunksInOrderApplyAndTinyChunksApartAreBounded) {
  google::protobuf::RepeatedPtrField<v1::PsVariableSpec> specs;
  v1::PsVariableSpec* big = specs.Add();
  big->set_name("big");
  big->add_shape(4096);
  big->set_dtype(v1::PS_INT32);
  ASSERT_TRUE(store_.Create("job", 1, specs).ok());
  const int64_t bytes = 4096 * 4;
  {
    PushAssembler assembler(&store_, 1024);
    ASSERT_TRUE(assembler.Begin("job", "", 1).ok());
    for (int64_t offset = 0; offset < bytes; ++offset) {
      ASSERT_TRUE(Add(assembler, Chunk("big", offset, "x", bytes)).ok())
          << offset;
    }
    EXPECT_EQ(assembler.applied(), 1);
  }
  PushAssembler assembler(&store_, 1024);
  ASSERT_TRUE(assembler.Begin("job", "", 1).ok());
  absl::Status status;
  int64_t offset = 0;
  for (; offset < bytes && status.ok(); offset += 2) {
    status = Add(assembler, Chunk("big", offset, "x", bytes));
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("arrived as more than 1024 pieces apart"));
  EXPECT_EQ(offset, 2 * 1025);
}

TEST_F(PushAssemblerTest, AnIncompleteVariableFailsTheEndOfTheStream) {
  PushAssembler assembler(&store_, 1024);
  ASSERT_TRUE(assembler.Begin("job", "", 1).ok());
  ASSERT_TRUE(Add(assembler, Chunk("w", 0, std::string(400, 'x'), 512)).ok());
  const absl::Status status = assembler.End();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "push ended with 'w' incomplete: 400 of its 512 bytes arrived");
  EXPECT_EQ(store_.updates(), 0);
}

TEST_F(PushAssemblerTest, StoreErrorsPassThrough) {
  PushAssembler assembler(&store_, 1024);
  EXPECT_EQ(assembler.Begin("", "", 1).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(assembler.Begin("job", "", 1).ok());
  EXPECT_EQ(Add(assembler, Chunk("nope", 0, "x", 1)).code(),
            absl::StatusCode::kNotFound);
  // Another job's push is refused at its first message.
  PushAssembler stranger(&store_, 1024);
  EXPECT_EQ(stranger.Begin("other-job", "", 1).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(PushAssemblerTest, AStreamEndingShortOfItsVariablesIsRefused) {
  // gRPC ends a stream alike when the sender closes it and when a message
  // cannot be parsed: the count alone tells a push cut short.
  PushAssembler assembler(&store_, 1024);
  ASSERT_TRUE(assembler.Begin("job", "worker:0", 2).ok());
  ASSERT_TRUE(Add(assembler, Chunk("b", 0, std::string(16, 'x'), 16)).ok());
  absl::Status status = assembler.End();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "the push ended after 1 of its 2 variables: a message was lost or "
            "could not be parsed");

  PushAssembler unread(&store_, 1024);
  status = unread.End();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "the push ended before its first message could be read");
}

TEST_F(PushAssemblerTest, AVariableBeyondTheAnnouncedCountIsRefusedUnapplied) {
  PushAssembler assembler(&store_, 1024);
  ASSERT_TRUE(assembler.Begin("job", "worker:0", 1).ok());
  ASSERT_TRUE(Add(assembler, Chunk("b", 0, std::string(16, 'x'), 16)).ok());
  const absl::Status status =
      Add(assembler, Chunk("w", 0, std::string(512, 'y'), 512));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "push chunk of 'w' is past the 1 variables the push's first "
            "message announced (num_variables)");
  EXPECT_EQ(Value("w"), std::string(512, '\0'));
}

TEST_F(PushAssemblerTest,
       AnUncountedPushIsNotCheckedAndANegativeCountIsRefused) {
  // A sender built before num_variables says 0: its pushes still apply.
  PushAssembler uncounted(&store_, 1024);
  ASSERT_TRUE(uncounted.Begin("job", "worker:0", 0).ok());
  ASSERT_TRUE(Add(uncounted, Chunk("b", 0, std::string(16, 'x'), 16)).ok());
  ASSERT_TRUE(Add(uncounted, Chunk("w", 0, std::string(512, 'y'), 512)).ok());
  EXPECT_TRUE(uncounted.End().ok());
  EXPECT_EQ(uncounted.applied(), 2);

  PushAssembler assembler(&store_, 1024);
  const absl::Status status = assembler.Begin("job", "worker:0", -1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("carries -1 variables (num_variables)"));
}

}  // namespace
}  // namespace cohort::ps
