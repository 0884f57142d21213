#include "report/run_date.hpp"

#include <array>
#include <cctype>
#include <cstdio>
#include <ctime>

#include "memplan/core/framework.hpp"

namespace memplan {

namespace {

constexpr std::array<std::string_view, 12> kMonths = {"january", "february", "march",     "april",   "may",      "june",
                                                      "july",    "august",   "september", "october", "november", "december"};

bool is_letter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The month a word names (1-12): its full name or first three letters, capitalised as in
// prose ("Jan", "January", "Sept" is not read); 0 otherwise.
int month_of(std::string_view word) {
  if (word.size() < 3 || !std::isupper(static_cast<unsigned char>(word[0]))) return 0;
  std::string lower;
  for (char c : word) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (size_t m = 0; m < kMonths.size(); ++m)
    if (lower == kMonths[m] || lower == kMonths[m].substr(0, 3)) return static_cast<int>(m) + 1;
  return 0;
}

// "early", "mid", "late" (or capitalised): the last month of the year's first, second or last
// third (April, August, December); 0 for any other word. "mid-2022" reads as August 2022.
int third_of_year_end(std::string_view word) {
  std::string lower;
  for (char c : word) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "early") return 4;
  if (lower == "mid") return 8;
  if (lower == "late") return 12;
  return 0;
}

// A whole number of `digits` digits at `at` (not part of a longer number).
std::optional<int> number_at(std::string_view text, size_t at, size_t min_digits, size_t max_digits, size_t& end) {
  size_t i = at;
  while (i < text.size() && is_digit(text[i]) && i - at < max_digits) ++i;
  if (i - at < min_digits || (i < text.size() && is_digit(text[i])) || (at > 0 && is_digit(text[at - 1])))
    return std::nullopt;
  end = i;
  return std::stoi(std::string(text.substr(at, i - at)));
}

std::string iso(int year, int month, int day) {
  char text[16];
  std::snprintf(text, sizeof text, "%04d-%02d-%02d", year, month, day);
  return text;
}


size_t skip_spaces(std::string_view text, size_t i) {
  while (i < text.size() && (text[i] == ' ' || text[i] == ',' || text[i] == '.')) ++i;
  return i;
}

// A date starting at `at` (a digit, a capital letter, or the e, m or l of "early", "mid", "late"), with
// `end` after it; for a third of a year, `first` is the third's first day.
std::optional<std::string> date_at(std::string_view text, size_t at, size_t& end, std::string& first) {
  if (is_digit(text[at])) {
    if (at > 0 && (is_letter(text[at - 1]) || is_digit(text[at - 1]))) return std::nullopt;  // v2024-01-01, 12024
    size_t after = 0;
    // 2024-11-18
    if (auto year = number_at(text, at, 4, 4, after); year && after + 6 <= text.size() && text[after] == '-') {
      const std::string day(text.substr(at, 10));
      if (is_iso_date(day) && (at + 10 == text.size() || !is_digit(text[at + 10]))) {
        end = at + 10;
        return day;
      }
    }
    // 11 Jan 2022
    if (auto day = number_at(text, at, 1, 2, after)) {
      size_t i = skip_spaces(text, after);
      size_t word_end = i;
      while (word_end < text.size() && is_letter(text[word_end])) ++word_end;
      const int month = i < word_end ? month_of(text.substr(i, word_end - i)) : 0;
      if (month == 0) return std::nullopt;
      i = skip_spaces(text, word_end);
      if (auto year = i < text.size() ? number_at(text, i, 4, 4, after) : std::nullopt;
          year && *year >= 2000 && *year <= 2099) {
        end = after;
        // "32 Jan 2022" is date-shaped but no day: skipped whole (its month is not read alone).
        return *day >= 1 && *day <= days_in_month(*year, month) ? iso(*year, month, *day) : std::string();
      }
    }
    return std::nullopt;
  }
  // Jan 11 2022, January 11, 2022, Mar 2024, early 2024, mid-2022
  if (at > 0 && is_letter(text[at - 1])) return std::nullopt;
  size_t word_end = at;
  while (word_end < text.size() && is_letter(text[word_end])) ++word_end;
  if (const int last_month = third_of_year_end(text.substr(at, word_end - at))) {
    size_t i = word_end, after = 0;
    if (i < text.size() && text[i] == '-') ++i;
    else i = skip_spaces(text, i);
    if (auto year = i < text.size() ? number_at(text, i, 4, 4, after) : std::nullopt;
        year && *year >= 2000 && *year <= 2099 && (after == text.size() || !is_letter(text[after]))) {
      end = after;  // not "the late 2020s": a decade
      first = iso(*year, last_month - 3, 1);
      return iso(*year, last_month, days_in_month(*year, last_month));
    }
    return std::nullopt;
  }
  const int month = month_of(text.substr(at, word_end - at));
  if (month == 0) return std::nullopt;
  size_t i = skip_spaces(text, word_end), after = 0;
  std::optional<int> day;
  if (i < text.size() && is_digit(text[i])) {
    if (auto year = number_at(text, i, 4, 4, after); year && *year >= 2000 && *year <= 2099) {
      end = after;
      return iso(*year, month, days_in_month(*year, month));
    }
    day = number_at(text, i, 1, 2, after);
    if (!day) return std::nullopt;
    i = skip_spaces(text, after);
    if (i + 1 < text.size() && (text.substr(i, 2) == "st" || text.substr(i, 2) == "nd" || text.substr(i, 2) == "rd" ||
                                text.substr(i, 2) == "th"))
      i = skip_spaces(text, i + 2);
    if (auto year = i < text.size() ? number_at(text, i, 4, 4, after) : std::nullopt;
        year && *year >= 2000 && *year <= 2099) {
      end = after;
      return *day >= 1 && *day <= days_in_month(*year, month) ? iso(*year, month, *day) : std::string();
    }
  }
  return std::nullopt;
}


}  // namespace

std::string today_iso() {
  // The latest calendar day anywhere now: UTC+14 (the Line Islands), so that a run recorded on its local day is
  // never after "today" where that day began before UTC's.
  const std::time_t now = std::time(nullptr) + 14 * 3600;
  std::tm utc{};
  gmtime_r(&now, &utc);
  return iso(utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday);
}

std::optional<RunDate> first_date_in(std::string_view line) {
  const std::string latest = today_iso();
  for (size_t at = 0; at < line.size(); ++at) {
    const char c = line[at];
    if (!is_digit(c) && !std::isupper(static_cast<unsigned char>(c)) && c != 'e' && c != 'm' && c != 'l') continue;
    size_t end = 0;
    std::string first;
    if (auto day = date_at(line, at, end, first)) {
      // A month read as its last day, a day later this month, or a third of the year that holds today is
      // this month's (this third's) run: today.
      if (!day->empty() && *day > latest &&
          (day->compare(0, 7, latest, 0, 7) == 0 || (!first.empty() && first <= latest)))
        *day = latest;
      if (!day->empty() && *day <= latest) return RunDate{*day, std::string(line.substr(at, end - at))};
      at = end - 1;  // date-shaped but not a day of a run: read on after it
    }
  }
  return std::nullopt;
}

}  // namespace memplan
