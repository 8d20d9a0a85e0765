#include "examples/fashion_mnist/idx_file.h"

#include <zlib.h>

#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cohort::examples {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dims
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dim

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// A whole gzip file, decompressed.
absl::StatusOr<std::string> ReadGzip(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return absl::NotFoundError(absl::StrCat(
        path,
        ": no such file (install dataset-fashion-mnist, or give the directory "
        "of the IDX files: a job's \"source_dir\", "
        "cohort-example-fmnist-data's --source)"));
  }
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  }
  std::string out;
  char buffer[1 << 16];
  while (true) {
    const int n = gzread(file.get(), buffer, sizeof(buffer));
    if (n < 0) {
      int code = 0;
      const char* message = gzerror(file.get(), &code);
      return absl::DataLossError(
          absl::StrCat(path, ": corrupt gzip data (", message, ")"));
    }
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  // zlib reports a stream cut short only here, as Z_BUF_ERROR.
  int code = 0;
  const char* message = gzerror(file.get(), &code);
  if (code != Z_OK) {
    return absl::DataLossError(absl::StrCat(
        path, ": truncated or corrupt gzip file after ", out.size(),
        " bytes (", message, ")"));
  }
  return out;
}

uint32_t BigEndian32(const std::string& bytes, size_t at) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data()) + at;
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 |
         uint32_t{p[3]};
}

// The IDX payload after checking the magic and `dims` dimensions (returned).
absl::StatusOr<std::string> ReadIdx(const std::string& path, uint32_t magic,
                                    const char* what,
                                    std::vector<uint32_t>& dims) {
  absl::StatusOr<std::string> bytes = ReadGzip(path);
  if (!bytes.ok()) return bytes.status();
  const size_t header = 4 + 4 * dims.size();
  if (bytes->size() < header) {
    return absl::DataLossError(absl::StrCat(path, ": ", bytes->size(),
                                            " bytes, too short for an IDX ",
                                            what, " header"));
  }
  const uint32_t got = BigEndian32(*bytes, 0);
  if (got != magic) {
    return absl::DataLossError(absl::StrFormat(
        "%s: magic number 0x%08x, expected 0x%08x (IDX %s)", path, got, magic,
        what));
  }
  uint64_t payload = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    dims[d] = BigEndian32(*bytes, 4 + 4 * d);
    payload *= dims[d];
  }
  if (bytes->size() - header != payload) {
    return absl::DataLossError(absl::StrCat(
        path, ": the header promises ", payload, " bytes of ", what,
        ", and the file holds ", bytes->size() - header));
  }
  return bytes->substr(header);
}

}  // namespace

absl::StatusOr<FashionMnistSplit> ReadFashionMnist(const std::string& dir,
                                                   const std::string& split) {
  const std::string images_path =
      absl::StrCat(dir, "/", split, "-images-idx3-ubyte.gz");
  const std::string labels_path =
      absl::StrCat(dir, "/", split, "-labels-idx1-ubyte.gz");
  std::vector<uint32_t> image_dims(3), label_dims(1);
  absl::StatusOr<std::string> images =
      ReadIdx(images_path, kImagesMagic, "images", image_dims);
  if (!images.ok()) return images.status();
  if (image_dims[1] != 28 || image_dims[2] != 28) {
    return absl::DataLossError(absl::StrCat(images_path, ": images of ",
                                            image_dims[1], "x", image_dims[2],
                                            ", expected 28x28"));
  }
  absl::StatusOr<std::string> labels =
      ReadIdx(labels_path, kLabelsMagic, "labels", label_dims);
  if (!labels.ok()) return labels.status();
  if (label_dims[0] != image_dims[0]) {
    return absl::DataLossError(absl::StrCat(
        labels_path, " holds ", label_dims[0], " labels and ", images_path,
        " ", image_dims[0], " images"));
  }
  // Every accuracy over the split would be 0/0.
  if (image_dims[0] == 0) {
    return absl::DataLossError(absl::StrCat(images_path, " holds no images"));
  }
  FashionMnistSplit out;
  out.count = image_dims[0];
  out.examples.resize(static_cast<size_t>(out.count) * kExampleBytes);
  for (int64_t i = 0; i < out.count; ++i) {
    const uint8_t label = static_cast<uint8_t>((*labels)[static_cast<size_t>(i)]);
    if (label >= kFashionClasses) {
      return absl::DataLossError(absl::StrCat(labels_path, ": label ", int{label},
                                              " at index ", i,
                                              ", expected 0 to 9"));
    }
    char* e = out.examples.data() + static_cast<size_t>(i) * kExampleBytes;
    e[0] = static_cast<char>(label);
    std::copy_n(images->data() + static_cast<size_t>(i) * kImagePixels,
                kImagePixels, e + 1);
  }
  return out;
}

}  // namespace cohort::examples
