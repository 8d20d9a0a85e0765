#include "common/names.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace cohort {

namespace {

// The length of the well-formed UTF-8 sequence at text[i], or 0 where there
// is none: the shortest form only, no UTF-16 surrogates, nothing past
// U+10FFFF.
size_t SequenceLength(absl::string_view text, size_t i) {
  const uint8_t lead = static_cast<uint8_t>(text[i]);
  size_t length;
  uint32_t code;
  if (lead < 0x80) {
    return 1;
  } else if ((lead & 0xe0) == 0xc0) {
    length = 2;
    code = lead & 0x1f;
  } else if ((lead & 0xf0) == 0xe0) {
    length = 3;
    code = lead & 0x0f;
  } else if ((lead & 0xf8) == 0xf0) {
    length = 4;
    code = lead & 0x07;
  } else {
    return 0;
  }
  if (text.size() - i < length) return 0;
  for (size_t k = 1; k < length; ++k) {
    const uint8_t next = static_cast<uint8_t>(text[i + k]);
    if ((next & 0xc0) != 0x80) return 0;
    code = (code << 6) | (next & 0x3f);
  }
  constexpr uint32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kMinimum[length] || (code >= 0xd800 && code <= 0xdfff) ||
      code > 0x10ffff) {
    return 0;
  }
  return length;
}

}  // namespace

bool IsValidUtf8(absl::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t length = SequenceLength(text, i);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

std::string ToReportableText(absl::string_view text, size_t max_bytes) {
  constexpr absl::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD
  // Repairs text into at most `limit` bytes; returns the source bytes used.
  std::string out;
  auto repair = [&](size_t limit) {
    out.clear();
    size_t i = 0;
    while (i < text.size()) {
      const size_t length = SequenceLength(text, i);
      const absl::string_view piece =
          length == 0 ? kReplacement : text.substr(i, length);
      if (out.size() + piece.size() > limit) break;
      out.append(piece.data(), piece.size());
      i += std::max<size_t>(length, 1);
    }
    return i;
  };
  if (repair(max_bytes) == text.size()) return out;
  // Room for " [<up to 20 digits> more bytes cut]".
  constexpr size_t kNoteBytes = 40;
  const size_t used =
      repair(max_bytes > kNoteBytes ? max_bytes - kNoteBytes : 0);
  absl::StrAppend(&out, " [", text.size() - used, " more bytes cut]");
  return out;
}

absl::Status CheckName(absl::string_view what, absl::string_view name) {
  auto bad = [&](absl::string_view problem) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " name \"", absl::CHexEscape(name.substr(0, 64)),
                     name.size() > 64 ? "..." : "", "\" ", problem));
  };
  if (name.empty())
    return absl::InvalidArgumentError(absl::StrCat(what, " name is empty"));
  if (name.size() > kMaxNameBytes) {
    return bad(absl::StrCat("is ", name.size(), " bytes long; the limit is ",
                            kMaxNameBytes));
  }
  if (!IsValidUtf8(name)) return bad("is not valid UTF-8");
  for (char c : name) {
    if (static_cast<uint8_t>(c) < 0x20 || c == 0x7f) {
      return bad("holds a control character");
    }
  }
  return absl::OkStatus();
}

std::string Quoted(absl::string_view text) {
  return absl::StrCat("\"", absl::CEscape(text), "\"");
}

}  // namespace cohort
