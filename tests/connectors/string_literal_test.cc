// AppendStringLiteral (connectors/postgres_sql.h) builds the literals of every
// deferred statement's text arguments without the connection. PostgreSQL
// itself is the judge: each literal, selected on a session like denormd's
// (standard_conforming_strings on), gives back exactly the text it was made
// of.
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "connectors/postgres_sql.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

std::string Literal(const std::string& text) {
  std::string out;
  AppendStringLiteral(text, &out);
  return out;
}

TEST(StringLiteral, DoublesQuotesOnlyAndAppends) {
  EXPECT_EQ("''", Literal(""));
  EXPECT_EQ("'plain'", Literal("plain"));
  EXPECT_EQ("''''", Literal("'"));
  EXPECT_EQ("'it''s'", Literal("it's"));
  EXPECT_EQ("'''a'''''", Literal("'a''"));
  EXPECT_EQ(R"('back\slash\')", Literal(R"(back\slash\)"));
  std::string out = "execute s(";
  AppendStringLiteral("x'", &out);
  EXPECT_EQ("execute s('x''')", out + ")");
}

TEST(StringLiteral, RefusesANulByte) {
  std::string out;
  EXPECT_THROW(AppendStringLiteral(std::string("a\0b", 3), &out), std::invalid_argument);
}

TEST(StringLiteral, PostgresReadsBackExactlyTheText) {
  std::vector<std::string> texts = {"", "'", "''", "\\'", "\\\\'", "'; select 1; --",
                                    "$$ $q$ '$$", "E'\\x41'", "tab\there\nnewline\r",
                                    "caf\xC3\xA9 \xF0\x9F\x98\x80 '\xC3\xA9'", "/* ' */"};
  // And random texts over the characters that matter to SQL, with non-ASCII.
  const std::vector<std::string> pieces = {"'", "\\", "\"", "$", ";", "-", "/", "*", "E",
                                           "\n", "\t", " ", "a", "\xC3\xA9", "\xE2\x82\xAC"};
  std::mt19937 random(20261129);
  for (int i = 0; i < 200; ++i) {
    std::string text;
    const int length = static_cast<int>(random() % 40);
    for (int j = 0; j < length; ++j) text += pieces[random() % pieces.size()];
    texts.push_back(text);
  }
  pqxx::connection connection(testing::TestPostgresUrl());
  pqxx::nontransaction work(connection);
  work.exec("set standard_conforming_strings = on");
  for (const std::string& text : texts) {
    const pqxx::result rows = work.exec("select " + Literal(text) + "::text");
    ASSERT_EQ(1u, rows.size());
    EXPECT_EQ(text, rows[0][0].as<std::string>()) << "literal " << Literal(text);
  }
}

}  // namespace
}  // namespace denormd
