#include "coordinator/variable_fetcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

namespace cohort::coordinator {
namespace {

using ::testing::HasSubstr;

StoredPart Part(const std::string& name, std::vector<int64_t> shape,
                std::vector<float> values, int64_t updates = 1) {
  StoredPart part;
  part.spec.set_name(name);
  part.spec.mutable_shape()->Add(shape.begin(), shape.end());
  part.spec.set_dtype(v1::PS_FLOAT32);
  part.value.assign(reinterpret_cast<const char*>(values.data()),
                    values.size() * sizeof(float));
  part.updates = updates;
  return part;
}

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

TEST(JoinPartsTest, PartsFromAnyShardJoinAlongTheFirstAxisInOrder) {
  std::vector<StoredPart> parts = {Part("w/part_1", {1, 2}, {5, 6}, 3),
                                   Part("b", {2}, {9, 8}),
                                   Part("w/part_0", {2, 2}, {1, 2, 3, 4}, 4)};
  absl::StatusOr<std::vector<v1::VariableValue>> joined =
      JoinParts(std::move(parts), {});
  ASSERT_TRUE(joined.ok()) << joined.status();
  ASSERT_EQ(joined->size(), 2u);
  const v1::VariableValue& w = (*joined)[1];
  EXPECT_EQ(w.name(), "w");
  EXPECT_EQ(w.dtype(), "float32");
  EXPECT_THAT(w.shape(), ::testing::ElementsAre(3, 2));
  EXPECT_THAT(Floats(w.value()), ::testing::ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(w.updates(), 7);
  EXPECT_THAT(Floats((*joined)[0].value()), ::testing::ElementsAre(9, 8));
}

TEST(JoinPartsTest, KeepsOnlyTheNamedAndNamesTheMissing) {
  absl::StatusOr<std::vector<v1::VariableValue>> some =
      JoinParts({Part("a", {1}, {1}), Part("b", {1}, {2})}, {"b"});
  ASSERT_TRUE(some.ok()) << some.status();
  ASSERT_EQ(some->size(), 1u);
  EXPECT_EQ((*some)[0].name(), "b");

  absl::StatusOr<std::vector<v1::VariableValue>> missing =
      JoinParts({Part("a", {1}, {1})}, {"zz"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("zz"));
  EXPECT_THAT(missing.status().message(), HasSubstr("are: a"));
}

TEST(JoinPartsTest, PartsThatDoNotFitAreDataLoss) {
  // part_1 of 3 is missing.
  EXPECT_EQ(
      JoinParts({Part("w/part_0", {1}, {1}), Part("w/part_2", {1}, {3})}, {})
          .status()
          .code(),
      absl::StatusCode::kDataLoss);
  // The last of 3 parts is missing (its shard restarted empty), or the
  // first of 2: only the count the parts carry tells.
  StoredPart first = Part("w/part_0", {1}, {1}),
             second = Part("w/part_1", {1}, {2});
  first.spec.set_num_parts(3);
  second.spec.set_num_parts(3);
  absl::StatusOr<std::vector<v1::VariableValue>> short_of_one =
      JoinParts({first, second}, {});
  EXPECT_EQ(short_of_one.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(short_of_one.status().message(),
              HasSubstr("2 of its 3 parts were found"));
  second.spec.set_num_parts(2);
  EXPECT_EQ(JoinParts({second}, {}).status().code(),
            absl::StatusCode::kDataLoss);
  first.spec.set_num_parts(2);
  EXPECT_TRUE(JoinParts({first, second}, {}).ok());
  // Rows of different widths.
  absl::StatusOr<std::vector<v1::VariableValue>> widths = JoinParts(
      {Part("w/part_0", {1, 2}, {1, 2}), Part("w/part_1", {1, 3}, {3, 4, 5})},
      {});
  EXPECT_EQ(widths.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(widths.status().message(), HasSubstr("[1,3]"));
  // A value that is not its shape's size.
  StoredPart short_value = Part("v", {4}, {1, 2});
  EXPECT_EQ(JoinParts({short_value}, {}).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cohort::coordinator
