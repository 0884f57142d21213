// The day a published run was made, as its validation case's header states it
// in prose ("run on 'Tue Jan 11 2022'", "runs Feb-Mar 2024", "@ 1814feb
// (2024-11-18)"): a case whose framework line names no version is estimated
// under the framework's behaviour of that day (docs/validation.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace memplan {

struct RunDate {
  std::string day;   // "YYYY-MM-DD"
  std::string text;  // as written ("Jan 11 2022")
};

// The first date written in `line`: an ISO day (2024-11-18), a month name or
// its three-letter abbreviation with an optional day and a year ("Jan 11 2022",
// "January 11, 2022", "Mar 2024"), a day before the month ("11 Jan 2022"), or
// a third of a year ("early 2024", "mid-2022", "late 2023": January-April,
// May-August, September-December). A month without a day reads as the month's
// last day, a third of a year as its last month's: a run "in Jan 2025" may
// have used a release of any day of it. Years outside 2000-2099, days after
// today, and date-shaped text that is no day ("31 Feb 2024") are not read, and
// an ISO day must not follow a letter or digit ("v2024-01-01").
std::optional<RunDate> first_date_in(std::string_view line);

// Today where the day is latest (UTC+14), "YYYY-MM-DD": no run is dated after it.
std::string today_iso();

}  // namespace memplan
