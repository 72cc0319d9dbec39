// Tests of the CSV reader: columns, labels, quoting, and each error's wording.
#include "runtime/data/CsvDataset.h"

#include "TestSupport.h"

#include <gtest/gtest.h>

using namespace dtf::data;
using namespace dtf::data::testing;

namespace {

std::string parseError(const std::string &text,
                       const CsvOptions &options = {}) {
  Expected<InMemoryDataset> d = parseCsv(text, "data.csv", options);
  EXPECT_FALSE(d.ok()) << "parsed: " << text;
  return d.ok() ? "" : d.error();
}

CsvOptions labelNamed(const std::string &name) {
  CsvOptions o;
  o.labelColumn = name;
  return o;
}

TEST(CsvDataset, HeaderAndLabelByName) {
  Expected<InMemoryDataset> d = parseCsv("x1,label,x2\n1.5,2,-3\n0,0,1e-3\n",
                                         "data.csv", labelNamed("label"));
  ASSERT_TRUE(d.ok()) << d.error();
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ(d->exampleShape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(d->features(), (std::vector<float>{1.5f, -3.0f, 0.0f, 1e-3f}));
  EXPECT_EQ(d->labels(), (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(d->numClasses(), 3);
  EXPECT_EQ(d->description(), "csv:data.csv");
}

TEST(CsvDataset, NoHeaderLabelByIndex) {
  CsvOptions o;
  o.hasHeader = false;
  o.labelIndex = 0;
  Expected<InMemoryDataset> d = parseCsv("1,0.25,0.5\n0,+4,5\n", "data.csv", o);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->features(), (std::vector<float>{0.25f, 0.5f, 4.0f, 5.0f}));
  EXPECT_EQ(d->labels(), (std::vector<int32_t>{1, 0}));
  // The default label is the last column.
  o.labelIndex = -1;
  d = parseCsv("1,0.25,2\n0,+4,5\n", "data.csv", o);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->features(), (std::vector<float>{1.0f, 0.25f, 0.0f, 4.0f}));
  EXPECT_EQ(d->labels(), (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(d->numClasses(), 6);
}

TEST(CsvDataset, QuotesCrlfBlankLinesBomAndFloatLabels) {
  std::string text = "\xEF\xBB\xBF\"a\",\"the \"\"label\"\"\", b \r\n"
                     "\r\n"
                     " 1 , \"3.0\" ,2\r\n"
                     "\n"
                     "4,1,\"5\"";
  Expected<InMemoryDataset> d =
      parseCsv(text, "data.csv", labelNamed("the \"label\""));
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->features(), (std::vector<float>{1, 2, 4, 5}));
  EXPECT_EQ(d->labels(), (std::vector<int32_t>{3, 1}));
}

TEST(CsvDataset, ChosenFeatureColumnsInTheirOrder) {
  CsvOptions o = labelNamed("y");
  o.featureColumns = {"c", "a"};
  Expected<InMemoryDataset> d =
      parseCsv("a,b,c,y\n1,2,3,0\n4,5,6,1\n", "data.csv", o);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->features(), (std::vector<float>{3, 1, 6, 4}));
}

TEST(CsvDataset, SemicolonDelimiter) {
  CsvOptions o;
  o.delimiter = ';';
  Expected<InMemoryDataset> d = parseCsv("a;y\n1.25;1\n", "data.csv", o);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->features(), (std::vector<float>{1.25f}));
}

TEST(CsvDataset, NotANumberNamesLineAndColumn) {
  EXPECT_EQ(parseError("x1,x2,x3,y\n1,2,3,0\n\n4,5,abc,1\n", labelNamed("y")),
            "data.csv:4: column 'x3': 'abc' is not a number");
  EXPECT_EQ(parseError("x1,y\n1.5.2,0\n"),
            "data.csv:2: column 'x1': '1.5.2' is not a number");
  EXPECT_EQ(parseError("x1,y\n,0\n"),
            "data.csv:2: column 'x1': is empty; expected a number");
  EXPECT_EQ(parseError("x1,y\nnan,0\n"),
            "data.csv:2: column 'x1': 'nan' is not a finite number");
  EXPECT_EQ(parseError("x1,y\ninf,0\n"),
            "data.csv:2: column 'x1': 'inf' is not a finite number");
  EXPECT_EQ(parseError("x1,y\n-Infinity,0\n"),
            "data.csv:2: column 'x1': '-Infinity' is not a finite number");
  EXPECT_EQ(parseError("x1,y\n1e99,0\n"),
            "data.csv:2: column 'x1': '1e99' is out of the range of float32");
  EXPECT_EQ(parseError("x1,y\n+-1,0\n"),
            "data.csv:2: column 'x1': '+-1' is not a number");
  CsvOptions noHeader;
  noHeader.hasHeader = false;
  EXPECT_EQ(parseError("1,2,0\n1,x,0\n", noHeader),
            "data.csv:2: column 2: 'x' is not a number");
}

TEST(CsvDataset, BadLabels) {
  EXPECT_EQ(parseError("x,y\n1,2.5\n"),
            "data.csv:2: column 'y': '2.5' is not a class label (a "
            "non-negative integer)");
  EXPECT_EQ(
      parseError("x,y\n1,-1\n"),
      "data.csv:2: column 'y': label -1 is negative; labels are 0, 1, 2, ...");
  CsvOptions o;
  o.numClasses = 3;
  EXPECT_EQ(parseError("x,y\n1,2\n1,3\n", o),
            "data.csv:3: column 'y': label 3 is outside 0..2 (the model's loss "
            "has 3 classes)");
}

// A NUL (or any control byte) in a field would cut the message short where
// it is printed as a C string: it is written \x00 instead.
TEST(CsvDataset, NonPrintableBytesInMessagesAreEscaped) {
  const std::string err = parseError(std::string("x1,y\n1\0002,0\n", 11));
  EXPECT_EQ(err, "data.csv:2: column 'x1': '1\\x002' is not a number");
  EXPECT_EQ(err.find('\0'), std::string::npos);
  EXPECT_EQ(parseError(std::string("x1,y\n1,\x01\n", 9)),
            "data.csv:2: column 'y': '\\x01' is not a class label (a "
            "non-negative integer)");
  // The header's names, too.
  EXPECT_EQ(parseError(std::string("a\0b,y\n?,0\n", 10)),
            "data.csv:2: column 'a\\x00b': '?' is not a number");
}

TEST(CsvDataset, ColumnCountAndChoiceErrors) {
  EXPECT_EQ(parseError("a,b,y\n1,2,0\n1,2\n"),
            "data.csv:3: expected 3 columns as the header has, found 2");
  EXPECT_EQ(parseError("a,b,y\n1,2,0\n", labelNamed("label")),
            "data.csv:1: no column named 'label' in the header (a, b, y)");
  EXPECT_EQ(parseError("a,a,y\n1,2,0\n", labelNamed("a")),
            "data.csv:1: the header names two columns 'a' (1 and 2)");
  CsvOptions noHeader = labelNamed("y");
  noHeader.hasHeader = false;
  EXPECT_EQ(
      parseError("1,2,0\n", noHeader),
      "data.csv: column 'y' is chosen by name, but the file has no header row; "
      "choose columns by index");
  CsvOptions index;
  index.labelIndex = 5;
  EXPECT_EQ(parseError("a,y\n1,0\n", index),
            "data.csv:1: label column index 5 is outside the 2 columns");
  EXPECT_EQ(parseError("y\n1\n"),
            "data.csv:1: no feature columns besides the label column 'y'");
  EXPECT_EQ(parseError("a,y\n"), "data.csv: no data rows after the header");
  EXPECT_EQ(parseError("a,y\n\"1,0\n"),
            "data.csv:2: field 1: the quoted field is not closed before the "
            "end of the line");
}

TEST(CsvDataset, ReadsAFileAndNamesAMissingOne) {
  TempDir dir;
  std::string path = dir.file("d.csv");
  std::string text = "f,y\n0.5,1\n";
  writeRaw(path, Bytes(text.begin(), text.end()));
  Expected<InMemoryDataset> d = readCsv(path);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->features(), (std::vector<float>{0.5f}));
  Expected<InMemoryDataset> missing = readCsv(dir.file("none.csv"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error(),
            dir.file("none.csv") + ": cannot open: No such file or directory");
}

} // namespace
