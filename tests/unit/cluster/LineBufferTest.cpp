// Tests of LineBuffer: whole lines out of arbitrary chunks, redraws as lines.
#include "runtime/cluster/LineBuffer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dtf::cluster {
namespace {

std::vector<std::string> linesOf(const std::vector<std::string> &chunks) {
  std::vector<std::string> lines;
  LineBuffer buffer;
  auto emit = [&](std::string_view line) { lines.emplace_back(line); };
  for (const std::string &c : chunks)
    buffer.append(c.data(), c.size(), emit);
  buffer.finish(emit);
  return lines;
}

using Lines = std::vector<std::string>;

TEST(LineBuffer, JoinsChunksIntoLines) {
  EXPECT_EQ(linesOf({"ab", "c\nd", "e\n\nf"}), (Lines{"abc", "de", "", "f"}));
}

TEST(LineBuffer, RedrawsBecomeLines) {
  EXPECT_EQ(linesOf({"\rstep 1\x1b[K", "\rstep 2\x1b[K", "\n", "done\n"}),
            (Lines{"step 1", "step 2", "done"}));
}

TEST(LineBuffer, CrLfIsOneLine) {
  EXPECT_EQ(linesOf({"a\r", "\nb\r\n\r\nc"}), (Lines{"a", "b", "", "c"}));
}

TEST(LineBuffer, LongLinesComeInPieces) {
  std::string big(LineBuffer::kMaxLine + 10, 'x');
  Lines lines = linesOf({big + "\n"});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].size(), LineBuffer::kMaxLine);
  EXPECT_EQ(lines[1].size(), 10u);
}

} // namespace
} // namespace dtf::cluster
