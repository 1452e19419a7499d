// `denormd advise`'s output: the measured model (projections/advice.h) as
// text for people or one JSON object for machines.
#ifndef DENORMD_DAEMON_ADVISE_REPORT_H_
#define DENORMD_DAEMON_ADVISE_REPORT_H_

#include <string>

#include "projections/advice.h"

namespace denormd {

// The text report: per field its fan-out, per collection its document
// sizes, then the recommendations, each with its figures and the change.
std::string FormatAdvice(const ModelAdvice& advice, const std::string& schema);

// The same as one JSON object: {"schema", "sample", "entities_read",
// "documents_read", "thresholds": {...}, "fields": [...], "collections": [...],
// "recommendations": [...]}; each distribution {"keys", "total", "p50",
// "p99", "max", "top": [[key, count], ...]}.
std::string AdviceJson(const ModelAdvice& advice, const std::string& schema);

// The same as one self-contained HTML page (no scripts, nothing fetched):
// per field and per collection a histogram (inline SVG, power-of-two bins,
// bars of class "bar") of its distribution beside its figures, then the
// recommendations.
std::string AdviceHtml(const ModelAdvice& advice, const std::string& schema);

}  // namespace denormd

#endif  // DENORMD_DAEMON_ADVISE_REPORT_H_
