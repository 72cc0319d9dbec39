// The CSV reader: fields, numbers and labels, each error with its line and
// column.
#include "runtime/data/CsvDataset.h"

#include "schema/PlanSchema.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>

namespace dtf::data {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

/// Splits one line into fields. A field that starts with '"' (after blanks)
/// runs to the closing quote, with "" standing for one quote inside it.
Expected<std::vector<std::string>> splitFields(std::string_view line,
                                               char delimiter) {
  std::vector<std::string> fields;
  size_t i = 0;
  while (true) {
    std::string field;
    size_t start = i;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
      ++i;
    if (i < line.size() && line[i] == '"') {
      ++i;
      bool closed = false;
      while (i < line.size()) {
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          closed = true;
          ++i;
          break;
        }
        field += line[i++];
      }
      if (!closed)
        return Error(
            "field " + std::to_string(fields.size() + 1) +
            ": the quoted field is not closed before the end of the line");
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
        ++i;
      if (i < line.size() && line[i] != delimiter)
        return Error("field " + std::to_string(fields.size() + 1) +
                     ": text after the closing quote");
    } else {
      size_t end = line.find(delimiter, start);
      if (end == std::string_view::npos)
        end = line.size();
      field = std::string(trim(line.substr(start, end - start)));
      i = end;
    }
    fields.push_back(std::move(field));
    if (i >= line.size())
      break;
    ++i; // the delimiter
  }
  return fields;
}

/// A field or header name as messages quote it: 'text', with control bytes
/// (a NUL would end the message where it is printed) and bytes >= 0x7f
/// written as \xNN.
std::string quoted(std::string_view text) {
  return "'" + plan::printable(text) + "'";
}

/// Parses a whole field as a finite float, in the C locale whatever the
/// process's. Returns "" on success, else why the text is not a number.
std::string parseNumber(std::string_view text, float &out) {
  std::string_view t = trim(text);
  if (t.empty())
    return "is empty; expected a number";
  // from_chars takes no '+' sign; one is allowed before an unsigned number.
  std::string_view digits = t;
  if (digits.front() == '+') {
    digits.remove_prefix(1);
    if (digits.empty() || digits.front() == '-')
      return quoted(t) + " is not a number";
  }
  auto [end, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), out);
  if (ec == std::errc::result_out_of_range)
    return quoted(t) + " is out of the range of float32";
  if (ec != std::errc() || end != digits.data() + digits.size())
    return quoted(t) + " is not a number";
  if (!std::isfinite(out))
    return quoted(t) + " is not a finite number";
  return "";
}

/// Parses a class label: a non-negative integer, also when written as "3.0".
std::string parseLabel(std::string_view text, int32_t &out) {
  std::string_view t = trim(text);
  if (t.empty())
    return "is empty; expected a class label";
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
  if (ec == std::errc() && end == t.data() + t.size()) {
    if (out < 0)
      return "label " + plan::printable(t) +
             " is negative; labels are 0, 1, 2, ...";
    return "";
  }
  double value = 0;
  auto [dend, dec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (dec == std::errc() && dend == t.data() + t.size() &&
      std::isfinite(value) && value == std::floor(value) && value >= 0 &&
      value <= double(std::numeric_limits<int32_t>::max())) {
    out = static_cast<int32_t>(value);
    return "";
  }
  return quoted(t) + " is not a class label (a non-negative integer)";
}

/// The columns of a file: its header (when it has one), their count, and the
/// label and feature columns the options pick.
struct CsvColumns {
  std::vector<std::string> header;
  bool haveHeader = false;
  size_t count = 0;
  int label = -1;
  std::vector<size_t> features;

  /// How errors name column `col`: by its header, else by its number.
  std::string name(size_t col) const {
    if (haveHeader && !header[col].empty())
      return "column " + quoted(header[col]);
    return "column " + std::to_string(col + 1);
  }
};

/// The column the header names `wanted`, for the options that choose
/// columns by name.
Expected<size_t> columnByName(const CsvColumns &cols, const std::string &wanted,
                              const std::string &name,
                              const std::string &where) {
  if (!cols.haveHeader)
    return Error(name + ": column " + quoted(wanted) +
                 " is chosen by name, but the file has no header row; "
                 "choose columns by index");
  const std::vector<std::string> &header = cols.header;
  size_t found = header.size();
  for (size_t c = 0; c < header.size(); ++c) {
    if (header[c] != wanted)
      continue;
    if (found != header.size())
      return Error(where + "the header names two columns " + quoted(wanted) +
                   " (" + std::to_string(found + 1) + " and " +
                   std::to_string(c + 1) + ")");
    found = c;
  }
  if (found == header.size()) {
    std::string all;
    for (const std::string &h : header)
      all += (all.empty() ? "" : ", ") + plan::printable(h);
    return Error(where + "no column named " + quoted(wanted) +
                 " in the header (" + all + ")");
  }
  return found;
}

/// Picks the label and feature columns of `cols` (its count known) by the
/// options; the error names line `lineNo` of the file `name`.
std::optional<Error> resolveColumns(const CsvOptions &options,
                                    const std::string &name, size_t lineNo,
                                    CsvColumns &cols) {
  std::string where = name + ":" + std::to_string(lineNo) + ": ";
  if (!options.labelColumn.empty()) {
    Expected<size_t> c = columnByName(cols, options.labelColumn, name, where);
    if (!c)
      return Error(c.error());
    cols.label = static_cast<int>(*c);
  } else {
    long long idx = options.labelIndex;
    if (idx < 0)
      idx += static_cast<long long>(cols.count);
    if (idx < 0 || idx >= static_cast<long long>(cols.count))
      return Error(where + "label column index " +
                   std::to_string(options.labelIndex) + " is outside the " +
                   std::to_string(cols.count) + " columns");
    cols.label = static_cast<int>(idx);
  }

  if (!options.featureColumns.empty()) {
    for (const std::string &f : options.featureColumns) {
      Expected<size_t> c = columnByName(cols, f, name, where);
      if (!c)
        return Error(c.error());
      if (static_cast<int>(*c) == cols.label)
        return Error(where + "column " + quoted(f) +
                     " is the label; it cannot also be a feature");
      cols.features.push_back(*c);
    }
  } else {
    for (size_t c = 0; c < cols.count; ++c)
      if (static_cast<int>(c) != cols.label)
        cols.features.push_back(c);
  }
  if (cols.features.empty())
    return Error(where + "no feature columns besides the label " +
                 cols.name(static_cast<size_t>(cols.label)));
  return std::nullopt;
}

} // namespace

Expected<InMemoryDataset> parseCsv(const std::string &text,
                                   const std::string &name,
                                   const CsvOptions &options) {
  std::string_view rest(text);
  if (rest.substr(0, 3) == "\xEF\xBB\xBF")
    rest.remove_prefix(3);

  // Resolved once the column count is known (from the header or the first row).
  CsvColumns cols;

  std::vector<float> features;
  std::vector<int32_t> labels;
  int32_t maxLabel = -1;
  size_t lineNo = 0;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest =
        nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    ++lineNo;
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (trim(line).empty())
      continue;

    std::string where = name + ":" + std::to_string(lineNo) + ": ";
    Expected<std::vector<std::string>> fields =
        splitFields(line, options.delimiter);
    if (!fields)
      return Error(where + fields.error());

    if (cols.count == 0) {
      cols.count = fields->size();
      if (options.hasHeader) {
        cols.header = std::move(*fields);
        cols.haveHeader = true;
        if (std::optional<Error> e =
                resolveColumns(options, name, lineNo, cols))
          return *e;
        continue;
      }
      if (std::optional<Error> e = resolveColumns(options, name, lineNo, cols))
        return *e;
    }

    if (fields->size() != cols.count)
      return Error(
          where + "expected " + std::to_string(cols.count) + " columns" +
          (cols.haveHeader ? " as the header has" : " as the first line has") +
          ", found " + std::to_string(fields->size()));

    for (size_t c : cols.features) {
      float value = 0;
      if (std::string why = parseNumber((*fields)[c], value); !why.empty())
        return Error(where + cols.name(c) + ": " + why);
      features.push_back(value);
    }
    size_t lc = static_cast<size_t>(cols.label);
    int32_t label = 0;
    if (std::string why = parseLabel((*fields)[lc], label); !why.empty())
      return Error(where + cols.name(lc) + ": " + why);
    if (options.numClasses && label >= *options.numClasses)
      return Error(where + cols.name(lc) + ": label " + std::to_string(label) +
                   " is outside 0.." + std::to_string(*options.numClasses - 1) +
                   " (the model's loss has " + std::to_string(*options.numClasses) +
                   " classes)");
    maxLabel = std::max(maxLabel, label);
    labels.push_back(label);
  }

  if (labels.empty())
    return Error(name + ": no data rows" +
                 (cols.haveHeader ? " after the header" : std::string()));
  std::optional<int32_t> numClasses = options.numClasses;
  if (!numClasses)
    numClasses = maxLabel + 1;
  int64_t width = static_cast<int64_t>(cols.features.size());
  return InMemoryDataset::create(std::move(features), std::move(labels),
                                 {width}, numClasses, "csv:" + name);
}

Expected<InMemoryDataset> readCsv(const std::string &path,
                                  const CsvOptions &options) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Error(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    return Error(path + ": cannot read: " + std::strerror(errno));
  return parseCsv(text.str(), path, options);
}

} // namespace dtf::data
