// Small pure helpers on text that several layers share.
#ifndef DENORMD_COMMON_TEXT_H_
#define DENORMD_COMMON_TEXT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace denormd {

// A count with thousands separators: 1234567 -> "1,234,567".
std::string FormatCount(uint64_t n);

// A count and its noun: "1 event", "2,000 events" (the plural adds "s").
std::string CountOf(uint64_t n, const std::string& singular);

// The items in order, `separator` between them: {"a", "b"} -> "a, b".
std::string Joined(const std::vector<std::string>& items, const std::string& separator = ", ");

// FNV-1a, 64 bits: a hash that is the same on every build and platform
// (std::hash is not), for what is stored or compared across processes.
uint64_t Fnv1a64(const std::string& text);

// Bytes as text a person can read: printable ASCII as it is, every other
// byte as \xNN (sort keys in verify's messages).
std::string PrintableBytes(const std::string& bytes);

// `text` with its control characters (bytes below 0x20, and 0x7f) as \xNN and
// every other byte, UTF-8 included, as it is: a name from a file or the wire
// inside a message that goes to a terminal or a log (a NUL or an escape
// sequence written raw would cut or garble the line).
std::string ControlsEscaped(const std::string& text);

// How the user runs denormd, for the commands that hints print (`build/denormd
// rebuild -c config.yaml`): argv[0] when it names a path (holds a '/'), else
// "denormd". Set once by main, before any thread starts.
void SetCommandName(const std::string& argv0);
const std::string& CommandName();

}  // namespace denormd

#endif  // DENORMD_COMMON_TEXT_H_
