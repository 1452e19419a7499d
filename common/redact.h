// Secrets never reach a log line, an error, `status` or an HTTP answer:
// every text that may hold a connection string, a librdkafka property or a
// server's error message goes through RedactSecrets first.
#ifndef DENORMD_COMMON_REDACT_H_
#define DENORMD_COMMON_REDACT_H_

#include <string>

namespace denormd {

// `text` with secrets replaced by "***":
//   the password of a URL's user info   postgresql://ann:***@db:5432/x
//   the value of a key=value or key: value pair whose key names a secret
//   (password, passwd, pwd, secret, token, credential, api key, private key,
//   ssl.key, keystore, jaas, oauthbearer.config, in any case, e.g.
//   password=, sasl.password=, ssl.key.password=, ssl.key.pem=,
//   sasl.jaas.config=, sasl.oauthbearer.client.secret=), quoted values
//   included. librdkafka property values are never printed at all, whatever
//   their key (connectors/kafka_client.h).
std::string RedactSecrets(const std::string& text);

// Whether a property or parameter name names a secret (as above).
bool IsSecretKey(const std::string& key);

}  // namespace denormd

#endif  // DENORMD_COMMON_REDACT_H_
