#include "rpc/reportable.h"

#include <string>
#include <vector>

#include "common/names.h"

namespace cohort::rpc {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

bool Fits(const std::string& text, size_t max_bytes) {
  return text.size() <= max_bytes && IsValidUtf8(text);
}

// Calls on_string(field, index) for each string value and
// on_message(field, index) for each nested message; index is -1 for a
// singular field.
template <typename OnString, typename OnMessage>
void Visit(const Message& message, OnString on_string, OnMessage on_message) {
  const Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    const bool repeated = field->is_repeated();
    const int count = repeated ? reflection->FieldSize(message, field) : 1;
    if (field->type() == FieldDescriptor::TYPE_STRING) {
      for (int i = 0; i < count; ++i) on_string(field, repeated ? i : -1);
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      for (int i = 0; i < count; ++i) on_message(field, repeated ? i : -1);
    }
  }
}

// The string value of `field` (at `i` when repeated, -1 when not).
const std::string& StringAt(const Message& message,
                            const FieldDescriptor* field, int i,
                            std::string* scratch) {
  const Reflection* reflection = message.GetReflection();
  return i < 0 ? reflection->GetStringReference(message, field, scratch)
               : reflection->GetRepeatedStringReference(message, field, i,
                                                        scratch);
}

}  // namespace

bool HasUnreportableText(const Message& message, size_t max_bytes) {
  const Reflection* reflection = message.GetReflection();
  bool found = false;
  Visit(
      message,
      [&](const FieldDescriptor* field, int i) {
        std::string scratch;
        found =
            found || !Fits(StringAt(message, field, i, &scratch), max_bytes);
      },
      [&](const FieldDescriptor* field, int i) {
        const Message& nested =
            i < 0 ? reflection->GetMessage(message, field)
                  : reflection->GetRepeatedMessage(message, field, i);
        found = found || HasUnreportableText(nested, max_bytes);
      });
  return found;
}

int MakeReportable(Message& message, size_t max_bytes) {
  const Reflection* reflection = message.GetReflection();
  int changed = 0;
  Visit(
      message,
      [&](const FieldDescriptor* field, int i) {
        std::string scratch;
        const std::string& text = StringAt(message, field, i, &scratch);
        if (Fits(text, max_bytes)) return;
        std::string repaired = ToReportableText(text, max_bytes);
        if (i < 0) {
          reflection->SetString(&message, field, std::move(repaired));
        } else {
          reflection->SetRepeatedString(&message, field, i,
                                        std::move(repaired));
        }
        ++changed;
      },
      // Map entries are repeated messages here; their keys are repaired as
      // any string, and the map is rebuilt from them.
      [&](const FieldDescriptor* field, int i) {
        Message* nested =
            i < 0 ? reflection->MutableMessage(&message, field)
                  : reflection->MutableRepeatedMessage(&message, field, i);
        changed += MakeReportable(*nested, max_bytes);
      });
  return changed;
}

}  // namespace cohort::rpc
