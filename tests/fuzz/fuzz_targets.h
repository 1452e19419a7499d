// The fuzz targets: the contracts of the event decoder and the config parser
// checked on one arbitrary input. Shared by the seeded mutation test
// (fuzz_test.cc, in the suite) and the libFuzzer entry points
// (libfuzzer_main.cc, built with -DDENORMD_LIBFUZZER=ON and clang).
// Each returns "" when the contract held, else what was broken; a crash,
// hang or sanitizer report is a failure by itself.
#ifndef DENORMD_TESTS_FUZZ_FUZZ_TARGETS_H_
#define DENORMD_TESTS_FUZZ_FUZZ_TARGETS_H_

#include <string>
#include <vector>

#include "config/config.h"
#include "formats/decoder.h"
#include "projections/entity.h"

namespace denormd {
namespace fuzz {

// Decodes `input` as one event-log line with `decoder` (built for `config`).
// The contract: Ok with events of configured types, ids 1..kMaxIdBytes bytes
// and object data for upserts; or InvalidInput with a reason; never another
// status, never an exception. Accepted events are appended to *accepted.
std::string CheckEventDecoding(const Decoder& decoder, const Config& config,
                               const std::string& input, std::vector<EntityEvent>* accepted);

// Parses `yaml` as a configuration. The contract: a config and no errors, or
// no config and at least one error, each with a message and a place or a
// location; never an exception. A config that parses also builds a plan.
std::string CheckConfigParsing(const std::string& yaml);

}  // namespace fuzz
}  // namespace denormd

#endif  // DENORMD_TESTS_FUZZ_FUZZ_TARGETS_H_
