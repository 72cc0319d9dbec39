// TlsCipher: dtf's TLS 1.3 suite order, set through OpenSSL's ssl_conf
// module (gRPC 1.51 sets only the TLS 1.2 cipher list itself).
#include "runtime/distributed/TlsCipher.h"

#include <openssl/bio.h>
#include <openssl/conf.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <mutex>
#include <utility>
#include <vector>

namespace dtf::dist {

namespace {

using Settings = std::vector<std::pair<std::string, std::string>>;

// The settings of the system configuration's ssl_conf "system_default"
// section (OPENSSL_CONF, else OpenSSL's openssl.cnf), when it has one.
Settings systemDefaults() {
  Settings out;
  char *file = CONF_get1_default_config_file();
  CONF *conf = NCONF_new(nullptr);
  long line = 0;
  if (file && conf && NCONF_load(conf, file, &line) > 0) {
    const char *init = NCONF_get_string(conf, nullptr, "openssl_conf");
    const char *ssl = init ? NCONF_get_string(conf, init, "ssl_conf") : nullptr;
    const char *sys =
        ssl ? NCONF_get_string(conf, ssl, "system_default") : nullptr;
    STACK_OF(CONF_VALUE) *values = sys ? NCONF_get_section(conf, sys) : nullptr;
    for (int i = 0; values && i < sk_CONF_VALUE_num(values); ++i) {
      const CONF_VALUE *v = sk_CONF_VALUE_value(values, i);
      out.emplace_back(v->name, v->value);
    }
  }
  NCONF_free(conf);
  OPENSSL_free(file);
  ERR_clear_error(); // a missing section or key is not an error here
  return out;
}

// A value as the configuration syntax reads it back.
std::string escaped(const std::string &value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '$' || c == '#' || c == '"' || c == '\'')
      out += '\\';
    out += c;
  }
  return out;
}

Status setOrder() {
  // The system's configuration first: OpenSSL loads it only once, and
  // loaded after ours it would replace it.
  if (OPENSSL_init_ssl(OPENSSL_INIT_LOAD_CONFIG, nullptr) != 1)
    return errorStatus("OpenSSL did not start");
  Settings system = systemDefaults();
  std::string text = "openssl_conf = dtf_init\n[dtf_init]\nssl_conf = "
                     "dtf_ssl\n[dtf_ssl]\nsystem_default = dtf_tls\n"
                     "[dtf_tls]\n";
  for (const auto &[name, value] : system) {
    // An operator who named the suites keeps them.
    if (name == "Ciphersuites")
      return Status::ok();
    text += name + " = " + escaped(value) + "\n";
  }
  text += std::string("Ciphersuites = ") + kTlsCipherSuites + "\n";
  BIO *bio = BIO_new_mem_buf(text.data(), int(text.size()));
  CONF *conf = NCONF_new(nullptr);
  long line = 0;
  const bool ok = bio && conf && NCONF_load_bio(conf, bio, &line) > 0 &&
                  CONF_modules_load(conf, nullptr, 0) > 0;
  NCONF_free(conf);
  BIO_free(bio);
  ERR_clear_error();
  if (!ok)
    return errorStatus("OpenSSL refused the TLS 1.3 suite order ",
                       kTlsCipherSuites);
  return Status::ok();
}

} // namespace

Status preferFastestTlsCiphers() {
  static std::once_flag once;
  static Status result = Status::ok();
  std::call_once(once, [] { result = setOrder(); });
  return result;
}

std::string offeredTlsCipherSuites() {
  SSL_CTX *ctx = SSL_CTX_new(TLS_method());
  if (!ctx)
    return "";
  std::string out;
  STACK_OF(SSL_CIPHER) *ciphers = SSL_CTX_get_ciphers(ctx);
  for (int i = 0; ciphers && i < sk_SSL_CIPHER_num(ciphers); ++i) {
    const SSL_CIPHER *c = sk_SSL_CIPHER_value(ciphers, i);
    if (std::string(SSL_CIPHER_get_version(c)) != "TLSv1.3")
      continue;
    out += (out.empty() ? "" : ":") + std::string(SSL_CIPHER_get_name(c));
  }
  SSL_CTX_free(ctx);
  return out;
}

} // namespace dtf::dist
