// The value readers of the config: sizes (binary units only), modes, id lists, and the printers'
// output read back.
#include "daemon/config_values.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

namespace kvtier::config {
namespace {

toml::table Parse(const std::string& value) { return toml::parse("v = " + value); }

TEST(ConfigSizeTest, AcceptsBytesAndBinaryUnits) {
  EXPECT_EQ(*ParseSizeText("4096"), 4096u);
  EXPECT_EQ(*ParseSizeText("4096B"), 4096u);
  EXPECT_EQ(*ParseSizeText("4 KiB"), 4096u);
  EXPECT_EQ(*ParseSizeText("2MiB"), 2u << 20);
  EXPECT_EQ(*ParseSizeText(" 8GiB "), uint64_t{8} << 30);
  EXPECT_EQ(*ParseSizeText("1.5GiB"), uint64_t{3} << 29);
  EXPECT_EQ(*ParseSizeText("16TiB"), uint64_t{16} << 40);
  EXPECT_EQ(*ReadSize(*Parse("8589934592").get("v")), uint64_t{8} << 30);
  EXPECT_EQ(*ReadSize(*Parse("\"8GiB\"").get("v")), uint64_t{8} << 30);
}

TEST(ConfigSizeTest, RefusesDecimalAndAmbiguousUnitsWithAHint) {
  for (const char* bad :
       {"8 GB", "8G", "8g", "8gib", "GiB", "", "-1", "1..5GiB", "0x10", "8 GiBs"}) {
    const absl::StatusOr<uint64_t> size = ParseSizeText(bad);
    ASSERT_FALSE(size.ok()) << bad;
    EXPECT_EQ(size.status().message(),
              fmt::format("'{}' is not a size; use e.g. 8GiB or 8589934592 (units: B, KiB, MiB, "
                          "GiB, TiB)",
                          bad));
  }
}

TEST(ConfigSizeTest, RefusesFractionsOfBytesAndOverflow) {
  EXPECT_EQ(ParseSizeText("1.5").status().message(),
            "'1.5' is not a size; use e.g. 8GiB or "
            "8589934592 (units: B, KiB, MiB, GiB, TiB)");
  EXPECT_EQ(ParseSizeText("1.0001KiB").status().message(),
            "'1.0001KiB' is not a whole number of bytes");
  EXPECT_EQ(ParseSizeText("99999999TiB").status().message(), "'99999999TiB' is too large");
  EXPECT_FALSE(ParseSizeText("99999999999999999999").ok());
  EXPECT_EQ(ReadSize(*Parse("-5").get("v")).status().message(),
            "-5 is not in [0, 18446744073709551615]");
  EXPECT_EQ(
      ReadSize(*Parse("true").get("v")).status().message(),
      "expected a size (an integer of bytes, or a string such as \"8GiB\"), got the boolean true");
}

TEST(ConfigSizeTest, PrintsTheLargestWholeUnitAndReadsItBack) {
  EXPECT_EQ(FormatSize(uint64_t{1} << 30), "\"1GiB\"");
  EXPECT_EQ(FormatSize(3u << 29), "\"1536MiB\"");
  EXPECT_EQ(FormatSize(4097), "4097");
  EXPECT_EQ(FormatSize(0), "0");
  for (const uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{4096}, uint64_t{3} << 29,
                           uint64_t{5} << 40, ~uint64_t{0}}) {
    EXPECT_EQ(*ReadSize(*Parse(FormatSize(v)).get("v")), v) << FormatSize(v);
  }
}

TEST(ConfigModeTest, ReadsOctalStringsAndIntegers) {
  EXPECT_EQ(*ReadMode(*Parse("\"0660\"").get("v")), 0660u);
  EXPECT_EQ(*ReadMode(*Parse("\"600\"").get("v")), 0600u);
  EXPECT_EQ(*ReadMode(*Parse("0o640").get("v")), 0640u);
  EXPECT_EQ(ReadMode(*Parse("\"0980\"").get("v")).status().message(),
            "'0980' is not an octal file mode such as \"0660\"");
  EXPECT_EQ(ReadMode(*Parse("\"1777\"").get("v")).status().message(),
            "1777 has bits beyond the permission bits 0777");
  EXPECT_EQ(FormatMode(0640), "\"0640\"");
}

TEST(ConfigListTest, IdListsTakeNamesAndNumbers) {
  EXPECT_EQ(*ReadIdList(*Parse("[\"root\", 1000]").get("v")),
            (std::vector<std::string>{"root", "1000"}));
  EXPECT_EQ(ReadIdList(*Parse("[-1]").get("v")).status().message(),
            "expected a name or an id >= 0 (item 0), got the integer -1");
  EXPECT_EQ(ReadStringList(*Parse("[\"a\", 2]").get("v")).status().message(),
            "expected strings in the array (item 1), got the integer 2");
  EXPECT_EQ(ReadStringList(*Parse("\"a\"").get("v")).status().message(),
            "expected an array of strings, got the string \"a\"");
}

TEST(ConfigFormatTest, StringsAndDoublesStayTheirType) {
  EXPECT_EQ(Quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000A\"");
  EXPECT_EQ(*Parse(Quote("a\"b\\c\n")).get("v")->value<std::string>(), "a\"b\\c\n");
  EXPECT_EQ(FormatDouble(1.0), "1.0");
  EXPECT_EQ(FormatDouble(0.95), "0.95");
  EXPECT_TRUE(Parse(FormatDouble(1.0)).get("v")->is_floating_point());
  EXPECT_EQ(SplitNames("lru, fifo,sieve"), (std::vector<std::string>{"lru", "fifo", "sieve"}));
}

}  // namespace
}  // namespace kvtier::config
