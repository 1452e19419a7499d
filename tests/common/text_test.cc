// The small text helpers the commands print with.
#include <gtest/gtest.h>

#include "common/text.h"

namespace denormd {
namespace {

TEST(Text, CountOfSaysOneInTheSingular) {
  EXPECT_EQ("0 events", CountOf(0, "event"));
  EXPECT_EQ("1 event", CountOf(1, "event"));
  EXPECT_EQ("2 documents", CountOf(2, "document"));
  EXPECT_EQ("1,000 documents", CountOf(1000, "document"));
}

TEST(Text, JoinedPutsTheSeparatorBetweenItemsOnly) {
  EXPECT_EQ("", Joined({}));
  EXPECT_EQ("a", Joined({"a"}));
  EXPECT_EQ("a, b, c", Joined({"a", "b", "c"}));
  EXPECT_EQ("a,b", Joined({"a", "b"}, ","));
}

TEST(Text, PrintableBytesEscapesWhatIsNotPrintable) {
  EXPECT_EQ("a b~", PrintableBytes("a b~"));
  EXPECT_EQ("\\x01\\x00\\xbf", PrintableBytes(std::string("\x01\x00\xbf", 3)));
  EXPECT_EQ("\\x7f\\x1f", PrintableBytes("\x7f\x1f"));
}

TEST(Text, ControlsEscapedKeepsUtf8AndEscapesControlsOnly) {
  EXPECT_EQ("a b~ \xc3\xbc", ControlsEscaped("a b~ \xc3\xbc"));
  EXPECT_EQ("a\\x00b\\x1b\\x7f\\x0a", ControlsEscaped(std::string("a\0b\x1b\x7f\n", 6)));
}

}  // namespace
}  // namespace denormd
