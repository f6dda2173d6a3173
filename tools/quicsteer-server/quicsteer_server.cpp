// quicsteer-server: an HTTP/3 file server on ngtcp2 + GnuTLS + nghttp3 whose
// every connection ID is a QUIC-LB CID of one server ID.
//
// It is what a QUIC-LB-aware server behind quicsteer does: the first SCID, the
// CIDs of NEW_CONNECTION_ID frames, a Retry's SCID (--retry) and the preferred
// address's CID (--preferred-address) are all minted with the project's own
// QUIC-LB encoder (steering/quic_lb.h), for a configuration taken from a
// quicsteer profile and the server ID given on the command line. quicsteer
// decodes the server ID from every packet's DCID and hands the packet to the
// owner lcore the profile names for it, whatever the client's address.
//
// Requests: GET /PATH serves a file under --htdocs; a request with a body (an
// upload, `gtlsclient --data FILE`) is answered with "<sha256> <size>\n" of
// what arrived. Every finished request, every CID issued and every path
// change goes to --log as one JSON object per line.
//
// A short-header packet whose DCID this server did not issue is answered with
// a stateless reset (RFC 9000 10.3) whose token is derived from --secret, so
// that a packet steered to the wrong server ends its connection at once
// instead of timing out; for that, every server behind one quicsteer is given
// the same --secret. Without one, each start draws its own (RFC 9000 10.3
// allows that for a lone server). The secret is this server's own: deriving
// it from the profile's fallback key, as before, made the reset tokens of a
// fleet on the default all-zero key computable by anyone.
//
// One thread, one UDP socket, ppoll on it and on the connections' timers.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "dataplane/config/profile.h"
#include "steering/hex.h"
#include "steering/quic_lb.h"

namespace {

constexpr char kUsage[] =
    "usage: quicsteer-server --profile PROFILE --server-id HEX [options]\n"
    "\n"
    "An HTTP/3 (ALPN h3) file server on ngtcp2 whose every connection ID (first SCID,\n"
    "NEW_CONNECTION_ID, Retry SCID, preferred address CID) is a QUIC-LB CID of the\n"
    "given server ID, in the QUIC-LB configuration that the quicsteer PROFILE lists\n"
    "for it. Run one per owner lcore, each with a server ID the profile routes to it.\n"
    "\n"
    "  --profile FILE          quicsteer profile: steering.quic_lb and steering.servers (or backends)\n"
    "  --server-id HEX         this server's ID (server_id_len octets of a QUIC-LB config)\n"
    "  --config-id N           the QUIC-LB config to mint with (default: the first one whose\n"
    "                          server_id_len fits the ID)\n"
    "  --listen ADDR:PORT      UDP address (default 0.0.0.0 and the profile's first QUIC port;\n"
    "                          IPv6 as [ADDR]:PORT)\n"
    "  --htdocs DIR            serve GET /PATH from DIR (default: the current directory)\n"
    "  --cert FILE --key FILE  PEM certificate and key (default: a self-signed ECDSA P-256\n"
    "                          certificate for 'localhost', made at start-up)\n"
    "  --retry                 answer every token-less Initial with a Retry (address validation)\n"
    "  --preferred-address ADDR:PORT\n"
    "                          offer this preferred address (IPv4 or [IPv6]) in the transport\n"
    "                          parameters, with a QUIC-LB CID\n"
    "  --secret HEX            stateless reset and Retry token secret, 16..64 octets (e.g.\n"
    "                          `openssl rand -hex 32`); servers behind one quicsteer share one so\n"
    "                          that a misrouted packet draws a reset (default: a random one per\n"
    "                          start). Shown at start-up as its fingerprint only\n"
    "  --timeout SECONDS       idle timeout (default 30)\n"
    "  --log FILE              one JSON object per line: every CID issued, every finished\n"
    "                          request (with sha256 and size) and every path validated\n"
    "  --duration SECONDS      stop by itself after this long (default: until SIGINT/SIGTERM)\n"
    "  -v, --verbose           ngtcp2's own debug log on stderr\n"
    "  -h, --help              this text\n"
    "\n"
    "Requests: GET /PATH answers with the file DIR/PATH (404 when absent; no '..');\n"
    "a request with a body (an upload: gtlsclient --data FILE) is answered with\n"
    "'<sha256-hex> <size>' of the body. At exit a summary line goes to stderr.\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

ngtcp2_tstamp now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ngtcp2_tstamp(ts.tv_sec) * NGTCP2_SECONDS + ngtcp2_tstamp(ts.tv_nsec);
}

std::uint64_t wall_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000ULL + std::uint64_t(ts.tv_nsec);
}

struct Address {
  sockaddr_storage ss{};
  socklen_t len = 0;
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&ss); }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&ss); }
};

std::string address_text(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "?";
}

// "ADDR:PORT" or "[ADDR6]:PORT".
std::optional<Address> parse_address(const std::string& text) {
  Address a;
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') return {};
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos) return {};
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535) return {};
  auto* in = reinterpret_cast<sockaddr_in*>(&a.ss);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.ss);
  if (inet_pton(AF_INET, host.c_str(), &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(std::uint16_t(p));
    a.len = sizeof(sockaddr_in);
    return a;
  }
  a.ss = {};
  if (inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(std::uint16_t(p));
    a.len = sizeof(sockaddr_in6);
    return a;
  }
  return {};
}

bool is_wildcard(const Address& a) {
  if (a.ss.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr.s_addr == htonl(INADDR_ANY);
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.ss);
  return IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr);
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (std::uint8_t(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(std::uint8_t(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string sha256_hex(const std::uint8_t* data, std::size_t len) {
  std::uint8_t digest[32];
  gnutls_hash_fast(GNUTLS_DIG_SHA256, data, len, digest);
  return qs::to_hex(digest, sizeof digest);
}

struct Options {
  std::string profile, server_id_hex, htdocs = ".", cert, key, log_path;
  std::optional<int> config_id;
  std::optional<Address> listen, preferred;
  std::vector<std::uint8_t> secret;
  bool retry = false, verbose = false;
  double timeout_s = 30, duration_s = 0;
};

// A file mapped once and shared by every response that sends it.
struct FileData {
  const std::uint8_t* data = nullptr;
  std::size_t len = 0;
  std::string sha256;
  ~FileData() {
    if (data && len) munmap(const_cast<std::uint8_t*>(data), len);
  }
};

struct Stream {
  std::int64_t id = 0;
  std::string method, path;
  std::uint64_t received = 0;
  gnutls_hash_hd_t body_hash = nullptr;
  std::shared_ptr<FileData> file;
  std::string body;  // a generated response (upload digest, errors)
  const std::uint8_t* out = nullptr;
  std::size_t out_len = 0;
  unsigned status = 0;
  bool responded = false;
  ~Stream() {
    if (body_hash) gnutls_hash_deinit(body_hash, nullptr);
  }
};

class Server;

class Conn {
 public:
  explicit Conn(Server& server) : srv_(server) {
    ref_.get_conn = [](ngtcp2_crypto_conn_ref* r) { return static_cast<Conn*>(r->user_data)->conn_; };
    ref_.user_data = this;
    ngtcp2_connection_close_error_default(&last_error_);
  }
  ~Conn() {
    streams_.clear();
    if (h3_) nghttp3_conn_del(h3_);
    if (conn_) ngtcp2_conn_del(conn_);
    if (tls_) gnutls_deinit(tls_);
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  bool init(const Address& local, const Address& remote, const ngtcp2_pkt_hd& hd, const ngtcp2_cid* ocid);
  // Feeds one datagram; false when the connection is to be removed now.
  bool read(const Address& local, const Address& remote, std::uint8_t* data, std::size_t len);
  // Writes what ngtcp2 will send now; false when the connection is to be removed.
  bool write();
  bool on_timer();
  void resend_close();

  ngtcp2_conn* conn() const { return conn_; }
  bool closing() const { return close_deadline_ != 0; }
  ngtcp2_tstamp deadline() const {
    return close_deadline_ ? close_deadline_ : ngtcp2_conn_get_expiry(conn_);
  }
  std::vector<std::string>& keys() { return keys_; }
  const std::string& name() const { return name_; }

  // ngtcp2 and nghttp3 callbacks land here.
  int recv_stream_data(std::uint32_t flags, std::int64_t id, const std::uint8_t* data, std::size_t len);
  int setup_h3();
  void stream_open(std::int64_t id);
  int stream_close(std::int64_t id, std::uint64_t code);
  void h3_stream_close(std::int64_t id);
  void h3_recv_header(Stream* s, std::int32_t token, nghttp3_rcbuf* value);
  void h3_recv_data(Stream* s, const std::uint8_t* data, std::size_t len);
  int start_response(Stream* s);
  void consume(std::int64_t id, std::size_t n) {
    ngtcp2_conn_extend_max_stream_offset(conn_, id, n);
    ngtcp2_conn_extend_max_offset(conn_, n);
  }
  void path_validated(const ngtcp2_path* path, ngtcp2_path_validation_result res);
  nghttp3_conn* h3() const { return h3_; }
  Stream* stream(std::int64_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second.get();
  }

 private:
  bool handle_error();
  bool send_close_packet();

  Server& srv_;
  ngtcp2_conn* conn_ = nullptr;
  gnutls_session_t tls_ = nullptr;
  nghttp3_conn* h3_ = nullptr;
  ngtcp2_crypto_conn_ref ref_{};
  ngtcp2_connection_close_error last_error_{};
  std::map<std::int64_t, std::unique_ptr<Stream>> streams_;
  std::vector<std::string> keys_;  // CIDs under which the server finds this connection
  std::vector<std::uint8_t> close_packet_;
  ngtcp2_tstamp close_deadline_ = 0;
  std::string name_;  // first SCID, hex
  std::array<std::uint8_t, 65536> txbuf_{};
};

struct Stats {
  std::uint64_t connections = 0, requests = 0, downloads = 0, uploads = 0, not_found = 0, migrations = 0,
                unknown_cid = 0, stateless_resets = 0, retries = 0, undecodable = 0, rx = 0, tx = 0,
                cids_issued = 0;
};

class Server {
 public:
  Server(Options opts, qs::QuicLbCodec codec, std::vector<std::uint8_t> server_id)
      : opts_(std::move(opts)), codec_(std::move(codec)), server_id_(std::move(server_id)) {}
  ~Server() {
    conns_.clear();
    if (cred_) gnutls_certificate_free_credentials(cred_);
    if (log_) std::fclose(log_);
    if (fd_ >= 0) close(fd_);
  }

  void setup();
  int run();

  // Mints a QUIC-LB CID of this server's ID into cid (the codec's length).
  void mint(ngtcp2_cid* cid, const char* kind);
  void stateless_reset_token(std::uint8_t* token, const ngtcp2_cid* cid) const {
    if (ngtcp2_crypto_generate_stateless_reset_token(token, opts_.secret.data(), opts_.secret.size(), cid) != 0)
      throw std::runtime_error("ngtcp2_crypto_generate_stateless_reset_token failed");
  }
  void associate(const std::uint8_t* cid, std::size_t len, Conn* c) {
    std::string key(reinterpret_cast<const char*>(cid), len);
    if (by_cid_.emplace(key, c).second) c->keys().push_back(key);
  }
  void dissociate(const std::uint8_t* cid, std::size_t len) {
    by_cid_.erase(std::string(reinterpret_cast<const char*>(cid), len));
  }
  void send(const ngtcp2_path& path, const std::uint8_t* data, std::size_t len);
  void log(const std::string& json_object_body);
  Stats& stats() { return stats_; }
  const Options& opts() const { return opts_; }
  gnutls_certificate_credentials_t cred() const { return cred_; }
  std::shared_ptr<FileData> file(const std::string& path);
  std::uint8_t cid_len() const { return codec_.cid_len(); }
  const std::string& server_id_hex() const { return server_id_hex_; }
  void rand_bytes(std::uint8_t* p, std::size_t n) { gnutls_rnd(GNUTLS_RND_NONCE, p, n); }

 private:
  void on_datagram(const Address& local, const Address& remote, std::uint8_t* data, std::size_t len,
                   std::vector<Conn*>& touched);
  void send_retry(const ngtcp2_pkt_hd& hd, const Address& local, const Address& remote, std::size_t len);
  void send_stateless_reset(const std::uint8_t* dcid, std::size_t dcidlen, const Address& local,
                            const Address& remote, std::size_t len);
  void send_version_negotiation(const ngtcp2_version_cid& vc, const Address& local, const Address& remote);
  void remove(Conn* c);
  void make_credentials();

  Options opts_;
  qs::QuicLbCodec codec_;
  std::vector<std::uint8_t> server_id_;
  std::string server_id_hex_;
  int fd_ = -1;
  Address bound_;
  bool wildcard_ = false;
  gnutls_certificate_credentials_t cred_ = nullptr;
  std::FILE* log_ = nullptr;
  std::unordered_map<std::string, Conn*> by_cid_;
  std::map<Conn*, std::unique_ptr<Conn>> conns_;
  std::map<std::string, std::weak_ptr<FileData>> files_;
  Stats stats_;
};

// ---------------------------------------------------------------- callbacks

Conn* self(void* user_data) { return static_cast<Conn*>(user_data); }

int cb_recv_stream_data(ngtcp2_conn*, std::uint32_t flags, std::int64_t id, std::uint64_t, const std::uint8_t* data,
                        std::size_t len, void* user_data, void*) {
  return self(user_data)->recv_stream_data(flags, id, data, len) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

int cb_acked_stream_data_offset(ngtcp2_conn*, std::int64_t id, std::uint64_t, std::uint64_t len, void* user_data,
                                void*) {
  nghttp3_conn* h3 = self(user_data)->h3();
  if (h3 && nghttp3_conn_add_ack_offset(h3, id, len) != 0) return NGTCP2_ERR_CALLBACK_FAILURE;
  return 0;
}

int cb_stream_open(ngtcp2_conn*, std::int64_t id, void* user_data) {
  self(user_data)->stream_open(id);
  return 0;
}

int cb_stream_close(ngtcp2_conn*, std::uint32_t flags, std::int64_t id, std::uint64_t code, void* user_data,
                    void*) {
  if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)) code = NGHTTP3_H3_NO_ERROR;
  return self(user_data)->stream_close(id, code) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

int cb_stream_reset(ngtcp2_conn*, std::int64_t id, std::uint64_t, std::uint64_t, void* user_data, void*) {
  nghttp3_conn* h3 = self(user_data)->h3();
  if (h3 && nghttp3_conn_shutdown_stream_read(h3, id) != 0) return NGTCP2_ERR_CALLBACK_FAILURE;
  return 0;
}

int cb_stream_stop_sending(ngtcp2_conn*, std::int64_t id, std::uint64_t, void* user_data, void*) {
  nghttp3_conn* h3 = self(user_data)->h3();
  if (h3 && nghttp3_conn_shutdown_stream_read(h3, id) != 0) return NGTCP2_ERR_CALLBACK_FAILURE;
  return 0;
}

std::mt19937_64& prng() {
  static std::mt19937_64 gen{std::random_device{}()};
  return gen;
}

void cb_rand(std::uint8_t* dest, std::size_t len, const ngtcp2_rand_ctx*) {
  for (std::size_t i = 0; i < len; ++i) dest[i] = std::uint8_t(prng()());
}

Server* g_server = nullptr;

int cb_get_new_connection_id(ngtcp2_conn*, ngtcp2_cid* cid, std::uint8_t* token, std::size_t cidlen,
                             void* user_data) {
  if (cidlen != g_server->cid_len()) return NGTCP2_ERR_CALLBACK_FAILURE;
  g_server->mint(cid, "new_connection_id");
  g_server->stateless_reset_token(token, cid);
  g_server->associate(cid->data, cid->datalen, self(user_data));
  return 0;
}

int cb_remove_connection_id(ngtcp2_conn*, const ngtcp2_cid* cid, void*) {
  g_server->dissociate(cid->data, cid->datalen);
  return 0;
}

int cb_path_validation(ngtcp2_conn*, std::uint32_t, const ngtcp2_path* path, ngtcp2_path_validation_result res,
                       void* user_data) {
  self(user_data)->path_validated(path, res);
  return 0;
}

int cb_extend_max_remote_streams_bidi(ngtcp2_conn*, std::uint64_t max_streams, void* user_data) {
  nghttp3_conn* h3 = self(user_data)->h3();
  if (h3) nghttp3_conn_set_max_client_streams_bidi(h3, max_streams);
  return 0;
}

int cb_extend_max_stream_data(ngtcp2_conn*, std::int64_t id, std::uint64_t, void* user_data, void*) {
  nghttp3_conn* h3 = self(user_data)->h3();
  if (h3 && nghttp3_conn_unblock_stream(h3, id) != 0) return NGTCP2_ERR_CALLBACK_FAILURE;
  return 0;
}

int cb_recv_tx_key(ngtcp2_conn*, ngtcp2_crypto_level level, void* user_data) {
  if (level != NGTCP2_CRYPTO_LEVEL_APPLICATION) return 0;
  return self(user_data)->setup_h3() == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

// nghttp3
int h3_acked_stream_data(nghttp3_conn*, std::int64_t, std::uint64_t, void*, void*) { return 0; }

int on_h3_stream_close(nghttp3_conn*, std::int64_t id, std::uint64_t, void* user_data, void*) {
  self(user_data)->h3_stream_close(id);
  return 0;
}

int on_h3_recv_data(nghttp3_conn*, std::int64_t id, const std::uint8_t* data, std::size_t len, void* user_data,
                 void* stream_user_data) {
  Conn* c = self(user_data);
  if (stream_user_data) c->h3_recv_data(static_cast<Stream*>(stream_user_data), data, len);
  c->consume(id, len);
  return 0;
}

int h3_deferred_consume(nghttp3_conn*, std::int64_t id, std::size_t n, void* user_data, void*) {
  self(user_data)->consume(id, n);
  return 0;
}

int h3_begin_headers(nghttp3_conn* h3, std::int64_t id, void* user_data, void*) {
  Stream* s = self(user_data)->stream(id);
  if (s) nghttp3_conn_set_stream_user_data(h3, id, s);
  return 0;
}

int on_h3_recv_header(nghttp3_conn*, std::int64_t, std::int32_t token, nghttp3_rcbuf*, nghttp3_rcbuf* value,
                   std::uint8_t, void* user_data, void* stream_user_data) {
  if (stream_user_data) self(user_data)->h3_recv_header(static_cast<Stream*>(stream_user_data), token, value);
  return 0;
}

int h3_stop_sending(nghttp3_conn*, std::int64_t id, std::uint64_t code, void* user_data, void*) {
  return ngtcp2_conn_shutdown_stream_read(self(user_data)->conn(), id, code) == 0 ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE;
}

int h3_end_stream(nghttp3_conn*, std::int64_t, void* user_data, void* stream_user_data) {
  if (!stream_user_data) return 0;
  return self(user_data)->start_response(static_cast<Stream*>(stream_user_data)) == 0 ? 0
                                                                                      : NGHTTP3_ERR_CALLBACK_FAILURE;
}

int h3_reset_stream(nghttp3_conn*, std::int64_t id, std::uint64_t code, void* user_data, void*) {
  return ngtcp2_conn_shutdown_stream_write(self(user_data)->conn(), id, code) == 0 ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE;
}

nghttp3_ssize h3_read_data(nghttp3_conn*, std::int64_t, nghttp3_vec* vec, std::size_t veccnt, std::uint32_t* pflags,
                           void*, void* stream_user_data) {
  auto* s = static_cast<Stream*>(stream_user_data);
  if (!s || veccnt == 0) return NGHTTP3_ERR_CALLBACK_FAILURE;
  *pflags |= NGHTTP3_DATA_FLAG_EOF;
  if (s->out_len == 0) return 0;
  vec[0].base = const_cast<std::uint8_t*>(s->out);
  vec[0].len = s->out_len;
  s->out_len = 0;  // handed over whole; nghttp3 keeps it until acknowledged
  return 1;
}

void log_printf(void*, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
}

// ---------------------------------------------------------------- Conn

bool Conn::init(const Address& local, const Address& remote, const ngtcp2_pkt_hd& hd, const ngtcp2_cid* ocid) {
  ngtcp2_callbacks cb{};
  cb.recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
  cb.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
  cb.encrypt = ngtcp2_crypto_encrypt_cb;
  cb.decrypt = ngtcp2_crypto_decrypt_cb;
  cb.hp_mask = ngtcp2_crypto_hp_mask_cb;
  cb.recv_stream_data = cb_recv_stream_data;
  cb.acked_stream_data_offset = cb_acked_stream_data_offset;
  cb.stream_open = cb_stream_open;
  cb.stream_close = cb_stream_close;
  cb.rand = cb_rand;
  cb.get_new_connection_id = cb_get_new_connection_id;
  cb.remove_connection_id = cb_remove_connection_id;
  cb.update_key = ngtcp2_crypto_update_key_cb;
  cb.path_validation = cb_path_validation;
  cb.stream_reset = cb_stream_reset;
  cb.extend_max_remote_streams_bidi = cb_extend_max_remote_streams_bidi;
  cb.extend_max_stream_data = cb_extend_max_stream_data;
  cb.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
  cb.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
  cb.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
  cb.stream_stop_sending = cb_stream_stop_sending;
  cb.version_negotiation = ngtcp2_crypto_version_negotiation_cb;
  cb.recv_tx_key = cb_recv_tx_key;

  ngtcp2_cid scid;
  srv_.mint(&scid, "scid");
  name_ = qs::to_hex(scid.data, scid.datalen);

  ngtcp2_settings settings;
  ngtcp2_settings_default(&settings);
  settings.initial_ts = now_ns();
  settings.log_printf = srv_.opts().verbose ? log_printf : nullptr;
  settings.max_window = 24 * 1024 * 1024;
  settings.max_stream_window = 16 * 1024 * 1024;
  settings.token = ngtcp2_vec{const_cast<std::uint8_t*>(hd.token.base), hd.token.len};

  ngtcp2_transport_params params;
  ngtcp2_transport_params_default(&params);
  params.initial_max_stream_data_bidi_local = 6 * 1024 * 1024;
  params.initial_max_stream_data_bidi_remote = 6 * 1024 * 1024;
  params.initial_max_stream_data_uni = 6 * 1024 * 1024;
  params.initial_max_data = 15 * 1024 * 1024;
  params.initial_max_streams_bidi = 100;
  params.initial_max_streams_uni = 3;
  params.max_idle_timeout = ngtcp2_duration(srv_.opts().timeout_s * double(NGTCP2_SECONDS));
  params.active_connection_id_limit = 7;
  params.stateless_reset_token_present = 1;
  srv_.stateless_reset_token(params.stateless_reset_token, &scid);
  if (ocid) {
    params.original_dcid = *ocid;
    params.retry_scid = hd.dcid;
    params.retry_scid_present = 1;
  } else {
    params.original_dcid = hd.dcid;
  }
  if (const auto& pa = srv_.opts().preferred) {
    params.preferred_address_present = 1;
    if (pa->ss.ss_family == AF_INET) {
      std::memcpy(&params.preferred_address.ipv4, &pa->ss, sizeof(sockaddr_in));
      params.preferred_address.ipv4_present = 1;
    } else {
      std::memcpy(&params.preferred_address.ipv6, &pa->ss, sizeof(sockaddr_in6));
      params.preferred_address.ipv6_present = 1;
    }
    srv_.mint(&params.preferred_address.cid, "preferred_address");
    srv_.stateless_reset_token(params.preferred_address.stateless_reset_token, &params.preferred_address.cid);
  }

  ngtcp2_path path{{const_cast<sockaddr*>(local.sa()), local.len}, {const_cast<sockaddr*>(remote.sa()), remote.len},
                   nullptr};
  if (int rv = ngtcp2_conn_server_new(&conn_, &hd.scid, &scid, &path, hd.version, &cb, &settings, &params, nullptr,
                                      this);
      rv != 0) {
    std::fprintf(stderr, "quicsteer-server: ngtcp2_conn_server_new: %s\n", ngtcp2_strerror(rv));
    return false;
  }

  if (gnutls_init(&tls_, GNUTLS_SERVER | GNUTLS_NO_AUTO_SEND_TICKET | GNUTLS_NO_END_OF_EARLY_DATA) != 0) return false;
  const char* priority =
      "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:"
      "+CHACHA20-POLY1305:+AES-128-CCM:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:+GROUP-SECP521R1";
  if (int rv = gnutls_priority_set_direct(tls_, priority, nullptr); rv != 0) {
    std::fprintf(stderr, "quicsteer-server: gnutls_priority_set_direct: %s\n", gnutls_strerror(rv));
    return false;
  }
  if (ngtcp2_crypto_gnutls_configure_server_session(tls_) != 0) return false;
  gnutls_session_set_ptr(tls_, &ref_);
  if (gnutls_credentials_set(tls_, GNUTLS_CRD_CERTIFICATE, srv_.cred()) != 0) return false;
  gnutls_datum_t alpn{reinterpret_cast<unsigned char*>(const_cast<char*>("h3")), 2};
  gnutls_alpn_set_protocols(tls_, &alpn, 1, GNUTLS_ALPN_MANDATORY | GNUTLS_ALPN_SERVER_PRECEDENCE);
  ngtcp2_conn_set_tls_native_handle(conn_, tls_);

  srv_.associate(scid.data, scid.datalen, this);
  srv_.associate(hd.dcid.data, hd.dcid.datalen, this);
  if (params.preferred_address_present)
    srv_.associate(params.preferred_address.cid.data, params.preferred_address.cid.datalen, this);
  ++srv_.stats().connections;
  srv_.log("\"event\":\"connection\",\"scid\":\"" + name_ + "\",\"client\":\"" + address_text(remote.sa()) + "\"");
  return true;
}

bool Conn::read(const Address& local, const Address& remote, std::uint8_t* data, std::size_t len) {
  ngtcp2_path path{{const_cast<sockaddr*>(local.sa()), local.len}, {const_cast<sockaddr*>(remote.sa()), remote.len},
                   nullptr};
  ngtcp2_pkt_info pi{};
  const int rv = ngtcp2_conn_read_pkt(conn_, &path, &pi, data, len, now_ns());
  if (rv == 0) return true;
  if (srv_.opts().verbose) std::fprintf(stderr, "quicsteer-server: %s: ngtcp2_conn_read_pkt: %s\n", name_.c_str(), ngtcp2_strerror(rv));
  switch (rv) {
    case NGTCP2_ERR_DRAINING:
      close_deadline_ = now_ns() + 3 * ngtcp2_conn_get_pto(conn_);
      return true;
    case NGTCP2_ERR_RETRY:
    case NGTCP2_ERR_DROP_CONN:
      return false;
    case NGTCP2_ERR_CRYPTO:
      if (!last_error_.error_code)
        ngtcp2_connection_close_error_set_transport_error_tls_alert(&last_error_, ngtcp2_conn_get_tls_alert(conn_),
                                                                    nullptr, 0);
      break;
    default:
      if (!last_error_.error_code)
        ngtcp2_connection_close_error_set_transport_error_liberr(&last_error_, rv, nullptr, 0);
  }
  return handle_error();
}

bool Conn::handle_error() {
  if (last_error_.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT_IDLE_CLOSE) return false;
  if (close_deadline_) return true;
  close_deadline_ = now_ns() + 3 * ngtcp2_conn_get_pto(conn_);
  if (ngtcp2_conn_is_in_draining_period(conn_)) return true;
  return send_close_packet();
}

bool Conn::send_close_packet() {
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi;
  close_packet_.resize(NGTCP2_MAX_UDP_PAYLOAD_SIZE);
  const ngtcp2_ssize n = ngtcp2_conn_write_connection_close(conn_, &ps.path, &pi, close_packet_.data(),
                                                            close_packet_.size(), &last_error_, now_ns());
  if (n <= 0) {
    close_packet_.clear();
    return n == 0;
  }
  close_packet_.resize(std::size_t(n));
  srv_.send(ps.path, close_packet_.data(), close_packet_.size());
  return true;
}

void Conn::resend_close() {
  if (close_packet_.empty() || ngtcp2_conn_is_in_draining_period(conn_)) return;
  srv_.send(*ngtcp2_conn_get_path(conn_), close_packet_.data(), close_packet_.size());
}

bool Conn::on_timer() {
  const ngtcp2_tstamp now = now_ns();
  if (close_deadline_) return now < close_deadline_;
  if (ngtcp2_conn_get_expiry(conn_) > now) return true;
  if (int rv = ngtcp2_conn_handle_expiry(conn_, now); rv != 0) {
    if (rv == NGTCP2_ERR_IDLE_CLOSE) return false;
    ngtcp2_connection_close_error_set_transport_error_liberr(&last_error_, rv, nullptr, 0);
    return handle_error();
  }
  return write();
}

bool Conn::write() {
  if (close_deadline_) return true;
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi;
  const std::size_t max_payload = ngtcp2_conn_get_max_tx_udp_payload_size(conn_);
  const std::size_t max_packets = std::max<std::size_t>(1, ngtcp2_conn_get_send_quantum(conn_) / max_payload);
  const ngtcp2_tstamp ts = now_ns();
  std::size_t packets = 0;
  for (;;) {
    std::int64_t stream_id = -1;
    int fin = 0;
    std::array<nghttp3_vec, 16> vec;
    nghttp3_ssize vcnt = 0;
    if (h3_ && ngtcp2_conn_get_max_data_left(conn_)) {
      vcnt = nghttp3_conn_writev_stream(h3_, &stream_id, &fin, vec.data(), vec.size());
      if (vcnt < 0) {
        ngtcp2_connection_close_error_set_application_error(
            &last_error_, nghttp3_err_infer_quic_app_error_code(int(vcnt)), nullptr, 0);
        return handle_error();
      }
    }
    std::uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
    if (fin) flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
    ngtcp2_ssize ndatalen = -1;
    const ngtcp2_ssize n = ngtcp2_conn_writev_stream(conn_, &ps.path, &pi, txbuf_.data(), max_payload, &ndatalen,
                                                     flags, stream_id, reinterpret_cast<const ngtcp2_vec*>(vec.data()),
                                                     std::size_t(vcnt), ts);
    if (n < 0) {
      switch (n) {
        case NGTCP2_ERR_STREAM_DATA_BLOCKED:
          nghttp3_conn_block_stream(h3_, stream_id);
          continue;
        case NGTCP2_ERR_STREAM_SHUT_WR:
          nghttp3_conn_shutdown_stream_write(h3_, stream_id);
          continue;
        case NGTCP2_ERR_WRITE_MORE:
          if (nghttp3_conn_add_write_offset(h3_, stream_id, std::size_t(ndatalen)) != 0) return false;
          continue;
        default:
          ngtcp2_connection_close_error_set_transport_error_liberr(&last_error_, int(n), nullptr, 0);
          return handle_error();
      }
    }
    if (ndatalen >= 0 && nghttp3_conn_add_write_offset(h3_, stream_id, std::size_t(ndatalen)) != 0) return false;
    if (n == 0) break;  // congestion- or pacing-limited, or nothing to send
    srv_.send(ps.path, txbuf_.data(), std::size_t(n));
    if (++packets >= max_packets) break;
  }
  ngtcp2_conn_update_pkt_tx_time(conn_, ts);
  return true;
}

int Conn::setup_h3() {
  if (h3_) return 0;
  if (ngtcp2_conn_get_max_local_streams_uni(conn_) < 3) return -1;
  nghttp3_callbacks cb{};
  cb.acked_stream_data = h3_acked_stream_data;
  cb.stream_close = on_h3_stream_close;
  cb.recv_data = on_h3_recv_data;
  cb.deferred_consume = h3_deferred_consume;
  cb.begin_headers = h3_begin_headers;
  cb.recv_header = on_h3_recv_header;
  cb.stop_sending = h3_stop_sending;
  cb.end_stream = h3_end_stream;
  cb.reset_stream = h3_reset_stream;
  nghttp3_settings settings;
  nghttp3_settings_default(&settings);
  settings.qpack_max_dtable_capacity = 4096;
  settings.qpack_blocked_streams = 100;
  if (nghttp3_conn_server_new(&h3_, &cb, &settings, nghttp3_mem_default(), this) != 0) return -1;
  nghttp3_conn_set_max_client_streams_bidi(h3_, ngtcp2_conn_get_local_transport_params(conn_)->initial_max_streams_bidi);
  std::int64_t ctrl, enc, dec;
  if (ngtcp2_conn_open_uni_stream(conn_, &ctrl, nullptr) != 0 || nghttp3_conn_bind_control_stream(h3_, ctrl) != 0 ||
      ngtcp2_conn_open_uni_stream(conn_, &enc, nullptr) != 0 || ngtcp2_conn_open_uni_stream(conn_, &dec, nullptr) != 0 ||
      nghttp3_conn_bind_qpack_streams(h3_, enc, dec) != 0)
    return -1;
  return 0;
}

int Conn::recv_stream_data(std::uint32_t flags, std::int64_t id, const std::uint8_t* data, std::size_t len) {
  if (!h3_) return 0;
  const nghttp3_ssize n = nghttp3_conn_read_stream(h3_, id, data, len, flags & NGTCP2_STREAM_DATA_FLAG_FIN);
  if (n < 0) {
    ngtcp2_connection_close_error_set_application_error(&last_error_, nghttp3_err_infer_quic_app_error_code(int(n)),
                                                        nullptr, 0);
    return -1;
  }
  consume(id, std::size_t(n));
  return 0;
}

void Conn::stream_open(std::int64_t id) {
  if (!ngtcp2_is_bidi_stream(id)) return;
  auto s = std::make_unique<Stream>();
  s->id = id;
  streams_.emplace(id, std::move(s));
}

int Conn::stream_close(std::int64_t id, std::uint64_t code) {
  if (!h3_) return 0;
  const int rv = nghttp3_conn_close_stream(h3_, id, code);
  if (rv == NGHTTP3_ERR_STREAM_NOT_FOUND) {
    if (ngtcp2_is_bidi_stream(id)) {
      streams_.erase(id);
      ngtcp2_conn_extend_max_streams_bidi(conn_, 1);
    }
    return 0;
  }
  return rv == 0 ? 0 : -1;
}

void Conn::h3_stream_close(std::int64_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  Stream& s = *it->second;
  if (!s.responded) {
    srv_.log("\"event\":\"request\",\"scid\":\"" + name_ + "\",\"stream\":" + std::to_string(id) +
             ",\"method\":\"" + json_escape(s.method) + "\",\"path\":\"" + json_escape(s.path) +
             "\",\"status\":0,\"received\":" + std::to_string(s.received) + ",\"complete\":false");
  }
  streams_.erase(it);
  if (ngtcp2_is_bidi_stream(id)) ngtcp2_conn_extend_max_streams_bidi(conn_, 1);
}

void Conn::h3_recv_header(Stream* s, std::int32_t token, nghttp3_rcbuf* value) {
  const nghttp3_vec v = nghttp3_rcbuf_get_buf(value);
  if (token == NGHTTP3_QPACK_TOKEN__PATH) s->path.assign(reinterpret_cast<const char*>(v.base), v.len);
  if (token == NGHTTP3_QPACK_TOKEN__METHOD) s->method.assign(reinterpret_cast<const char*>(v.base), v.len);
}

void Conn::h3_recv_data(Stream* s, const std::uint8_t* data, std::size_t len) {
  if (!s->body_hash && gnutls_hash_init(&s->body_hash, GNUTLS_DIG_SHA256) != 0) s->body_hash = nullptr;
  if (s->body_hash) gnutls_hash(s->body_hash, data, len);
  s->received += len;
}

int Conn::start_response(Stream* s) {
  if (s->responded) return 0;
  s->responded = true;
  ++srv_.stats().requests;
  std::string sha;
  std::string kind;
  if (s->received > 0 || s->method == "POST" || s->method == "PUT") {
    std::uint8_t digest[32];
    if (!s->body_hash) gnutls_hash_init(&s->body_hash, GNUTLS_DIG_SHA256);
    gnutls_hash_output(s->body_hash, digest);
    sha = qs::to_hex(digest, 32);
    s->body = sha + " " + std::to_string(s->received) + "\n";
    s->status = 200;
    kind = "upload";
    ++srv_.stats().uploads;
  } else {
    std::shared_ptr<FileData> f;
    if (!s->path.empty() && s->path[0] == '/' && s->path.find("..") == std::string::npos) {
      std::string rel = s->path.substr(1, s->path.find('?') == std::string::npos ? std::string::npos
                                                                                  : s->path.find('?') - 1);
      if (!rel.empty()) f = srv_.file(srv_.opts().htdocs + "/" + rel);
    }
    if (f) {
      s->file = f;
      s->status = 200;
      sha = f->sha256;
      kind = "download";
      ++srv_.stats().downloads;
    } else {
      s->body = "not found\n";
      s->status = 404;
      kind = "not_found";
      ++srv_.stats().not_found;
    }
  }
  if (s->file) {
    s->out = s->file->data;
    s->out_len = s->file->len;
  } else {
    s->out = reinterpret_cast<const std::uint8_t*>(s->body.data());
    s->out_len = s->body.size();
  }
  const std::string status = std::to_string(s->status), length = std::to_string(s->out_len);
  const auto nv = [](const char* name, const std::string& value) {
    return nghttp3_nv{reinterpret_cast<std::uint8_t*>(const_cast<char*>(name)),
                      reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), std::strlen(name),
                      value.size(), NGHTTP3_NV_FLAG_NONE};
  };
  const std::string server = "quicsteer-server", type = "application/octet-stream";
  std::array<nghttp3_nv, 4> headers{nv(":status", status), nv("server", server), nv("content-type", type),
                                    nv("content-length", length)};
  nghttp3_data_reader dr{h3_read_data};
  if (nghttp3_conn_submit_response(h3_, s->id, headers.data(), headers.size(), &dr) != 0) return -1;
  srv_.log("\"event\":\"request\",\"scid\":\"" + name_ + "\",\"stream\":" + std::to_string(s->id) +
           ",\"kind\":\"" + kind + "\",\"method\":\"" + json_escape(s->method) + "\",\"path\":\"" +
           json_escape(s->path) + "\",\"status\":" + status + ",\"received\":" + std::to_string(s->received) +
           ",\"sent\":" + length + ",\"sha256\":\"" + sha + "\",\"complete\":true");
  return 0;
}

void Conn::path_validated(const ngtcp2_path* path, ngtcp2_path_validation_result res) {
  const bool ok = res == NGTCP2_PATH_VALIDATION_RESULT_SUCCESS;
  if (ok) ++srv_.stats().migrations;
  srv_.log("\"event\":\"path_validation\",\"scid\":\"" + name_ + "\",\"client\":\"" +
           address_text(path->remote.addr) + "\",\"result\":\"" + (ok ? "success" : "failure") + "\"");
}

// ---------------------------------------------------------------- Server

void Server::mint(ngtcp2_cid* cid, const char* kind) {
  std::uint8_t nonce[qs::kMaxCidLen];
  std::uint8_t entropy;
  rand_bytes(nonce, codec_.nonce_len());
  rand_bytes(&entropy, 1);
  codec_.encode(server_id_.data(), nonce, cid->data, entropy);
  cid->datalen = codec_.cid_len();
  // What quicsteer will do with it: the CID must decode to this server's ID.
  std::uint8_t back[qs::kMaxServerIdLen];
  if (!codec_.decode(cid->data, cid->datalen, back) || std::memcmp(back, server_id_.data(), server_id_.size()) != 0)
    throw std::logic_error("minted a CID that does not decode to this server's ID");
  ++stats_.cids_issued;
  log(std::string("\"event\":\"cid\",\"kind\":\"") + kind + "\",\"cid\":\"" + qs::to_hex(cid->data, cid->datalen) +
      "\"");
}

void Server::log(const std::string& body) {
  if (!log_) return;
  std::fprintf(log_, "{\"t_ns\":%" PRIu64 ",\"server_id\":\"%s\",%s}\n", wall_ns(), server_id_hex_.c_str(),
               body.c_str());
  std::fflush(log_);
}

std::shared_ptr<FileData> Server::file(const std::string& path) {
  if (auto it = files_.find(path); it != files_.end())
    if (auto f = it->second.lock()) return f;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return nullptr;
  }
  auto f = std::make_shared<FileData>();
  f->len = std::size_t(st.st_size);
  if (f->len > 0) {
    void* p = mmap(nullptr, f->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      close(fd);
      f->len = 0;
      return nullptr;
    }
    f->data = static_cast<const std::uint8_t*>(p);
  }
  close(fd);
  f->sha256 = sha256_hex(f->data, f->len);
  files_[path] = f;
  return f;
}

void Server::make_credentials() {
  if (gnutls_certificate_allocate_credentials(&cred_) != 0) throw std::runtime_error("gnutls: no credentials");
  if (!opts_.cert.empty()) {
    if (int rv = gnutls_certificate_set_x509_key_file(cred_, opts_.cert.c_str(), opts_.key.c_str(), GNUTLS_X509_FMT_PEM);
        rv != 0)
      throw std::runtime_error("--cert/--key: " + std::string(gnutls_strerror(rv)));
    return;
  }
  gnutls_x509_privkey_t key;
  gnutls_x509_crt_t crt;
  gnutls_x509_privkey_init(&key);
  gnutls_x509_crt_init(&crt);
  const time_t now = time(nullptr);
  std::uint8_t serial[8];
  rand_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;
  const char* cn = "localhost";
  int rv = gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
  if (rv == 0) rv = gnutls_x509_crt_set_version(crt, 3);
  if (rv == 0) rv = gnutls_x509_crt_set_serial(crt, serial, sizeof serial);
  if (rv == 0) rv = gnutls_x509_crt_set_activation_time(crt, now - 3600);
  if (rv == 0) rv = gnutls_x509_crt_set_expiration_time(crt, now + 30 * 86400);
  if (rv == 0) rv = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, unsigned(std::strlen(cn)));
  if (rv == 0) rv = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, cn, unsigned(std::strlen(cn)),
                                                         GNUTLS_FSAN_SET);
  if (rv == 0) rv = gnutls_x509_crt_set_key(crt, key);
  if (rv == 0) rv = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0);
  if (rv == 0) rv = gnutls_certificate_set_x509_key(cred_, &crt, 1, key);
  gnutls_x509_crt_deinit(crt);
  gnutls_x509_privkey_deinit(key);
  if (rv != 0) throw std::runtime_error("self-signed certificate: " + std::string(gnutls_strerror(rv)));
}

void Server::setup() {
  server_id_hex_ = qs::to_hex(server_id_);
  make_credentials();
  if (!opts_.log_path.empty()) {
    log_ = std::fopen(opts_.log_path.c_str(), "a");
    if (!log_) throw std::runtime_error("--log " + opts_.log_path + ": " + std::strerror(errno));
  }
  bound_ = *opts_.listen;
  wildcard_ = is_wildcard(bound_);
  fd_ = socket(bound_.ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  const int on = 1;
  if (bound_.ss.ss_family == AF_INET6) setsockopt(fd_, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
  if (bound_.ss.ss_family == AF_INET) setsockopt(fd_, IPPROTO_IP, IP_PKTINFO, &on, sizeof on);
  else setsockopt(fd_, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof on);
  const int buf = 8 * 1024 * 1024;
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  if (bind(fd_, bound_.sa(), bound_.len) != 0)
    throw std::runtime_error("bind " + address_text(bound_.sa()) + ": " + std::strerror(errno));
}

void Server::send(const ngtcp2_path& path, const std::uint8_t* data, std::size_t len) {
  iovec iov{const_cast<std::uint8_t*>(data), len};
  msghdr msg{};
  msg.msg_name = path.remote.addr;
  msg.msg_namelen = path.remote.addrlen;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) std::uint8_t control[CMSG_SPACE(sizeof(in6_pktinfo))] = {};
  if (wildcard_ && path.local.addr && path.local.addrlen) {
    // The reply leaves from the address the client sent to.
    msg.msg_control = control;
    cmsghdr* cm;
    if (path.local.addr->sa_family == AF_INET) {
      msg.msg_controllen = CMSG_SPACE(sizeof(in_pktinfo));
      cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = IPPROTO_IP;
      cm->cmsg_type = IP_PKTINFO;
      cm->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
      in_pktinfo pi{};
      pi.ipi_spec_dst = reinterpret_cast<const sockaddr_in*>(path.local.addr)->sin_addr;
      std::memcpy(CMSG_DATA(cm), &pi, sizeof pi);
    } else {
      msg.msg_controllen = CMSG_SPACE(sizeof(in6_pktinfo));
      cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = IPPROTO_IPV6;
      cm->cmsg_type = IPV6_PKTINFO;
      cm->cmsg_len = CMSG_LEN(sizeof(in6_pktinfo));
      in6_pktinfo pi{};
      pi.ipi6_addr = reinterpret_cast<const sockaddr_in6*>(path.local.addr)->sin6_addr;
      std::memcpy(CMSG_DATA(cm), &pi, sizeof pi);
    }
  }
  for (;;) {
    if (sendmsg(fd_, &msg, 0) >= 0) {
      ++stats_.tx;
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      // The socket buffer is full: wait for room rather than lose the packet.
      pollfd p{fd_, POLLOUT, 0};
      poll(&p, 1, 100);
      continue;
    }
    return;  // unreachable peer and the like: QUIC's loss recovery copes
  }
}

void Server::send_retry(const ngtcp2_pkt_hd& hd, const Address& local, const Address& remote, std::size_t len) {
  ngtcp2_cid scid;
  mint(&scid, "retry");
  std::array<std::uint8_t, NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN> token;
  const ngtcp2_ssize tokenlen = ngtcp2_crypto_generate_retry_token(
      token.data(), opts_.secret.data(), opts_.secret.size(), hd.version, remote.sa(), remote.len, &scid, &hd.dcid,
      wall_ns());
  if (tokenlen < 0) return;
  std::array<std::uint8_t, NGTCP2_MAX_UDP_PAYLOAD_SIZE> buf;
  const ngtcp2_ssize n = ngtcp2_crypto_write_retry(buf.data(), std::min(buf.size(), 3 * len), hd.version, &hd.scid,
                                                   &scid, &hd.dcid, token.data(), std::size_t(tokenlen));
  if (n < 0) return;
  ngtcp2_path path{{const_cast<sockaddr*>(local.sa()), local.len}, {const_cast<sockaddr*>(remote.sa()), remote.len},
                   nullptr};
  ++stats_.retries;
  send(path, buf.data(), std::size_t(n));
}

void Server::send_stateless_reset(const std::uint8_t* dcid, std::size_t dcidlen, const Address& local,
                                  const Address& remote, std::size_t len) {
  // Smaller than what triggered it (so two endpoints cannot loop), at least 22 octets.
  constexpr std::size_t kMinRand = NGTCP2_MIN_STATELESS_RESET_RANDLEN;
  if (len < 1 + kMinRand + NGTCP2_STATELESS_RESET_TOKENLEN + 1 + 5) return;
  const std::size_t randlen = std::min<std::size_t>(len - 1 - NGTCP2_STATELESS_RESET_TOKENLEN - 1, 42);
  ngtcp2_cid cid;
  ngtcp2_cid_init(&cid, dcid, dcidlen);
  std::uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN];
  stateless_reset_token(token, &cid);
  std::uint8_t rnd[64];
  rand_bytes(rnd, randlen);
  std::uint8_t buf[128];
  const ngtcp2_ssize n = ngtcp2_pkt_write_stateless_reset(buf, sizeof buf, token, rnd, randlen);
  if (n < 0) return;
  ngtcp2_path path{{const_cast<sockaddr*>(local.sa()), local.len}, {const_cast<sockaddr*>(remote.sa()), remote.len},
                   nullptr};
  ++stats_.stateless_resets;
  send(path, buf, std::size_t(n));
}

void Server::send_version_negotiation(const ngtcp2_version_cid& vc, const Address& local, const Address& remote) {
  std::uint8_t buf[256];
  const std::uint32_t versions[] = {NGTCP2_PROTO_VER_V1};
  std::uint8_t unused;
  rand_bytes(&unused, 1);
  const ngtcp2_ssize n = ngtcp2_pkt_write_version_negotiation(buf, sizeof buf, unused, vc.scid, vc.scidlen, vc.dcid,
                                                               vc.dcidlen, versions, 1);
  if (n < 0) return;
  ngtcp2_path path{{const_cast<sockaddr*>(local.sa()), local.len}, {const_cast<sockaddr*>(remote.sa()), remote.len},
                   nullptr};
  send(path, buf, std::size_t(n));
}

void Server::remove(Conn* c) {
  for (const std::string& k : c->keys()) {
    auto it = by_cid_.find(k);
    if (it != by_cid_.end() && it->second == c) by_cid_.erase(it);
  }
  // CIDs issued later than the keys list knows of (NEW_CONNECTION_ID): sweep.
  for (auto it = by_cid_.begin(); it != by_cid_.end();) it = it->second == c ? by_cid_.erase(it) : std::next(it);
  conns_.erase(c);
}

void Server::on_datagram(const Address& local, const Address& remote, std::uint8_t* data, std::size_t len,
                         std::vector<Conn*>& touched) {
  ++stats_.rx;
  ngtcp2_version_cid vc;
  switch (ngtcp2_pkt_decode_version_cid(&vc, data, len, codec_.cid_len())) {
    case 0:
      break;
    case NGTCP2_ERR_VERSION_NEGOTIATION:
      send_version_negotiation(vc, local, remote);
      return;
    default:
      ++stats_.undecodable;
      return;
  }
  auto it = by_cid_.find(std::string(reinterpret_cast<const char*>(vc.dcid), vc.dcidlen));
  if (it != by_cid_.end()) {
    Conn* c = it->second;
    if (c->closing()) {
      c->resend_close();
      return;
    }
    if (!c->read(local, remote, data, len)) {
      remove(c);
      return;
    }
    if (std::find(touched.begin(), touched.end(), c) == touched.end()) touched.push_back(c);
    return;
  }
  if (!(data[0] & 0x80)) {
    // A short header for a connection this server does not have: steered to
    // the wrong server, or after the connection ended here.
    ++stats_.unknown_cid;
    send_stateless_reset(vc.dcid, vc.dcidlen, local, remote, len);
    return;
  }
  ngtcp2_pkt_hd hd;
  if (ngtcp2_accept(&hd, data, len) != 0) {
    ++stats_.unknown_cid;  // a long header that opens nothing (a lost connection's Handshake, ...)
    return;
  }
  ngtcp2_cid ocid;
  const ngtcp2_cid* pocid = nullptr;
  if (opts_.retry) {
    if (hd.token.len == 0 || hd.token.base[0] != NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) {
      send_retry(hd, local, remote, len);
      return;
    }
    if (ngtcp2_crypto_verify_retry_token(&ocid, hd.token.base, hd.token.len, opts_.secret.data(),
                                         opts_.secret.size(), hd.version, remote.sa(), remote.len, &hd.dcid,
                                         10 * NGTCP2_SECONDS, wall_ns()) != 0) {
      ++stats_.undecodable;
      return;
    }
    pocid = &ocid;
  } else {
    hd.token.base = nullptr;
    hd.token.len = 0;
  }
  auto owned = std::make_unique<Conn>(*this);
  Conn* c = owned.get();
  conns_.emplace(c, std::move(owned));
  if (!c->init(local, remote, hd, pocid) || !c->read(local, remote, data, len)) {
    remove(c);
    return;
  }
  touched.push_back(c);
}

int Server::run() {
  std::fprintf(stderr, "quicsteer-server: server id %s, QUIC-LB config %u (%u-octet CIDs), listening on %s\n",
               server_id_hex_.c_str(), unsigned(codec_.config_id()), unsigned(codec_.cid_len()),
               address_text(bound_.sa()).c_str());
  const ngtcp2_tstamp start = now_ns();
  std::vector<std::uint8_t> buf(65536);
  std::vector<Conn*> touched;
  while (!g_stop) {
    const ngtcp2_tstamp now = now_ns();
    if (opts_.duration_s > 0 && double(now - start) >= opts_.duration_s * double(NGTCP2_SECONDS)) break;
    ngtcp2_tstamp next = now + 100 * NGTCP2_MILLISECONDS;  // see g_stop at least this often
    for (auto& [c, owned] : conns_) next = std::min(next, c->deadline());
    const ngtcp2_tstamp wait = next > now ? next - now : 0;
    timespec ts{time_t(wait / NGTCP2_SECONDS), long(wait % NGTCP2_SECONDS)};
    pollfd p{fd_, POLLIN, 0};
    ppoll(&p, 1, &ts, nullptr);
    touched.clear();
    for (int i = 0; i < 256; ++i) {
      Address remote, local;
      iovec iov{buf.data(), buf.size()};
      alignas(cmsghdr) std::uint8_t control[256];
      msghdr msg{};
      msg.msg_name = &remote.ss;
      msg.msg_namelen = sizeof remote.ss;
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      const ssize_t n = recvmsg(fd_, &msg, 0);
      if (n < 0) break;
      remote.len = msg.msg_namelen;
      local = bound_;
      for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
          in_pktinfo pi;
          std::memcpy(&pi, CMSG_DATA(cm), sizeof pi);
          reinterpret_cast<sockaddr_in*>(&local.ss)->sin_addr = pi.ipi_addr;
        } else if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO) {
          in6_pktinfo pi;
          std::memcpy(&pi, CMSG_DATA(cm), sizeof pi);
          reinterpret_cast<sockaddr_in6*>(&local.ss)->sin6_addr = pi.ipi6_addr;
        }
      }
      if (n == 0) continue;
      on_datagram(local, remote, buf.data(), std::size_t(n), touched);
    }
    for (Conn* c : touched)
      if (conns_.count(c) && !c->write()) remove(c);
    std::vector<Conn*> done;
    for (auto& [c, owned] : conns_)
      if (!c->on_timer()) done.push_back(c);
    for (Conn* c : done) remove(c);
  }
  const Stats& s = stats_;
  std::fprintf(stderr,
               "quicsteer-server: server id %s: %" PRIu64 " connections, %" PRIu64 " requests (%" PRIu64
               " downloads, %" PRIu64 " uploads, %" PRIu64 " not found), %" PRIu64 " paths validated, %" PRIu64
               " CIDs issued, %" PRIu64 " packets for unknown CIDs (%" PRIu64 " stateless resets), %" PRIu64
               " retries, %" PRIu64 " undecodable; %" PRIu64 " datagrams in, %" PRIu64 " out\n",
               server_id_hex_.c_str(), s.connections, s.requests, s.downloads, s.uploads, s.not_found, s.migrations,
               s.cids_issued, s.unknown_cid, s.stateless_resets, s.retries, s.undecodable, s.rx, s.tx);
  log("\"event\":\"summary\",\"connections\":" + std::to_string(s.connections) + ",\"requests\":" +
      std::to_string(s.requests) + ",\"downloads\":" + std::to_string(s.downloads) + ",\"uploads\":" +
      std::to_string(s.uploads) + ",\"paths_validated\":" + std::to_string(s.migrations) + ",\"cids_issued\":" +
      std::to_string(s.cids_issued) + ",\"unknown_cid\":" + std::to_string(s.unknown_cid) +
      ",\"stateless_resets\":" + std::to_string(s.stateless_resets) + ",\"rx\":" + std::to_string(s.rx) +
      ",\"tx\":" + std::to_string(s.tx));
  return 0;
}

// ---------------------------------------------------------------- main

double parse_seconds(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(d >= 0) || d > 1e6) throw UsageError(opt + ": not a number of seconds: '" + v + "'");
  return d;
}

Options parse_args(int argc, char** argv) {
  Options o;
  std::string listen, preferred, secret;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--profile") o.profile = value();
    else if (a == "--server-id") o.server_id_hex = value();
    else if (a == "--config-id") {
      const std::string v = value();
      if (v.size() != 1 || v[0] < '0' || v[0] > '6') throw UsageError("--config-id: 0..6, got '" + v + "'");
      o.config_id = v[0] - '0';
    } else if (a == "--listen") listen = value();
    else if (a == "--htdocs") o.htdocs = value();
    else if (a == "--cert") o.cert = value();
    else if (a == "--key") o.key = value();
    else if (a == "--retry") o.retry = true;
    else if (a == "--preferred-address") preferred = value();
    else if (a == "--secret") secret = value();
    else if (a == "--timeout") o.timeout_s = parse_seconds(a, value());
    else if (a == "--duration") o.duration_s = parse_seconds(a, value());
    else if (a == "--log") o.log_path = value();
    else if (a == "-v" || a == "--verbose") o.verbose = true;
    else throw UsageError("unknown option '" + a + "'");
  }
  if (o.profile.empty()) throw UsageError("--profile is required");
  if (o.server_id_hex.empty()) throw UsageError("--server-id is required");
  if (o.cert.empty() != o.key.empty()) throw UsageError("--cert and --key go together");
  if (o.timeout_s <= 0) throw UsageError("--timeout must be positive");
  if (!listen.empty()) {
    o.listen = parse_address(listen);
    if (!o.listen) throw UsageError("--listen: not ADDR:PORT or [ADDR6]:PORT: '" + listen + "'");
  }
  if (!preferred.empty()) {
    o.preferred = parse_address(preferred);
    if (!o.preferred) throw UsageError("--preferred-address: not ADDR:PORT or [ADDR6]:PORT: '" + preferred + "'");
  }
  if (!secret.empty() && (!qs::from_hex(secret, o.secret) || o.secret.size() < 16 || o.secret.size() > 64))
    throw UsageError("--secret: 32..128 hex digits");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  try {
    opts = parse_args(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "quicsteer-server: %s\n\n%s", e.what(), kUsage);
    return 2;
  }
  const std::optional<qs::Profile> profile = qs::load_profile_or_report(opts.profile);
  if (!profile) return 2;
  std::vector<std::uint8_t> server_id;
  if (!qs::from_hex(opts.server_id_hex, server_id) || server_id.empty()) {
    std::fprintf(stderr, "quicsteer-server: --server-id: not hex octets: '%s'\n", opts.server_id_hex.c_str());
    return 2;
  }
  const qs::SteeringConfig& steering = profile->steering;
  const qs::QuicLbConfig* config = nullptr;
  for (const qs::QuicLbConfig& c : steering.quic_lb) {
    if (opts.config_id ? c.config_id == *opts.config_id : c.server_id_len == server_id.size()) {
      config = &c;
      break;
    }
  }
  if (!config) {
    std::fprintf(stderr, "quicsteer-server: %s: no steering.quic_lb config %s\n", opts.profile.c_str(),
                 opts.config_id ? ("with config_id " + std::to_string(*opts.config_id)).c_str()
                                : ("with server_id_len " + std::to_string(server_id.size())).c_str());
    return 2;
  }
  if (config->server_id_len != server_id.size()) {
    std::fprintf(stderr, "quicsteer-server: --server-id has %zu octets, QUIC-LB config %u has server_id_len %u\n",
                 server_id.size(), unsigned(config->config_id), unsigned(config->server_id_len));
    return 2;
  }
  // Who quicsteer sends this server's CIDs to: an owner lcore, or a backend
  // (and the owner lcore that serves it).
  std::string routed_to;
  for (const qs::ServerRoute& r : steering.server_routes)
    if (r.server_id == server_id) routed_to = "owner lcore " + std::to_string(r.owner_lcore);
  for (const qs::BackendConfig& b : steering.backends)
    if (std::find(b.server_ids.begin(), b.server_ids.end(), server_id) != b.server_ids.end())
      routed_to = "backend " + b.name + " (owner lcore " + std::to_string(b.owner_lcore) + ")";
  if (routed_to.empty()) {
    std::fprintf(stderr, "quicsteer-server: %s: server id %s is in neither steering.servers nor a backend's "
                 "server_ids, so quicsteer would not route its CIDs\n", opts.profile.c_str(),
                 qs::to_hex(server_id).c_str());
    return 2;
  }
  if (!opts.listen) {
    opts.listen = parse_address("0.0.0.0:" + std::to_string(steering.quic_ports.front()));
  }
  const bool secret_given = !opts.secret.empty();
  if (!secret_given) {
    opts.secret.resize(32);
    if (gnutls_rnd(GNUTLS_RND_KEY, opts.secret.data(), opts.secret.size()) != 0) {
      std::fprintf(stderr, "quicsteer-server: no random numbers for the reset secret\n");
      return 1;
    }
  }
  {
    // The secret's fingerprint as quicsteer shows keys: the first 4 octets of its SHA-256.
    std::uint8_t digest[32];
    gnutls_hash_fast(GNUTLS_DIG_SHA256, opts.secret.data(), opts.secret.size(), digest);
    std::fprintf(stderr, "quicsteer-server: reset secret sha256:%s (%s)\n", qs::to_hex(digest, 4).c_str(),
                 secret_given ? "--secret" : "random, this start only: give every server behind one quicsteer "
                                             "the same --secret");
  }
  try {
    qs::QuicLbCodec codec(*config);
    std::fprintf(stderr, "quicsteer-server: %s routes server id %s to %s\n", opts.profile.c_str(),
                 qs::to_hex(server_id).c_str(), routed_to.c_str());
    Server server(std::move(opts), std::move(codec), std::move(server_id));
    g_server = &server;
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
    server.setup();
    const int rc = server.run();
    g_server = nullptr;
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quicsteer-server: %s\n", e.what());
    return 1;
  }
}
