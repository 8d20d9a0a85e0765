#include "common/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <system_error>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "cohort/step.h"
#include "common/crc32.h"
#include "common/file_util.h"
#include "common/names.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace cohort {
namespace {

using json = nlohmann::json;

constexpr absl::string_view kPrefix = "ckpt-";
constexpr absl::string_view kDataSuffix = ".data";
constexpr absl::string_view kManifestSuffix = ".json";
constexpr int kFormatVersion = 1;
// A manifest lists names, shapes and offsets: a model of a million tensors
// takes about a tenth of this. A larger file is damage, not read.
constexpr uint64_t kMaxManifestBytes = uint64_t{1} << 30;

std::string StepFile(const std::string& dir, int64_t step,
                     absl::string_view suffix) {
  return absl::StrCat(dir, "/", kPrefix, step, suffix);
}

std::string LatestFile(const std::string& dir) {
  return absl::StrCat(dir, "/latest");
}

// Bytes per element of the DType named `dtype`; 0 for a name that is not
// one.
size_t ElementSize(absl::string_view dtype) {
  DType type;
  return ParseDType(std::string_view(dtype.data(), dtype.size()), &type)
             ? DTypeSize(type)
             : 0;
}

// The bytes a tensor of `dtype` and `shape` holds; nullopt for a negative
// dimension, an unknown dtype or an overflow.
std::optional<uint64_t> TensorBytes(absl::string_view dtype,
                                    const std::vector<int64_t>& shape) {
  uint64_t bytes = ElementSize(dtype);
  if (bytes == 0) return std::nullopt;
  for (const int64_t dim : shape) {
    if (dim < 0 ||
        __builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) {
      return std::nullopt;
    }
  }
  return bytes;
}

absl::Status CheckTensors(const std::vector<SavedTensor>& tensors) {
  std::set<absl::string_view> names;
  for (const SavedTensor& t : tensors) {
    if (absl::Status name = CheckName("checkpoint tensor", t.name);
        !name.ok()) {
      return name;
    }
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint tensor \"", t.name, "\" appears twice"));
    }
    if (ElementSize(t.dtype) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint tensor \"", t.name, "\": unknown dtype \"",
                       t.dtype, "\" (want float32, float64, int32 or int64)"));
    }
    const std::optional<uint64_t> want = TensorBytes(t.dtype, t.shape);
    if (!want.has_value() || *want != t.bytes.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint tensor \"", t.name, "\": ", t.bytes.size(),
          " bytes for shape [", absl::StrJoin(t.shape, ", "), "] of ", t.dtype,
          want.has_value() ? absl::StrCat(", which needs ", *want)
                           : std::string(", which is not a valid shape")));
    }
  }
  return absl::OkStatus();
}

// The step of a file name "ckpt-<step>.data" or "ckpt-<step>.json".
std::optional<int64_t> StepOfFileName(absl::string_view name) {
  if (name.size() <= kPrefix.size() + kDataSuffix.size() ||
      name.substr(0, kPrefix.size()) != kPrefix) {
    return std::nullopt;
  }
  const absl::string_view suffix =
      name.substr(name.size() - kDataSuffix.size());
  if (suffix != kDataSuffix && suffix != kManifestSuffix) return std::nullopt;
  const absl::string_view digits = name.substr(
      kPrefix.size(), name.size() - kPrefix.size() - kDataSuffix.size());
  int64_t step = 0;
  if (!std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(digits, &step)) {
    return std::nullopt;
  }
  return step;
}

// Whether `name` is a temporary file of WriteFileAtomically for a
// checkpoint file ("ckpt-7.data.tmp.123.0", "latest.tmp.123.1").
bool IsTemporaryFile(absl::string_view name) {
  return (absl::StartsWith(name, kPrefix) ||
          absl::StartsWith(name, "latest")) &&
         absl::StrContains(name, ".tmp.");
}

// Deletes every checkpoint of `dir` but `step` and the newest `keep` - 1
// others, and temporary files: with one writer per directory, any left
// are of writes a crash cut short, and would fill the disk over restarts.
// The manifest goes first, so that a half-deleted checkpoint reads as
// missing rather than corrupt.
absl::Status Prune(const std::string& dir, int64_t step, int keep) {
  std::error_code error;
  std::set<int64_t, std::greater<>> others;
  std::vector<std::filesystem::path> temporaries;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const std::optional<int64_t> found = StepOfFileName(name);
    if (found.has_value() && *found != step) others.insert(*found);
    if (IsTemporaryFile(name)) temporaries.push_back(entry.path());
  }
  for (const std::filesystem::path& path : temporaries) {
    std::error_code ignored;  // a leftover that stays is retried next time
    std::filesystem::remove(path, ignored);
  }
  if (error) {
    return absl::InternalError(
        absl::StrCat(dir, ": checkpoint ", step,
                     " written, but cannot list old ones: ", error.message()));
  }
  int kept = 1;
  for (const int64_t old : others) {
    if (kept++ < keep) continue;
    for (const absl::string_view suffix : {kManifestSuffix, kDataSuffix}) {
      const std::string path = StepFile(dir, old, suffix);
      std::filesystem::remove(path, error);
      if (error) {
        return absl::InternalError(absl::StrCat(
            path, ": checkpoint ", step,
            " written, but cannot delete this old one: ", error.message()));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status DataLoss(const std::string& path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": ", what));
}

// Reads the non-negative integer `key` of `object`.
std::optional<uint64_t> GetUnsigned(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<uint64_t>();
}

std::optional<std::string> GetString(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

struct ManifestEntry {
  SavedTensor tensor;  // without bytes
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct Manifest {
  std::vector<ManifestEntry> entries;
  uint64_t data_size = 0;
  uint32_t data_crc32 = 0;
};

absl::StatusOr<ManifestEntry> ParseEntry(const json& t, size_t index,
                                         const std::string& path) {
  const std::string where = absl::StrCat("tensors[", index, "]");
  if (!t.is_object()) {
    return DataLoss(path, absl::StrCat(where, " is not an object"));
  }
  ManifestEntry entry;
  std::optional<std::string> name = GetString(t, "name");
  std::optional<std::string> dtype = GetString(t, "dtype");
  std::optional<uint64_t> offset = GetUnsigned(t, "offset");
  std::optional<uint64_t> size = GetUnsigned(t, "size");
  const auto shape = t.find("shape");
  if (!name || !dtype || !offset || !size || shape == t.end() ||
      !shape->is_array()) {
    return DataLoss(path, absl::StrCat(where,
                                       " needs string name and dtype, "
                                       "integer offset and size, array shape"));
  }
  for (const json& dim : *shape) {
    if (!dim.is_number_unsigned()) {
      return DataLoss(path, absl::StrCat(where, " (\"", *name,
                                         "\"): shape holds a non-integer"));
    }
    entry.tensor.shape.push_back(dim.get<int64_t>());
  }
  const std::optional<uint64_t> want = TensorBytes(*dtype, entry.tensor.shape);
  if (!want.has_value() || *want != *size) {
    return DataLoss(path, absl::StrCat(where, " (\"", *name, "\"): size ",
                                       *size, " does not match dtype \"",
                                       *dtype, "\" and its shape"));
  }
  entry.tensor.name = *std::move(name);
  entry.tensor.dtype = *std::move(dtype);
  entry.offset = *offset;
  entry.size = *size;
  return entry;
}

absl::StatusOr<Manifest> ParseManifest(const std::string& text,
                                       const std::string& path, int64_t step) {
  const json root = json::parse(text, nullptr, false);
  if (root.is_discarded() || !root.is_object()) {
    return DataLoss(path, "not a JSON object");
  }
  if (GetUnsigned(root, "format") != static_cast<uint64_t>(kFormatVersion)) {
    return DataLoss(path, absl::StrCat("not a checkpoint manifest of format ",
                                       kFormatVersion));
  }
  const std::optional<uint64_t> saved_step = GetUnsigned(root, "step");
  const std::optional<uint64_t> data_size = GetUnsigned(root, "data_size");
  const std::optional<uint64_t> crc = GetUnsigned(root, "data_crc32");
  const auto tensors = root.find("tensors");
  if (!saved_step || !data_size || !crc || *crc > 0xFFFFFFFFu ||
      tensors == root.end() || !tensors->is_array()) {
    return DataLoss(path,
                    "needs integer step, data_size and data_crc32 and a "
                    "tensors array");
  }
  if (*saved_step != static_cast<uint64_t>(step)) {
    return DataLoss(path,
                    absl::StrCat("holds step ", *saved_step, ", not ", step));
  }
  Manifest manifest;
  manifest.data_size = *data_size;
  manifest.data_crc32 = static_cast<uint32_t>(*crc);
  // The writer lays tensors out back to back, in order, each once: a
  // manifest that says otherwise was damaged, and its data would load as
  // plausible tensors of the wrong bytes.
  uint64_t next = 0;
  std::set<std::string> names;
  for (size_t i = 0; i < tensors->size(); ++i) {
    COHORT_ASSIGN_OR_RETURN(ManifestEntry entry,
                            ParseEntry((*tensors)[i], i, path));
    if (entry.offset > manifest.data_size ||
        entry.size > manifest.data_size - entry.offset) {
      return DataLoss(path, absl::StrCat("tensor \"", entry.tensor.name,
                                         "\" lies past the data's ",
                                         manifest.data_size, " bytes"));
    }
    if (entry.offset != next) {
      return DataLoss(
          path, absl::StrCat("tensor \"", entry.tensor.name,
                             "\" starts at byte ", entry.offset, ", not at ",
                             next, " where the one before it ends"));
    }
    if (!names.insert(entry.tensor.name).second) {
      return DataLoss(path, absl::StrCat("tensor \"", entry.tensor.name,
                                         "\" appears twice"));
    }
    next = entry.offset + entry.size;
    manifest.entries.push_back(std::move(entry));
  }
  if (next != manifest.data_size) {
    return DataLoss(path,
                    absl::StrCat("its tensors cover ", next, " of the data's ",
                                 manifest.data_size, " bytes"));
  }
  return manifest;
}

}  // namespace

absl::Status WriteCheckpoint(const std::string& dir, int64_t step,
                             const std::vector<SavedTensor>& tensors,
                             int keep) {
  if (step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint step ", step, " is negative"));
  }
  if (keep < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoints to keep is ", keep, "; it must be >= 1"));
  }
  COHORT_RETURN_IF_ERROR(CheckTensors(tensors));
  COHORT_RETURN_IF_ERROR(MakeDirectories(dir));

  std::string data;
  size_t total = 0;
  for (const SavedTensor& t : tensors) total += t.bytes.size();
  data.reserve(total);
  json entries = json::array();
  for (const SavedTensor& t : tensors) {
    entries.push_back({{"name", t.name},
                       {"dtype", t.dtype},
                       {"shape", t.shape},
                       {"offset", data.size()},
                       {"size", t.bytes.size()}});
    data += t.bytes;
  }
  const json manifest = {{"format", kFormatVersion},
                         {"step", step},
                         {"data_size", data.size()},
                         {"data_crc32", Crc32(data)},
                         {"tensors", std::move(entries)}};

  COHORT_RETURN_IF_ERROR(
      WriteFileAtomically(StepFile(dir, step, kDataSuffix), data));
  COHORT_RETURN_IF_ERROR(WriteFileAtomically(
      StepFile(dir, step, kManifestSuffix), manifest.dump(1)));
  COHORT_RETURN_IF_ERROR(
      WriteFileAtomically(LatestFile(dir), absl::StrCat(step, "\n")));
  return Prune(dir, step, keep);
}

absl::StatusOr<int64_t> LatestCheckpointStep(const std::string& dir) {
  const std::string path = LatestFile(dir);
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    return absl::NotFoundError(absl::StrCat(path, ": no checkpoint yet"));
  }
  COHORT_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  int64_t step = 0;
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  if (!absl::SimpleAtoi(trimmed, &step) || step < 0) {
    return DataLoss(
        path, absl::StrCat("holds \"", trimmed, "\", not a checkpoint step"));
  }
  return step;
}

absl::StatusOr<int64_t> NewestCheckpointStep(const std::string& dir,
                                             absl::Status* damage) {
  absl::StatusOr<int64_t> latest = LatestCheckpointStep(dir);
  if (latest.ok() || absl::IsNotFound(latest.status())) return latest;
  const std::vector<int64_t> steps = CheckpointSteps(dir);
  if (steps.empty()) return latest.status();
  if (damage != nullptr) {
    *damage = latest.status();
  } else {
    spdlog::warn("{}; restoring from the newest checkpoint there, step {}",
                 latest.status().ToString(), steps.front());
  }
  return steps.front();
}

std::vector<int64_t> CheckpointSteps(const std::string& dir) {
  std::error_code error;
  std::set<int64_t, std::greater<>> steps;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const std::optional<int64_t> step = StepOfFileName(name);
    if (step.has_value() && absl::EndsWith(name, kManifestSuffix)) {
      steps.insert(*step);
    }
  }
  return {steps.begin(), steps.end()};
}

absl::StatusOr<std::vector<SavedTensor>> ReadCheckpoint(const std::string& dir,
                                                        int64_t step) {
  const std::string manifest_path = StepFile(dir, step, kManifestSuffix);
  const std::string data_path = StepFile(dir, step, kDataSuffix);
  // Both open before either is read: a writer that prunes this step
  // meanwhile unlinks them, and open files read on as they were.
  COHORT_ASSIGN_OR_RETURN(FileToRead manifest_file,
                          FileToRead::Open(manifest_path));
  COHORT_ASSIGN_OR_RETURN(FileToRead data_file, FileToRead::Open(data_path));
  if (manifest_file.size() > kMaxManifestBytes) {
    return DataLoss(
        manifest_path,
        absl::StrCat(manifest_file.size(), " bytes, larger than any manifest (",
                     kMaxManifestBytes, ")"));
  }
  COHORT_ASSIGN_OR_RETURN(const std::string text, manifest_file.ReadAll());
  COHORT_ASSIGN_OR_RETURN(const Manifest manifest,
                          ParseManifest(text, manifest_path, step));
  if (data_file.size() > manifest.data_size) {
    // Not read into memory: it may be any size at all.
    return DataLoss(data_path, absl::StrCat("overwritten: ", data_file.size(),
                                            " bytes, the manifest says ",
                                            manifest.data_size));
  }
  COHORT_ASSIGN_OR_RETURN(const std::string data, data_file.ReadAll());
  if (data.size() != manifest.data_size) {
    return DataLoss(
        data_path,
        absl::StrCat("truncated or overwritten: ", data.size(),
                     " bytes, the manifest says ", manifest.data_size));
  }
  if (const uint32_t crc = Crc32(data); crc != manifest.data_crc32) {
    return DataLoss(
        data_path, absl::StrCat("corrupt: CRC-32 ", crc, ", the manifest says ",
                                manifest.data_crc32));
  }
  std::vector<SavedTensor> tensors;
  tensors.reserve(manifest.entries.size());
  for (const ManifestEntry& entry : manifest.entries) {
    SavedTensor tensor = entry.tensor;
    tensor.bytes = data.substr(entry.offset, entry.size);
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

}  // namespace cohort
