// The record a sharding plugin that gathers parameters publishes of its
// backward pass, for the plugin that buckets the gradients: in the order
// gradients become ready, how many elements each step readies and how many
// gathered bytes are held while it runs. 'zero' (stage 3) writes it from its
// parameter coordinator's replay; 'comm-buffers' reads it to place DeepSpeed's
// reduce-bucket flushes (docs/plugin-support.md; conventions.h,
// MEMPLAN_ATTR_BACKWARD_GRADIENTS). Header-only, in namespace memplan::support.
//
// Text form (a string attribute, so that the ABI needs no array type): the
// gathered bytes at the backward's high point that the sharding plugin counts,
// then one pair per step, "elements bytes", all separated by single spaces.
#pragma once

#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace memplan::support::backward_gradients {

struct Step {
  double elements = 0;        // gradient elements this step readies
  double gathered_bytes = 0;  // gathered parameters held meanwhile (not the persistent ones)
};

struct Record {
  double peak_gathered_bytes = 0;  // what the sharding plugin counts at the backward's high point
  std::vector<Step> steps;
};

namespace detail {
inline void append(std::string& out, double value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}
}  // namespace detail

// Writes the record into `out` (cleared first; its capacity is kept).
template <typename Steps>
void encode(double peak_gathered_bytes, const Steps& steps, std::string& out) {
  out.clear();
  detail::append(out, peak_gathered_bytes);
  for (const auto& step : steps) {
    out.push_back(' ');
    detail::append(out, step.elements);
    out.push_back(' ');
    detail::append(out, step.gathered_bytes);
  }
}

// Reads a record written by encode into `record` (its vector's capacity is
// kept). False, with the record empty, when the text is not one: a number
// that does not parse, a negative or non-finite one, or an unpaired step.
inline bool decode(std::string_view text, Record& record) {
  record.peak_gathered_bytes = 0;
  record.steps.clear();
  size_t at = 0;
  bool bad = false;
  // The next number, false at the end of the text or (bad set) on what is not a non-negative finite number.
  auto next = [&](double& value) {
    while (at < text.size() && text[at] == ' ') ++at;
    if (at == text.size()) return false;
    const auto result = std::from_chars(text.data() + at, text.data() + text.size(), value);
    if (result.ec != std::errc{} || !std::isfinite(value) || value < 0) {
      bad = true;
      return false;
    }
    at = static_cast<size_t>(result.ptr - text.data());
    return true;
  };
  Step step;
  if (!next(record.peak_gathered_bytes)) bad = true;  // not even the high point's bytes
  while (!bad && next(step.elements)) {
    if (!next(step.gathered_bytes)) {
      bad = true;  // a step without its bytes
      break;
    }
    record.steps.push_back(step);
  }
  if (bad) {
    record.peak_gathered_bytes = 0;
    record.steps.clear();
    return false;
  }
  return true;
}

}  // namespace memplan::support::backward_gradients
