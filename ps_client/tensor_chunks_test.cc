#include "ps_client/tensor_chunks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

namespace cohort::ps {
namespace {

using ::testing::HasSubstr;

std::string Bytes(int n, char first = 0) {
  std::string s(n, 0);
  std::iota(s.begin(), s.end(), first);
  return s;
}

// {name, offset, size} of each chunk of each message.
std::vector<std::vector<std::tuple<std::string, int64_t, int64_t>>> Layout(
    const std::vector<PushSlice>& slices, int64_t max_chunk_bytes) {
  PushChunker chunker(&slices, max_chunk_bytes, "job", "uid-1", "worker:0",
                      /*incarnation=*/7);
  std::vector<std::vector<std::tuple<std::string, int64_t, int64_t>>> out;
  v1::PushRequest request;
  bool first = true;
  while (chunker.Next(&request)) {
    EXPECT_EQ(request.job_id(), first ? "job" : "");
    EXPECT_EQ(request.job_uid(), first ? "uid-1" : "");
    EXPECT_EQ(request.worker(), first ? "worker:0" : "");
    EXPECT_EQ(request.incarnation(), first ? 7u : 0u);
    EXPECT_EQ(request.num_variables(),
              first ? static_cast<int>(slices.size()) : 0);
    first = false;
    auto& message = out.emplace_back();
    for (const v1::TensorChunk& c : request.chunks()) {
      message.emplace_back(c.name(), c.offset(),
                           static_cast<int64_t>(c.data().size()));
    }
  }
  EXPECT_TRUE(chunker.Done());
  return out;
}

using Msg = std::vector<std::tuple<std::string, int64_t, int64_t>>;

TEST(PushChunkerTest, BatchesSmallSlicesAndCutsLargeOnes) {
  const std::string a = Bytes(3), b = Bytes(10), c = Bytes(2);
  std::vector<PushSlice> slices = {{"a", a}, {"b", b}, {"c", c}};
  EXPECT_EQ(Layout(slices, 4), (std::vector<Msg>{{{"a", 0, 3}, {"b", 0, 1}},
                                                 {{"b", 1, 4}},
                                                 {{"b", 5, 4}},
                                                 {{"b", 9, 1}, {"c", 0, 2}}}));
  EXPECT_EQ(Layout(slices, 100),
            (std::vector<Msg>{{{"a", 0, 3}, {"b", 0, 10}, {"c", 0, 2}}}));
}

TEST(PushChunkerTest, AnEmptySliceStillSendsOneChunk) {
  const std::string a = Bytes(4);
  std::vector<PushSlice> slices = {{"e", {}}, {"a", a}};
  EXPECT_EQ(Layout(slices, 4), (std::vector<Msg>{{{"e", 0, 0}, {"a", 0, 4}}}));
}

TEST(PushChunkerTest, NothingToSendIsNoMessage) {
  std::vector<PushSlice> slices;
  EXPECT_TRUE(Layout(slices, 4).empty());
}

TEST(PushChunkerTest, ChunksCarryTheBytesAndTotals) {
  const std::string b = Bytes(10, 'a');
  std::vector<PushSlice> slices = {{"b", b}};
  PushChunker chunker(&slices, 4, "job", "", "w", /*incarnation=*/0);
  std::string joined;
  v1::PushRequest request;
  while (chunker.Next(&request)) {
    for (const v1::TensorChunk& c : request.chunks()) {
      EXPECT_EQ(c.total_bytes(), 10);
      EXPECT_EQ(c.offset(), static_cast<int64_t>(joined.size()));
      joined += c.data();
    }
  }
  EXPECT_EQ(joined, b);
}

v1::TensorChunk Chunk(const std::string& name, int64_t offset, int64_t total,
                      const std::string& data) {
  v1::TensorChunk c;
  c.set_name(name);
  c.set_offset(offset);
  c.set_total_bytes(total);
  c.set_data(data);
  return c;
}

TEST(PullAssemblerTest, PutsChunksInPlaceInAnyOrder) {
  std::string a(6, '.'), b(2, '.');
  PullAssembler assembler({{"a", absl::MakeSpan(a)}, {"b", absl::MakeSpan(b)}});
  ASSERT_TRUE(assembler.Add(Chunk("a", 3, 6, "def")).ok());
  EXPECT_THAT(std::string(assembler.Finish().message()),
              HasSubstr("\"a\" ended with 3 of 6 bytes"));
  ASSERT_TRUE(assembler.Add(Chunk("b", 0, 2, "xy")).ok());
  ASSERT_TRUE(assembler.Add(Chunk("a", 0, 6, "abc")).ok());
  EXPECT_TRUE(assembler.Finish().ok());
  EXPECT_EQ(a, "abcdef");
  EXPECT_EQ(b, "xy");
}

TEST(PullAssemblerTest, RejectsWhatWasNotAskedForOrDoesNotFit) {
  std::string a(4, '.');
  PullAssembler assembler({{"a", absl::MakeSpan(a)}});
  EXPECT_THAT(std::string(assembler.Add(Chunk("z", 0, 4, "abcd")).message()),
              HasSubstr("\"z\", not asked for"));
  EXPECT_THAT(std::string(assembler.Add(Chunk("a", 0, 8, "abcd")).message()),
              HasSubstr("holds 8 bytes, this worker expects 4"));
  EXPECT_THAT(std::string(assembler.Add(Chunk("a", 2, 4, "abc")).message()),
              HasSubstr("out of range"));
  EXPECT_THAT(std::string(assembler.Add(Chunk("a", -1, 4, "a")).message()),
              HasSubstr("out of range"));
  ASSERT_TRUE(assembler.Add(Chunk("a", 0, 4, "abcd")).ok());
  EXPECT_THAT(std::string(assembler.Add(Chunk("a", 0, 4, "ab")).message()),
              HasSubstr("repeats"));
}

TEST(PullAssemblerTest, AChunkOverlappingAnotherIsRefused) {
  // The second chunk repeats byte 1 and would leave byte 3 unwritten with
  // the count of bytes received complete.
  std::string a(4, '.');
  PullAssembler assembler({{"a", absl::MakeSpan(a)}});
  ASSERT_TRUE(assembler.Add(Chunk("a", 0, 4, "ab")).ok());
  EXPECT_THAT(std::string(assembler.Add(Chunk("a", 1, 4, "bc")).message()),
              HasSubstr("repeats"));
  ASSERT_TRUE(assembler.Add(Chunk("a", 3, 4, "d")).ok());
  EXPECT_THAT(std::string(assembler.Add(Chunk("a", 1, 4, "bcd")).message()),
              HasSubstr("repeats"));
  ASSERT_TRUE(assembler.Add(Chunk("a", 2, 4, "c")).ok());
  ASSERT_TRUE(assembler.Finish().ok());
  EXPECT_EQ(a, "abcd");
}

}  // namespace
}  // namespace cohort::ps
