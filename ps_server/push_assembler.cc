#include "ps_server/push_assembler.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace cohort::ps {

PushAssembler::PushAssembler(VariableStore* store, int64_t max_chunk_bytes)
    : store_(store), max_chunk_bytes_(max_chunk_bytes) {}

absl::Status PushAssembler::Begin(const JobRef& job, const std::string& worker,
                                  int64_t num_variables) {
  if (job.id.empty()) {
    return absl::InvalidArgumentError(
        "the first message of a push names no job_id");
  }
  if (num_variables < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the first message of a push says it carries ",
                     num_variables, " variables (num_variables)"));
  }
  // Another job's push is refused as such before anything else is said of
  // it: told only that the shard restarted, its sender would declare its
  // variables again, taking the shard from the job that owns it.
  if (absl::Status admitted = store_->Admits(job); !admitted.ok()) {
    return admitted;
  }
  job_ = job;
  worker_ = worker;
  num_variables_ = num_variables;
  begun_ = true;
  return absl::OkStatus();
}

absl::Status PushAssembler::Add(v1::TensorChunk* chunk) {
  const std::string& name = chunk->name();
  const int64_t size = static_cast<int64_t>(chunk->data().size());
  if (name.empty()) {
    return absl::InvalidArgumentError("a push chunk names no variable");
  }
  if (size > max_chunk_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push chunk of '", name, "' has ", size, " bytes, over the limit of ",
        max_chunk_bytes_, " bytes per chunk"));
  }
  absl::StatusOr<VariableLayout> layout = store_->Layout(job_, name);
  if (!layout.ok()) return layout.status();
  if (chunk->total_bytes() != layout->bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("push of '", name, "': ", chunk->total_bytes(),
                     " bytes, the variable has ", layout->bytes, " (",
                     layout->ToString(), ")"));
  }
  const int64_t offset = chunk->offset();
  if (size == 0 || offset < 0 || offset > layout->bytes - size) {
    // The end as a sum only where it does not overflow (an offset from a
    // corrupt or hostile message may be near the limit).
    const std::string range =
        offset <= std::numeric_limits<int64_t>::max() - size
            ? absl::StrCat("bytes [", offset, ", ", offset + size, ")")
            : absl::StrCat(size, " bytes from offset ", offset);
    return absl::InvalidArgumentError(
        absl::StrCat("push chunk of '", name, "' covers ", range,
                     ", not a non-empty range within its ", layout->bytes));
  }

  if (applied_names_.contains(name)) {
    // Once per push: a second update of it would apply its gradient twice.
    return absl::InvalidArgumentError(
        absl::StrCat("the push updates '", name, "' twice"));
  }
  auto it = pending_.find(name);
  if (it == pending_.end()) {
    // Checked before anything is applied: a push refused after applying
    // more than it announced would have its retry apply them twice.
    if (num_variables_ > 0 &&
        applied_ + static_cast<int64_t>(pending_.size()) >= num_variables_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "push chunk of '", name, "' is past the ", num_variables_,
          " variables the push's first message announced (num_variables)"));
    }
    if (size == layout->bytes) {
      // The whole variable in one chunk: applied straight from the message.
      absl::Status applied = store_->Apply(job_, worker_, name, chunk->data());
      if (applied.ok()) {
        ++applied_;
        applied_names_.insert(name);
      }
      return applied;
    }
    // A stream holds at most one pending copy of each variable; the check
    // says so explicitly, so that no stream can grow past the shard's size.
    const int64_t limit = store_->variable_bytes();
    if (buffered_bytes_ + layout->bytes > limit) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "push buffers ", buffered_bytes_ + layout->bytes,
          " bytes, over the shard's ", limit, " bytes of variables"));
    }
    it = pending_.emplace(name, Pending{}).first;
    it->second.bytes.resize(layout->bytes);
    buffered_bytes_ += layout->bytes;
  }
  Pending& pending = it->second;
  if (static_cast<int64_t>(pending.bytes.size()) != layout->bytes) {
    // Created anew by a job that replaced this one: the bytes buffered so
    // far are of another variable, and this chunk's range is not theirs. (A
    // replacement of the same size is not told apart here.)
    return absl::FailedPreconditionError(
        absl::StrCat("push of '", name,
                     "': the variable was created anew during the push; '",
                     name, "' is now ", layout->bytes,
                     " bytes, the push began with ", pending.bytes.size()));
  }
  if (absl::Status claimed = Claim(name, offset, offset + size, &pending);
      !claimed.ok()) {
    return claimed;
  }
  std::memcpy(pending.bytes.data() + offset, chunk->data().data(), size);
  chunk->clear_data();
  pending.received += size;
  if (pending.received < layout->bytes) return absl::OkStatus();

  // Without overlaps, all bytes received means [0, size) is tiled exactly.
  const std::string bytes = std::move(pending.bytes);
  buffered_bytes_ -= layout->bytes;
  pending_.erase(it);
  absl::Status applied = store_->Apply(job_, worker_, name, bytes);
  if (applied.ok()) {
    ++applied_;
    applied_names_.insert(name);
  }
  return applied;
}

absl::Status PushAssembler::Claim(const std::string& name, int64_t offset,
                                  int64_t end, Pending* pending) {
  if (pending->ranges.Overlaps(offset, end)) {
    return absl::InvalidArgumentError(
        absl::StrCat("push chunk of '", name, "' at bytes [", offset, ", ", end,
                     ") overlaps bytes already received"));
  }
  // Only pieces apart count against the bound, which keeps a stream's
  // bookkeeping small next to the bytes it buffers.
  if (!pending->ranges.Touches(offset, end) &&
      pending->ranges.pieces() >= static_cast<size_t>(kMaxPushPieces)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push chunks of '", name, "' arrived as more than ", kMaxPushPieces,
        " pieces apart; a sender sends a variable's chunks in order"));
  }
  pending->ranges.Add(offset, end);
  return absl::OkStatus();
}

absl::Status PushAssembler::End() const {
  // gRPC ends a stream the same way whether the sender closed it or a
  // message could not be parsed; only the count tells the two apart.
  if (!begun_) {
    return absl::InvalidArgumentError(
        "the push ended before its first message could be read");
  }
  if (!pending_.empty()) {
    const auto& [name, pending] = *pending_.begin();
    return absl::InvalidArgumentError(absl::StrCat(
        "push ended with '", name, "' incomplete: ", pending.received,
        " of its ", pending.bytes.size(), " bytes arrived"));
  }
  if (num_variables_ > 0 && applied_ != num_variables_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the push ended after ", applied_, " of its ", num_variables_,
        " variables: a message was lost or could not be parsed"));
  }
  return absl::OkStatus();
}

}  // namespace cohort::ps
