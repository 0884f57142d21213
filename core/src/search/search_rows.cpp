// The rows of `memplan search` as CSV, written as they come and read back to
// merge the outputs of a sharded sweep.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "memplan/core/search.hpp"

namespace memplan {
namespace {

std::string quoted(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

// Exact text of a double: what reads back as the same value.
std::string exact(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

std::vector<std::string> fields_of(const std::string& line) {
  std::vector<std::string> fields(1);
  bool in_quotes = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_quotes) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        in_quotes = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      in_quotes = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

}  // namespace

std::string search_csv_header(const SearchSpace& space) {
  std::string header = "index";
  for (const SearchAxis& axis : space.axes) header += "," + quoted(axis.key);
  header += "," + quoted(space.fill ? space.fill->key : std::string("fill"));
  // The cost columns came after `reason` (columns are only ever added at the end).
  return header + ",grad_accum,status,peak_bytes,capacity_bytes,step_seconds,tokens_per_second,mfu,reason"
                  ",usd_per_gpu_hour,usd_per_million_tokens,run_usd";
}

std::string search_csv_line(const SearchRow& row) {
  std::string line = std::to_string(row.index);
  for (const std::string& value : row.values) line += "," + quoted(value);
  line += "," + std::to_string(row.fill_value) + "," + std::to_string(row.grad_accum) + "," +
          std::string(search_status_name(row.status)) + "," + std::to_string(row.peak_bytes) + "," +
          std::to_string(row.capacity_bytes) + "," + exact(row.step_seconds) + "," + exact(row.tokens_per_second) +
          "," + exact(row.mfu) + "," + quoted(row.reason) + "," + exact(row.usd_per_gpu_hour) + "," +
          exact(row.usd_per_million_tokens) + "," + exact(row.run_usd);
  return line;
}

std::vector<SearchRow> read_search_csv(const std::string& file, const std::string& header) {
  std::ifstream in(file);
  if (!in) throw Error(file + ": error: cannot read it (" + std::string(std::strerror(errno)) + ")");
  std::vector<SearchRow> rows;
  std::string line;
  size_t number = 0;
  const size_t axes = fields_of(header).size() - 13;  // index, fill and the eleven trailing columns
  // Parts written before the cost columns were appended end at `reason`: their rows are unpriced
  // (0 in the cost columns, as a search without prices writes them), so they still merge.
  const std::string cost_columns = ",usd_per_gpu_hour,usd_per_million_tokens,run_usd";
  const std::string header_before_cost = header.substr(0, header.size() - cost_columns.size());
  size_t columns = axes + 13;
  auto fail = [&](const std::string& why) -> void {
    throw Error(file + ":" + std::to_string(number) + ": error: " + why +
                "; merge the CSV files that `memplan search --shard K/N --output FILE` wrote for this scenario");
  };
  while (std::getline(in, line)) {
    ++number;
    if (number == 1) {
      if (line == header_before_cost) columns = axes + 10;
      else if (line != header) fail("the header is not this scenario's search (" + header + ")");
      continue;
    }
    const std::vector<std::string> fields = fields_of(line);
    if (fields.size() != columns) fail("a row of " + std::to_string(fields.size()) + " fields");
    SearchRow row;
    char* end = nullptr;
    auto whole = [&](const std::string& text) {
      errno = 0;
      const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || errno != 0) fail("'" + text + "' is not a whole number");
      return value;
    };
    auto real = [&](const std::string& text) {
      const double value = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0') fail("'" + text + "' is not a number");
      return value;
    };
    size_t f = 0;
    row.index = whole(fields[f++]);
    for (size_t a = 0; a < axes; ++a) row.values.push_back(fields[f++]);
    row.fill_value = static_cast<int64_t>(whole(fields[f++]));
    row.grad_accum = static_cast<int64_t>(whole(fields[f++]));
    const std::string& status = fields[f++];
    if (status == "fits") row.status = SearchRow::Status::fits;
    else if (status == "does-not-fit") row.status = SearchRow::Status::does_not_fit;
    else if (status == "invalid") row.status = SearchRow::Status::invalid;
    else fail("unknown status '" + status + "'");
    row.peak_bytes = whole(fields[f++]);
    row.capacity_bytes = whole(fields[f++]);
    row.step_seconds = real(fields[f++]);
    row.tokens_per_second = real(fields[f++]);
    row.mfu = real(fields[f++]);
    row.reason = fields[f++];
    if (columns == axes + 13) {
      row.usd_per_gpu_hour = real(fields[f++]);
      row.usd_per_million_tokens = real(fields[f++]);
      row.run_usd = real(fields[f++]);
    }
    rows.push_back(std::move(row));
  }
  if (number == 0) fail("an empty file");
  return rows;
}

}  // namespace memplan
