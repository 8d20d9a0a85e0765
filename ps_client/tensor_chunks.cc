#include "ps_client/tensor_chunks.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace cohort::ps {

PushChunker::PushChunker(const std::vector<PushSlice>* slices,
                         int64_t max_chunk_bytes, std::string job_id,
                         std::string job_uid, std::string worker,
                         uint64_t incarnation)
    : slices_(slices),
      max_chunk_bytes_(std::max<int64_t>(1, max_chunk_bytes)),
      job_id_(std::move(job_id)),
      job_uid_(std::move(job_uid)),
      worker_(std::move(worker)),
      incarnation_(incarnation) {}

bool PushChunker::Next(v1::PushRequest* request) {
  request->Clear();
  if (Done()) return false;
  if (first_) {
    request->set_job_id(job_id_);
    request->set_job_uid(job_uid_);
    request->set_worker(worker_);
    request->set_incarnation(incarnation_);
    request->set_num_variables(static_cast<int32_t>(slices_->size()));
    first_ = false;
  }
  int64_t room = max_chunk_bytes_;
  // Fill the message: whole small slices, then the head of a large one.
  while (!Done()) {
    const PushSlice& slice = (*slices_)[slice_];
    const int64_t total = static_cast<int64_t>(slice.bytes.size());
    const int64_t take = std::min(room, total - offset_);
    // An empty remainder only happens for an empty slice, which still needs
    // its one chunk; otherwise a full message stops here.
    if (take == 0 && total != 0) break;
    v1::TensorChunk* chunk = request->add_chunks();
    chunk->set_name(slice.name);
    chunk->set_offset(offset_);
    chunk->set_total_bytes(total);
    chunk->set_data(slice.bytes.data() + offset_, take);
    offset_ += take;
    room -= take;
    if (offset_ == total) {
      ++slice_;
      offset_ = 0;
    }
    if (room == 0) break;
  }
  return true;
}

PullAssembler::PullAssembler(std::vector<PullSlice> slices) {
  targets_.reserve(slices.size());
  index_.reserve(slices.size());
  for (PullSlice& s : slices) {
    // A name asked for twice: its first buffer, as the scan this replaced.
    index_.try_emplace(s.name, targets_.size());
    targets_.push_back({std::move(s), 0});
  }
}

absl::Status PullAssembler::Add(const v1::TensorChunk& chunk) {
  const auto found = index_.find(chunk.name());
  if (found == index_.end()) {
    return absl::InternalError(
        absl::StrCat("pull returned \"", chunk.name(), "\", not asked for"));
  }
  Target* it = &targets_[found->second];
  const int64_t size = static_cast<int64_t>(it->slice.bytes.size());
  const int64_t len = static_cast<int64_t>(chunk.data().size());
  if (chunk.total_bytes() != size) {
    return absl::InternalError(
        absl::StrCat("pull of \"", chunk.name(), "\": the shard holds ",
                     chunk.total_bytes(), " bytes, this worker expects ", size,
                     " (was it created with another shape?)"));
  }
  const int64_t begin = chunk.offset();
  if (begin < 0 || begin > size - len ||
      it->filled.Overlaps(begin, begin + len)) {
    return absl::InternalError(
        absl::StrCat("pull of \"", chunk.name(), "\": chunk [", begin, ", +",
                     len, ") is out of range or repeats bytes of ", size));
  }
  if (len == 0) return absl::OkStatus();
  std::memcpy(it->slice.bytes.data() + begin, chunk.data().data(), len);
  it->received += len;
  it->filled.Add(begin, begin + len);
  return absl::OkStatus();
}

absl::Status PullAssembler::Finish() const {
  for (const Target& t : targets_) {
    if (t.received != static_cast<int64_t>(t.slice.bytes.size())) {
      return absl::InternalError(
          absl::StrCat("pull of \"", t.slice.name, "\" ended with ", t.received,
                       " of ", t.slice.bytes.size(), " bytes"));
    }
  }
  return absl::OkStatus();
}

}  // namespace cohort::ps
