// RedactSecrets: passwords in URLs and secret-named key/value pairs are
// masked; everything else is left as it is.
#include <gtest/gtest.h>

#include "common/redact.h"

namespace denormd {
namespace {

TEST(RedactSecrets, MasksPasswordsAndSecretValues) {
  EXPECT_EQ("postgresql://ann:***@db:5432/x", RedactSecrets("postgresql://ann:Sup3r@db:5432/x"));
  EXPECT_EQ("cannot open (host=db password=*** dbname=x)",
            RedactSecrets("cannot open (host=db password=Sup3r dbname=x)"));
  EXPECT_EQ("password=*** user=ann", RedactSecrets("password='a b\\'c' user=ann"));
  EXPECT_EQ("librdkafka property sasl.password=*** bad",
            RedactSecrets("librdkafka property sasl.password=Sup3r: bad"));
  EXPECT_EQ("ssl.key.password=*** sasl.oauthbearer.client.secret=***",
            RedactSecrets("ssl.key.password=k1 sasl.oauthbearer.client.secret=k2"));
  EXPECT_EQ("{\"token\": ***}", RedactSecrets("{\"token\": \"abc\"}"));
  EXPECT_EQ("PGPASSWORD=***", RedactSecrets("PGPASSWORD=Sup3r"));
}

TEST(RedactSecrets, LeavesOrdinaryTextAlone) {
  for (const char* text : {"postgresql://ann@db:5432/x", "host=db port=5432 user=ann",
                           "connection to server at \"127.0.0.1\", port 1 failed",
                           "schema library: 3 documents", "ts=2026-11-26T06:00:00Z level=info"}) {
    EXPECT_EQ(text, RedactSecrets(text));
  }
  EXPECT_TRUE(IsSecretKey("sasl.password"));
  EXPECT_FALSE(IsSecretKey("bootstrap.servers"));
  // TLS and SASL material (issue 25).
  EXPECT_TRUE(IsSecretKey("ssl.key.pem"));
  EXPECT_TRUE(IsSecretKey("ssl.keystore.password"));
  EXPECT_TRUE(IsSecretKey("sasl.jaas.config"));
  EXPECT_TRUE(IsSecretKey("sasl.oauthbearer.config"));
  EXPECT_EQ("ssl.key.pem=*** linger.ms=5", RedactSecrets("ssl.key.pem=MIIEv linger.ms=5"));
}

}  // namespace
}  // namespace denormd
