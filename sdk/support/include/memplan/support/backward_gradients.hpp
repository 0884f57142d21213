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
// then one pair per step, "elements bytes", all whole decimal numbers (rounded
// to the nearest; integer std::to_chars and std::from_chars, which every C++17
// standard library has) separated by single spaces.
#pragma once

#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
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
// A count of bytes or elements as a whole number: the nearest one; a value that
// is not a non-negative finite number is a bug of the writer (0 in a release build).
inline void append(std::string& out, double value) {
  assert(std::isfinite(value) && value >= 0);
  constexpr double kLargest = 1.8e19;  // below 2^64
  const uint64_t whole = !(value > 0)          ? 0
                         : !(value < kLargest) ? static_cast<uint64_t>(kLargest)
                                               : static_cast<uint64_t>(std::floor(value + 0.5));
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, whole);
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
// kept). False, with the record empty, when the text is not one: anything but
// whole decimal numbers separated by single spaces, or an unpaired step.
inline bool decode(std::string_view text, Record& record) {
  record.peak_gathered_bytes = 0;
  record.steps.clear();
  size_t at = 0;
  bool bad = false;
  // The next number, false at the end of the text or (bad set) on anything else.
  auto next = [&](double& value) {
    if (at == text.size()) return false;
    if (at > 0 && text[at++] != ' ') {  // numbers are separated by one space
      bad = true;
      return false;
    }
    uint64_t whole = 0;
    const auto result = std::from_chars(text.data() + at, text.data() + text.size(), whole);
    if (result.ec != std::errc{} || (result.ptr != text.data() + text.size() && *result.ptr != ' ')) {
      bad = true;
      return false;
    }
    at = static_cast<size_t>(result.ptr - text.data());
    value = static_cast<double>(whole);
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
