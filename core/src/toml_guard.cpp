#include "toml_guard.hpp"

#include <memory>
#include <string>

namespace memplan {
namespace {

// The code points toml++ 3.3.0's is_non_ascii_horizontal_whitespace() has no
// branch for (its default: TOML_UNREACHABLE).
bool whitespace_check_faults(char32_t c) {
  return (c >= 0xA1 && c <= 0x499) || (c >= 0x2C5E && c <= 0x3057 && c != 0x3000) || (c >= 0xFB26 && c <= 0xFEFE);
}

bool is_bare_key_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// A scan that follows TOML's structure far enough to tell string values and
// comments from everything else, and to count nesting. It does not validate:
// on ASCII it does not expect, it stops following the structure ("lost") and
// leaves the error to toml++, which stops at or before the same place; the
// rest of the text is then held to the stricter rule (no code point the
// whitespace check faults on, anywhere, and no deep dotted run), in case the
// two disagree on where the structure went.
class Scan {
 public:
  Scan(std::string_view text, std::string_view path)
      : text_(text), path_(std::make_shared<const std::string>(path)) {}

  void run() {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // a UTF-8 byte order mark
    while (!lost_ && !eof()) {
      skip_blanks();
      if (eof()) break;
      if (peek() == '#') {
        skip_comment();
      } else if (at_newline()) {
        newline();
      } else {
        if (peek() == '[')
          header();
        else
          key_value(table_depth_);
        if (lost_) break;
        end_of_line();
      }
    }
    if (lost_) strict_rest();
  }

 private:
  bool eof() const { return pos_ >= text_.size(); }
  unsigned char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? static_cast<unsigned char>(text_[pos_ + ahead]) : 0;
  }
  bool at_newline() const { return peek() == '\n' || (peek() == '\r' && peek(1) == '\n'); }
  bool starts(std::string_view what) const { return text_.substr(pos_, what.size()) == what; }

  void advance() {
    const unsigned char c = peek();
    ++pos_;
    if (c == '\n') {
      ++line_;
      column_ = 1;
    } else if ((c & 0xC0) != 0x80) {  // a column per code point, not per byte
      ++column_;
    }
  }
  void advance(size_t count) {
    for (size_t i = 0; i < count && !eof(); ++i) advance();
  }
  void newline() { advance(peek() == '\r' ? 2 : 1); }
  void skip_blanks() {
    while (peek() == ' ' || peek() == '\t') advance();
  }
  void skip_comment() {
    while (!eof() && peek() != '\n') advance();
  }
  // Blanks, newlines and comments: between an array's values.
  void skip_blank_lines() {
    for (;;) {
      skip_blanks();
      if (peek() == '#')
        skip_comment();
      else if (at_newline())
        newline();
      else
        return;
    }
  }

  // The code point at pos_, or 0xFFFD for a malformed sequence (toml++
  // rejects those itself).
  char32_t code_point() const {
    const unsigned char lead = peek();
    if (lead < 0x80) return lead;
    int length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
    if (length == 0) return 0xFFFD;
    char32_t c = lead & (0x7F >> length);
    for (int i = 1; i < length; ++i) {
      const unsigned char next = peek(static_cast<size_t>(i));
      if ((next & 0xC0) != 0x80) return 0xFFFD;
      c = (c << 6) | (next & 0x3F);
    }
    return c;
  }

  [[noreturn]] void refuse(const std::string& message) const { refuse_at({line_, column_}, message); }
  [[noreturn]] void refuse_at(toml::source_position where, const std::string& message) const {
    // The exception copies the text (std::runtime_error).
    throw toml::parse_error(message.c_str(), where, path_);
  }
  [[noreturn]] void refuse_non_ascii() const {
    refuse("a non-ASCII character outside a string or comment; TOML keys, numbers and words are ASCII: put text in "
           "quotes (\"...\") or remove the character");
  }

  // ASCII the scan does not expect: toml++ reports it. Non-ASCII is refused
  // here, because toml++ would ask whether it is whitespace.
  void unexpected() {
    if (peek() >= 0x80) refuse_non_ascii();
    lost_ = true;
  }

  void check_depth(int depth) const { check_depth(depth, {line_, column_}); }
  void check_depth(int depth, toml::source_position where) const {
    if (depth > kMaxTomlDepth)
      refuse_at(where, "tables nest more than " + std::to_string(kMaxTomlDepth) +
             " levels deep here (dotted keys, [table] headers, inline tables and arrays together); memplan reads "
             "at most " + std::to_string(kMaxTomlDepth) + " levels and refuses deeper input before parsing it");
  }

  void header() {
    advance();  // [
    const bool array_of_tables = peek() == '[';
    if (array_of_tables) advance();
    const int segments = key(0);
    if (lost_) return;
    skip_blanks();
    for (int i = 0; i < (array_of_tables ? 2 : 1); ++i) {
      if (peek() != ']') return unexpected();
      advance();
    }
    table_depth_ = segments;
  }

  // A dotted key from pos_; returns its segments. `depth` is the nesting it
  // starts at.
  int key(int depth) {
    int segments = 0;
    for (;;) {
      skip_blanks();
      const toml::source_position start{line_, column_};
      const unsigned char c = peek();
      if (c == '"' || c == '\'') {
        if (!quoted_key(c)) return segments;
      } else if (is_bare_key_char(c)) {
        while (is_bare_key_char(peek())) advance();
      } else {
        unexpected();
        return segments;
      }
      ++segments;
      check_depth(depth + segments, start);
      skip_blanks();
      if (peek() != '.') return segments;
      advance();
    }
  }

  bool quoted_key(unsigned char quote) {
    advance();
    for (;;) {
      const unsigned char c = peek();
      if (eof() || c == '\n' || c == '\r') {
        lost_ = true;
        return false;
      }
      if (c >= 0x80)
        refuse("a non-ASCII character in a quoted key; memplan's keys are ASCII: use the key's name from the "
               "documentation");
      advance();
      if (c == quote) return true;
      if (quote == '"' && c == '\\' && !eof() && peek() < 0x80 && peek() != '\n') advance();
    }
  }

  void key_value(int depth) {
    const int segments = key(depth);
    if (lost_) return;
    skip_blanks();
    if (peek() != '=') return unexpected();
    advance();
    skip_blanks();
    value(depth + segments);
  }

  // After a value at the top level: blanks, a comment, the end of the line.
  void end_of_line() {
    skip_blanks();
    if (peek() == '#') skip_comment();
    if (!eof() && !at_newline()) unexpected();
  }

  void value(int depth) {
    const unsigned char c = peek();
    if (starts("\"\"\""))
      multi_line_basic_string();
    else if (c == '"')
      single_line_string('"');
    else if (starts("'''"))
      multi_line_literal_string();
    else if (c == '\'')
      single_line_string('\'');
    else if (c == '[')
      array(depth + 1);
    else if (c == '{')
      inline_table(depth + 1);
    else
      scalar();
  }

  // Numbers, booleans, inf/nan, dates and times: ASCII up to a terminator; a
  // date and a time may be separated by one space.
  void scalar() {
    const size_t start = pos_;
    for (;;) {
      const unsigned char c = peek();
      if (eof() || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == ']' || c == '}' || c == '#') break;
      if (c == ' ') {
        const bool date_then_time = pos_ - start == 10 && text_[start + 4] == '-' && text_[start + 7] == '-' &&
                                    peek(1) >= '0' && peek(1) <= '9';
        if (!date_then_time) break;
      }
      if (c >= 0x80) refuse_non_ascii();
      advance();
    }
    if (pos_ == start) unexpected();
  }

  void single_line_string(unsigned char quote) {
    advance();
    for (;;) {
      const unsigned char c = peek();
      if (eof() || c == '\n' || c == '\r') {
        lost_ = true;
        return;
      }
      advance();
      if (c == quote) return;
      if (quote == '"' && c == '\\' && !eof() && peek() != '\n' && peek() != '\r') advance();
    }
  }

  // At the end of a multi-line string's text: its closing delimiter (up to two
  // more quotes end the content), or the end of the input (toml++ reports it).
  bool ends_multi_line(char quote) {
    if (eof()) {
      lost_ = true;
      return true;
    }
    if (!starts(std::string(3, quote))) return false;
    advance(3);
    while (peek() == static_cast<unsigned char>(quote)) advance();
    return true;
  }

  void multi_line_literal_string() {
    advance(3);
    while (!ends_multi_line('\'')) advance();
  }

  // toml++ asks "is this whitespace?" of the character after every backslash
  // and, after a line-ending backslash, of each character it skips and of the
  // first one it keeps.
  void multi_line_basic_string() {
    advance(3);
    while (!ends_multi_line('"')) {
      if (peek() != '\\') {
        advance();
        continue;
      }
      advance();  // the backslash
      if (peek() >= 0x80) refuse_after_backslash();
      if (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r') {
        while (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r') advance();
        if (peek() >= 0x80 && whitespace_check_faults(code_point())) refuse_after_backslash();
      } else if (!eof()) {
        advance();  // the escaped character
      }
    }
  }
  [[noreturn]] void refuse_after_backslash() const {
    refuse("a non-ASCII character after a backslash or a line-ending backslash in a multi-line string; memplan "
           "refuses it before parsing (the TOML parser it is built with mishandles it): write the character as "
           "\\uXXXX, or start it on a line of its own");
  }

  void array(int depth) {
    check_depth(depth);
    advance();  // [
    for (;;) {
      skip_blank_lines();
      if (peek() == ']') return advance();
      value(depth);
      if (lost_) return;
      skip_blank_lines();
      if (peek() == ',') {
        advance();
        continue;
      }
      if (peek() == ']') return advance();
      return unexpected();
    }
  }

  void inline_table(int depth) {
    check_depth(depth);
    advance();  // {
    skip_blanks();
    if (peek() == '}') return advance();
    for (;;) {
      key_value(depth);
      if (lost_) return;
      skip_blanks();
      if (peek() == ',') {
        advance();
        continue;
      }
      if (peek() == '}') return advance();
      return unexpected();
    }
  }

  // After the scan lost the structure: no faulting code point anywhere, and
  // no run of dots long enough to nest too deep whatever the structure is.
  void strict_rest() {
    int dots_on_line = 0;
    while (!eof()) {
      const unsigned char c = peek();
      if (c == '\n') dots_on_line = 0;
      if (c == '.' && ++dots_on_line > kMaxTomlDepth) check_depth(dots_on_line + 1);
      if (c >= 0x80 && whitespace_check_faults(code_point()))
        refuse("a character the TOML parser memplan is built with mishandles, in text it cannot tell apart "
               "(fix the TOML error before it first; a comment or a string may hold the character)");
      advance();
    }
  }

  std::string_view text_;
  toml::source_path_ptr path_;
  size_t pos_ = 0;
  toml::source_index line_ = 1;
  toml::source_index column_ = 1;
  int table_depth_ = 0;  // segments of the last [header]
  bool lost_ = false;
};

}  // namespace

void check_toml_input(std::string_view text, std::string_view source_path) { Scan(text, source_path).run(); }

toml::table parse_toml(std::string_view text, std::string_view source_path) {
  check_toml_input(text, source_path);
  return toml::parse(text, source_path);
}

}  // namespace memplan
