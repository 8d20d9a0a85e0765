#include "coordinator/variable_fetcher.h"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cohort/v1/ps.grpc.pb.h"
#include "ps_client/dtype.h"
#include "rpc/channel.h"

namespace cohort::coordinator {
namespace {

constexpr std::string_view kPartMarker = "/part_";

// "w/part_2" -> ("w", 2); an unsplit name -> (name, -1).
std::pair<std::string, int> SplitPartName(const std::string& stored) {
  const size_t at = stored.rfind(kPartMarker);
  int index = -1;
  if (at != std::string::npos &&
      absl::SimpleAtoi(
          absl::string_view(stored).substr(at + kPartMarker.size()), &index) &&
      index >= 0) {
    return {stored.substr(0, at), index};
  }
  return {stored, -1};
}

absl::StatusOr<v1::VariableValue> Join(const std::string& name,
                                       std::vector<StoredPart*> parts) {
  auto broken = [&name](auto&&... why) {
    return absl::DataLossError(
        absl::StrCat("variable '", name,
                     "': its parts on the ps tasks do not "
                     "fit together: ",
                     why...));
  };
  std::sort(parts.begin(), parts.end(), [](StoredPart* a, StoredPart* b) {
    return SplitPartName(a->spec.name()).second <
           SplitPartName(b->spec.name()).second;
  });
  const v1::PsVariableSpec& first = parts.front()->spec;
  v1::VariableValue out;
  out.set_name(name);
  out.set_dtype(ps::DTypeName(first.dtype()));
  // Only a count tells a lost last part (a shard that restarted empty) from
  // a whole variable; specs written before the count carry 0.
  if (first.num_parts() > 0 &&
      static_cast<size_t>(first.num_parts()) != parts.size()) {
    return broken(parts.size(), " of its ", first.num_parts(),
                  " parts were found");
  }
  int64_t rows = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const v1::PsVariableSpec& spec = parts[i]->spec;
    const int index = SplitPartName(spec.name()).second;
    if ((parts.size() > 1 || first.num_parts() > 0) &&
        index != static_cast<int>(i)) {
      return broken("part ", i, " is missing");
    }
    if (spec.dtype() != first.dtype()) {
      return broken(spec.name(), " is ", ps::DTypeName(spec.dtype()), ", ",
                    first.name(), " is ", ps::DTypeName(first.dtype()));
    }
    if (spec.shape_size() != first.shape_size() ||
        (spec.shape_size() > 0 &&
         !std::equal(spec.shape().begin() + 1, spec.shape().end(),
                     first.shape().begin() + 1))) {
      return broken(spec.name(), " has shape ", ps::ShapeString(spec.shape()),
                    ", ", first.name(), " has ",
                    ps::ShapeString(first.shape()));
    }
    const int64_t elements =
        ps::NumElements(spec.shape(), std::numeric_limits<int64_t>::max());
    if (elements < 0 || static_cast<int64_t>(parts[i]->value.size()) !=
                            elements * ps::DTypeSize(spec.dtype())) {
      return broken(spec.name(), " holds ", parts[i]->value.size(),
                    " bytes, not those of ", ps::ShapeString(spec.shape()));
    }
    rows += spec.shape_size() > 0 ? spec.shape(0) : 1;
    out.mutable_value()->append(parts[i]->value);
    out.set_updates(out.updates() + parts[i]->updates);
  }
  out.mutable_shape()->CopyFrom(first.shape());
  if (out.shape_size() > 0) out.set_shape(0, rows);
  return out;
}

// Bytes a part's value holds by its spec; -1 for a spec that names no
// type or whose size overflows.
int64_t SpecBytes(const v1::PsVariableSpec& spec) {
  const int64_t size = ps::DTypeSize(spec.dtype());
  if (size <= 0) return -1;
  const int64_t elements =
      ps::NumElements(spec.shape(), std::numeric_limits<int64_t>::max() / size);
  return elements < 0 ? -1 : elements * size;
}

// Reads one shard: lists its parts, then pulls the values of those wanted.
class ShardReader {
 public:
  ShardReader(int shard, const std::string& address,
              const rpc::Security& security)
      : shard_(shard),
        connection_(address, security),
        stub_(v1::ParameterServer::NewStub(connection_.channel())) {}

  // Appends the shard's parts, without values, to `parts`.
  absl::Status List(const std::string& job_id, const std::string& job_uid,
                    absl::Time deadline, std::vector<StoredPart>& parts) {
    v1::ListVariablesRequest list;
    list.set_job_id(job_id);
    list.set_job_uid(job_uid);
    v1::ListVariablesResponse listed;
    const grpc::Status status = stub_->ListVariables(
        connection_.NewContext(Left(deadline)).get(), list, &listed);
    if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      return absl::FailedPreconditionError(
          absl::StrCat("ps:", shard_, ": ", status.error_message(),
                       " (the shard holds another job's variables)"));
    }
    if (!status.ok()) return Failed("ParameterServer.ListVariables", status);
    for (const v1::PsVariableSpec& spec : listed.variables()) {
      parts.push_back({.spec = spec, .shard = shard_});
    }
    return absl::OkStatus();
  }

  // Fills in the values of `wanted` (this shard's parts), each checked
  // against the size its spec gives.
  absl::Status Pull(const std::string& job_id, const std::string& job_uid,
                    absl::Time deadline,
                    const std::vector<StoredPart*>& wanted) {
    if (wanted.empty()) return absl::OkStatus();
    v1::PullRequest pull;
    pull.set_job_id(job_id);
    pull.set_job_uid(job_uid);
    pull.set_worker("coordinator");
    // Per part: where its value goes, and the bytes that arrived for it.
    std::map<std::string, std::pair<StoredPart*, int64_t>> by_name;
    for (StoredPart* part : wanted) {
      pull.add_names(part->spec.name());
      by_name[part->spec.name()] = {part, 0};
      part->value.assign(static_cast<size_t>(SpecBytes(part->spec)), '\0');
    }
    std::unique_ptr<grpc::ClientContext> context =
        connection_.NewContext(Left(deadline));
    auto reader = stub_->Pull(context.get(), pull);
    v1::PullResponse message;
    while (reader->Read(&message)) {
      for (const v1::TensorChunk& chunk : message.chunks()) {
        auto it = by_name.find(chunk.name());
        if (it == by_name.end()) continue;
        StoredPart& part = *it->second.first;
        const int64_t bytes = static_cast<int64_t>(part.value.size());
        if (chunk.total_bytes() != bytes || chunk.offset() < 0 ||
            chunk.offset() > bytes ||
            static_cast<int64_t>(chunk.data().size()) >
                bytes - chunk.offset()) {
          context->TryCancel();
          return absl::DataLossError(absl::StrCat(
              "ps:", shard_, ": a chunk of '", chunk.name(), "' (offset ",
              chunk.offset(), ", ", chunk.data().size(), " of ",
              chunk.total_bytes(), " bytes) does not fit its ", bytes,
              " bytes of ", ps::ShapeString(part.spec.shape())));
        }
        std::copy(chunk.data().begin(), chunk.data().end(),
                  part.value.begin() + chunk.offset());
        part.updates = chunk.version();
        it->second.second += static_cast<int64_t>(chunk.data().size());
      }
    }
    const grpc::Status status = reader->Finish();
    if (!status.ok()) return Failed("ParameterServer.Pull", status);
    for (const auto& [name, part_and_bytes] : by_name) {
      const auto& [part, arrived] = part_and_bytes;
      if (arrived != static_cast<int64_t>(part->value.size())) {
        return absl::DataLossError(
            absl::StrCat("ps:", shard_, ": '", name, "' came as ", arrived,
                         " of its ", part->value.size(), " bytes"));
      }
    }
    return absl::OkStatus();
  }

 private:
  // What is left of the fetch's one deadline: shards asked in turn must not
  // add up past the caller's. At least 1 ms, so that a call past it fails
  // as DEADLINE_EXCEEDED, naming the shard.
  static absl::Duration Left(absl::Time deadline) {
    return std::max(deadline - absl::Now(), absl::Milliseconds(1));
  }

  absl::Status Failed(absl::string_view method, const grpc::Status& status) {
    const absl::Status annotated = connection_.Annotate(method, status);
    return absl::Status(annotated.code(),
                        absl::StrCat("ps:", shard_, ": ", annotated.message()));
  }

  const int shard_;
  const rpc::Connection connection_;
  const std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

// INVALID_ARGUMENT naming each of `names` that no part belongs to.
absl::Status CheckHeld(const std::set<std::string>& held,
                       const std::vector<std::string>& names) {
  std::vector<std::string> missing;
  for (const std::string& name : names) {
    if (held.count(name) == 0) missing.push_back(name);
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "no ps task holds ", missing.size() == 1 ? "variable " : "variables ",
      absl::StrJoin(missing, ", "), "; the job's variables are: ",
      held.empty() ? "(none)" : absl::StrJoin(held, ", ")));
}

}  // namespace

absl::StatusOr<std::vector<v1::VariableValue>> JoinParts(
    std::vector<StoredPart> parts, const std::vector<std::string>& names) {
  std::map<std::string, std::vector<StoredPart*>> by_name;
  std::set<std::string> held;
  for (StoredPart& part : parts) {
    const std::string name = SplitPartName(part.spec.name()).first;
    by_name[name].push_back(&part);
    held.insert(name);
  }
  if (absl::Status status = CheckHeld(held, names); !status.ok()) {
    return status;
  }
  const std::set<std::string> wanted(names.begin(), names.end());
  std::vector<v1::VariableValue> out;
  for (auto& [name, its_parts] : by_name) {
    if (!wanted.empty() && wanted.count(name) == 0) continue;
    absl::StatusOr<v1::VariableValue> joined = Join(name, its_parts);
    if (!joined.ok()) return joined.status();
    out.push_back(*std::move(joined));
  }
  return out;
}

absl::StatusOr<std::vector<v1::VariableValue>> FetchPsVariables(
    const std::vector<std::string>& ps_addresses, const rpc::Security& security,
    const std::string& job_id, const std::string& job_uid,
    const std::vector<std::string>& names, absl::Duration timeout,
    int64_t max_bytes) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::unique_ptr<ShardReader>> shards;
  std::vector<StoredPart> parts;
  for (size_t shard = 0; shard < ps_addresses.size(); ++shard) {
    shards.push_back(std::make_unique<ShardReader>(
        static_cast<int>(shard), ps_addresses[shard], security));
    absl::Status listed = shards.back()->List(job_id, job_uid, deadline, parts);
    if (!listed.ok()) return listed;
  }
  // Only what was asked for is pulled, and only when it fits one answer.
  std::set<std::string> held;
  for (const StoredPart& part : parts) {
    held.insert(SplitPartName(part.spec.name()).first);
  }
  if (absl::Status status = CheckHeld(held, names); !status.ok()) {
    return status;
  }
  const std::set<std::string> named(names.begin(), names.end());
  std::vector<std::vector<StoredPart*>> wanted(shards.size());
  int64_t bytes = 0;
  for (StoredPart& part : parts) {
    if (!named.empty() &&
        named.count(SplitPartName(part.spec.name()).first) == 0) {
      continue;
    }
    const int64_t part_bytes = SpecBytes(part.spec);
    if (part_bytes < 0) {
      return absl::DataLossError(absl::StrCat(
          "ps:", part.shard, ": '", part.spec.name(), "' has type ",
          ps::DTypeName(part.spec.dtype()), " and shape ",
          ps::ShapeString(part.spec.shape()), ", which give no size"));
    }
    bytes += part_bytes;
    if (bytes > max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          named.empty() ? "the variables hold" : "the variables named hold",
          " more than one answer carries (", max_bytes,
          " bytes): fetch fewer of them by name"));
    }
    wanted[part.shard].push_back(&part);
  }
  for (size_t shard = 0; shard < shards.size(); ++shard) {
    absl::Status pulled =
        shards[shard]->Pull(job_id, job_uid, deadline, wanted[shard]);
    if (!pulled.ok()) return pulled;
  }
  return JoinParts(std::move(parts), names);
}

}  // namespace cohort::coordinator
