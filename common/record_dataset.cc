#include "common/record_dataset.h"

#include <utility>

#include "common/status_macros.h"

namespace cohort {
namespace {

class RecordFilesDataset final : public Dataset {
 public:
  // file_begins[f] is file f's first element; one more entry than files,
  // the last being the size.
  RecordFilesDataset(std::vector<std::string> elements,
                     std::vector<int64_t> file_begins, DatasetOptions options)
      : elements_(std::move(elements)),
        file_begins_(std::move(file_begins)),
        options_(options) {}

  int64_t size() const override {
    return static_cast<int64_t>(elements_.size());
  }
  std::string_view Get(int64_t index) const override {
    return elements_[static_cast<size_t>(index)];
  }
  DatasetOptions options() const override { return options_; }
  int num_files() const override {
    return static_cast<int>(file_begins_.size()) - 1;
  }
  int64_t file_begin(int file) const override {
    if (file <= 0) return 0;
    if (file >= num_files()) return size();
    return file_begins_[static_cast<size_t>(file)];
  }

 private:
  const std::vector<std::string> elements_;
  const std::vector<int64_t> file_begins_;
  const DatasetOptions options_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Dataset>> OpenRecordFiles(
    const std::vector<std::string>& files, DatasetOptions options) {
  if (files.empty()) {
    return absl::InvalidArgumentError(
        "OpenRecordFiles: the list of record files is empty");
  }
  std::vector<std::string> elements;
  std::vector<int64_t> file_begins;
  file_begins.reserve(files.size() + 1);
  for (const std::string& file : files) {
    file_begins.push_back(static_cast<int64_t>(elements.size()));
    COHORT_ASSIGN_OR_RETURN(std::vector<std::string> records,
                            ReadRecordFile(file));
    if (elements.empty()) {
      elements = std::move(records);
    } else {
      elements.insert(elements.end(), std::make_move_iterator(records.begin()),
                      std::make_move_iterator(records.end()));
    }
  }
  file_begins.push_back(static_cast<int64_t>(elements.size()));
  return std::make_unique<RecordFilesDataset>(std::move(elements),
                                              std::move(file_begins), options);
}

}  // namespace cohort
