#include "dataplane/runtime/peer_sync.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <rte_cycles.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "dataplane/runtime/kernel_random.h"

namespace qs {

using peer_sync::Entry;
using peer_sync::Header;
using peer_sync::MessageType;
using peer_sync::Refusal;

namespace {

constexpr int kTickMs = 5;                 // the loop's turn: poll's timeout
constexpr std::uint64_t kRequestEveryMs = 1000;  // a starting instance asks again this often
constexpr unsigned kMaxReceivesPerTurn = 512;
constexpr unsigned kResyncBucketsPerTurn = 8192;

std::uint64_t wall_ms() {
  return std::uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
}

sockaddr_storage socket_address(const ListenAddress& a, socklen_t& len) {
  sockaddr_storage ss{};
  if (a.ipv6) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(a.port);
    inet_pton(AF_INET6, a.host.c_str(), &s6->sin6_addr);
    len = sizeof *s6;
  } else {
    auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
    s4->sin_family = AF_INET;
    s4->sin_port = htons(a.port);
    inet_pton(AF_INET, a.host.c_str(), &s4->sin_addr);
    len = sizeof *s4;
  }
  return ss;
}

bool same_address(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
    return x.sin6_port == y.sin6_port && std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
  }
  const auto& x = reinterpret_cast<const sockaddr_in&>(a);
  const auto& y = reinterpret_cast<const sockaddr_in&>(b);
  return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
}

std::string spelled(const ListenAddress& a) {
  std::string text = a.ipv6 ? std::string("[").append(a.host).append("]") : a.host;
  return text.append(":").append(std::to_string(a.port));
}

}  // namespace

struct PeerSync::Peer {
  ListenAddress listen;
  sockaddr_storage address{};
  socklen_t address_len = 0;
  peer_sync::ReplayGuard guard;
  peer_sync::PeerBudget budget;
  // What goes to this peer next, and the send budget (entries, refilled at
  // entries_per_s, at most a tenth of a second's worth at once).
  std::vector<Entry> pending;
  double send_tokens = 0;
  // Serving this peer's request for a copy: the walk's cursor.
  bool serving = false;
  std::uint32_t serve_cursor = 0;
  std::uint32_t served = 0;
  // This instance's request to it: entries received since, and whether its
  // kResyncDone came.
  std::uint64_t resync_received = 0;
  bool copied = false;
  int last_errno = 0;  // of the last failed send (0: the last one worked)
  Peer(const ListenAddress& a, std::uint32_t share, std::uint32_t window_ms, std::uint32_t rate)
      : listen(a), budget(share, window_ms, rate) {
    address = socket_address(a, address_len);
  }
};

std::array<std::uint8_t, 16> PeerSync::table_key(const PeerSyncConfig& config) {
  return peer_sync::Keys::derive(config.key).table_key();
}

void PeerSync::check_backend_ids(const PeerSyncConfig& config, const std::vector<BackendConfig>& backends) {
  const peer_sync::Keys keys = peer_sync::Keys::derive(config.key);
  std::unordered_map<std::uint32_t, const std::string*> seen;
  for (const BackendConfig& b : backends) {
    const auto [it, fresh] = seen.emplace(keys.backend_id(b.name), &b.name);
    if (!fresh)
      throw std::invalid_argument("peer_sync: backends " + *it->second + " and " + b.name +
                                  " share a wire id under this key (a 1 in 2^32 chance): rename one, or change "
                                  "peer_sync.key on every peer");
  }
}

PeerSync::PeerSync(const PeerSyncConfig& config, const ForwardingConfig& forwarding, ForwardingTables& tables,
                   std::vector<LearnedRing*> rings, std::uint64_t tsc_per_ms)
    : config_(config),
      forwarding_(forwarding),
      tables_(tables),
      rings_(std::move(rings)),
      tsc_per_ms_(tsc_per_ms == 0 ? 1 : tsc_per_ms),
      keys_(peer_sync::Keys::derive(config.key)) {
  kernel_random({reinterpret_cast<std::uint8_t*>(&boot_id_), sizeof boot_id_}, "the peer sync boot id");
  const std::uint32_t share = std::uint32_t(
      std::max(1.0, config.max_peer_share * double(forwarding.max_entries)));
  for (const ListenAddress& a : config.peers)
    peers_.push_back(std::make_unique<Peer>(a, share, forwarding.idle_timeout_ms, config.entries_per_s));
  fd_ = ::socket(config.listen.ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("peer_sync: socket: ") + std::strerror(errno));
  const int one = 1;
  // The listen address may be the TAP's, which the operator gives it once
  // quicsteer has created the TAP.
  if (config.listen.ipv6)
    ::setsockopt(fd_, IPPROTO_IPV6, IPV6_FREEBIND, &one, sizeof one);
  else
    ::setsockopt(fd_, IPPROTO_IP, IP_FREEBIND, &one, sizeof one);
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = 0;
  const sockaddr_storage ss = socket_address(config.listen, len);
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&ss), len) != 0) {
    const int e = errno;
    ::close(fd_);
    throw std::runtime_error("peer_sync.listen " + spelled(config.listen) + ": bind: " + std::strerror(e));
  }
  std::printf("peer sync: %s, %zu peers, up to %.0f%% of %u entries each per idle timeout, %u entries/s\n",
              spelled(config.listen).c_str(), peers_.size(), config.max_peer_share * 100, forwarding.max_entries,
              config.entries_per_s);
}

PeerSync::~PeerSync() {
  stop();
  if (fd_ >= 0) ::close(fd_);
}

void PeerSync::set_backends(const std::vector<BackendConfig>& backends) {
  check_backend_ids(config_, backends);
  std::lock_guard<std::mutex> lock(backends_mutex_);
  slot_of_id_.clear();
  id_of_slot_.assign(kMaxBackends, 0);
  slot_known_.assign(kMaxBackends, false);
  for (const BackendConfig& b : backends) {
    const std::uint32_t id = keys_.backend_id(b.name);
    slot_of_id_[id] = b.slot;
    id_of_slot_[b.slot] = id;
    slot_known_[b.slot] = true;
  }
}

void PeerSync::start() {
  if (thread_.joinable()) return;
  stopping_.store(false, std::memory_order_relaxed);
  started_wall_ms_ = wall_ms();
  if (config_.resync_timeout_ms == 0) ready_.store(true, std::memory_order_release);
  thread_ = std::thread([this] { run(); });
}

void PeerSync::stop() {
  if (!thread_.joinable()) return;
  stopping_.store(true, std::memory_order_release);
  thread_.join();
}

std::uint32_t PeerSync::now_ms() const { return std::uint32_t(rte_rdtsc() / tsc_per_ms_); }

void PeerSync::run() {
  std::uint64_t last = wall_ms();
  for (auto& peer : peers_) peer->send_tokens = double(config_.entries_per_s) / 10;
  ask_for_copies(last);
  while (!stopping_.load(std::memory_order_acquire)) {
    pollfd p{fd_, POLLIN, 0};
    ::poll(&p, 1, kTickMs);
    const std::uint64_t now = wall_ms();
    const std::uint64_t elapsed = now >= last ? now - last : 0;
    last = now;
    for (auto& peer : peers_)
      peer->send_tokens = std::min(double(config_.entries_per_s) / 10,
                                   peer->send_tokens + double(config_.entries_per_s) * double(elapsed) / 1000);
    receive(now);
    drain_rings();
    serve_resyncs();
    walk_refresh(elapsed);
    for (auto& peer : peers_) flush(*peer);
    if (!ready_.load(std::memory_order_relaxed)) ask_for_copies(now);
  }
}

// Until one peer's copy is in: ask every peer once a second; after
// resync_timeout_ms, go on without (counted).
void PeerSync::ask_for_copies(std::uint64_t now) {
  if (now - started_wall_ms_ >= config_.resync_timeout_ms) {
    counters_.resync_timeouts.fetch_add(1, std::memory_order_relaxed);
    std::printf("peer sync: no peer sent its copy of the forwarding tables within %u ms; going on without\n",
                config_.resync_timeout_ms);
    ready_.store(true, std::memory_order_release);
    return;
  }
  if (last_request_ms_ != 0 && now - last_request_ms_ < kRequestEveryMs) return;
  last_request_ms_ = now;
  for (auto& peer : peers_) {
    if (peer->copied) continue;
    flush(*peer);  // entries first: a message holds one type
    flush(*peer, MessageType::kResyncRequest);
  }
}

void PeerSync::receive(std::uint64_t now) {
  std::uint8_t buffer[peer_sync::kMaxDatagram + 1];
  for (unsigned i = 0; i < kMaxReceivesPerTurn; ++i) {
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    const ssize_t n = ::recvfrom(fd_, buffer, sizeof buffer, 0, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) return;  // EAGAIN: nothing more (errors are the kernel's to report)
    counters_.messages_received.fetch_add(1, std::memory_order_relaxed);
    Peer* peer = nullptr;
    for (auto& p : peers_)
      if (same_address(p->address, from)) peer = p.get();
    if (peer == nullptr) {
      counters_.refused[std::size_t(Refusal::kUnknownPeer)].fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    handle(*peer, buffer, std::size_t(n), now);
  }
}

void PeerSync::handle(Peer& peer, const std::uint8_t* data, std::size_t len, std::uint64_t now) {
  Header h;
  Entry entries[peer_sync::kMaxEntries];
  Refusal r = peer_sync::decode(keys_, data, len, h, entries);
  // A message of this instance's own boot came back (a reflection): refused
  // as a replay before it touches the peer's window.
  if (r == Refusal::kNone && h.boot_id == boot_id_) r = Refusal::kReplayed;
  if (r == Refusal::kNone) r = peer.guard.admit(h, now, config_.max_skew_ms);
  if (r == Refusal::kNone && h.table_buckets != tables_.established().bucket_count()) r = Refusal::kTableMismatch;
  if (r != Refusal::kNone) {
    counters_.refused[std::size_t(r)].fetch_add(1, std::memory_order_relaxed);
    return;
  }
  switch (h.type) {
    case MessageType::kEntries:
      absorb(peer, entries, h.entry_count, now);
      break;
    case MessageType::kResyncRequest:
      // A restart of the peer (or a retry): walk the whole table for it.
      peer.serving = true;
      peer.serve_cursor = 0;
      peer.served = 0;
      break;
    case MessageType::kResyncDone:
      if (!peer.copied) {
        peer.copied = true;
        counters_.resyncs_completed.fetch_add(1, std::memory_order_relaxed);
        if (peer.resync_received < h.total)
          counters_.resync_entries_lost.fetch_add(h.total - peer.resync_received, std::memory_order_relaxed);
        if (!ready_.load(std::memory_order_relaxed))
          std::printf("peer sync: copy of %s's forwarding tables in (%u entries sent, %llu received)\n",
                      spelled(peer.listen).c_str(), h.total, static_cast<unsigned long long>(peer.resync_received));
        ready_.store(true, std::memory_order_release);
      }
      break;
  }
}

void PeerSync::absorb(Peer& peer, const Entry* entries, std::size_t n, std::uint64_t now) {
  counters_.entries_received.fetch_add(n, std::memory_order_relaxed);
  if (!peer.copied) peer.resync_received += n;
  std::uint64_t added = 0, refreshed = 0, expired = 0, full = 0;
  std::array<std::uint64_t, peer_sync::kRefusals> refused{};
  const std::uint32_t here = now_ms();
  {
    // Held across the inserts: a reload's set_backends() waits for them, so
    // that no entry of a backend it removes is written after the reload
    // retires its slot.
    std::lock_guard<std::mutex> lock(backends_mutex_);
    for (std::size_t i = 0; i < n; ++i) {
      const Entry& e = entries[i];
      if (Refusal r = peer.budget.admit_entry(now); r != Refusal::kNone) {
        ++refused[std::size_t(r)];
        continue;
      }
      const auto slot = slot_of_id_.find(e.backend_id);
      if (slot == slot_of_id_.end()) {
        ++refused[std::size_t(Refusal::kUnknownBackend)];
        continue;
      }
      if (e.age_ms >= forwarding_.idle_timeout_ms) {
        ++expired;  // idle for the whole timeout there: it would expire here at once
        continue;
      }
      bool over_share = false;
      const auto admit = [&] {
        over_share = peer.budget.admit_new(now) != Refusal::kNone;
        return !over_share;
      };
      switch (tables_.established().absorb(e.key, slot->second, e.credit, here - e.age_ms, admit)) {
        case ForwardingTable::Insert::kInserted: ++added; break;
        case ForwardingTable::Insert::kPresent: ++refreshed; break;
        case ForwardingTable::Insert::kRefused: ++refused[std::size_t(Refusal::kOverShare)]; break;
        case ForwardingTable::Insert::kFull: ++full; break;
        case ForwardingTable::Insert::kLost:
        case ForwardingTable::Insert::kEvicted: break;
      }
    }
  }
  counters_.entries_added.fetch_add(added, std::memory_order_relaxed);
  counters_.entries_refreshed.fetch_add(refreshed, std::memory_order_relaxed);
  counters_.entries_expired.fetch_add(expired, std::memory_order_relaxed);
  counters_.table_full.fetch_add(full, std::memory_order_relaxed);
  for (std::size_t r = 0; r < refused.size(); ++r)
    if (refused[r] != 0) counters_.refused[r].fetch_add(refused[r], std::memory_order_relaxed);
}

bool PeerSync::wire_ok(std::uint16_t target) const { return target < slot_known_.size() && slot_known_[target]; }

Entry PeerSync::wire_entry(std::uint64_t key, std::uint16_t target, unsigned credit, std::uint32_t age) const {
  return Entry{key, id_of_slot_[target], age, std::uint8_t(std::min(credit, unsigned(peer_sync::kMaxCredit)))};
}

bool PeerSync::queue_for(Peer& peer, const Entry& e) {
  if (peer.send_tokens < 1) {
    counters_.send_over_rate.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  peer.send_tokens -= 1;
  peer.pending.push_back(e);
  if (peer.pending.size() == peer_sync::kMaxEntries) flush(peer);
  return true;
}

// New entries from the receivers: to every peer, ahead of anything else.
void PeerSync::drain_rings() {
  LearnedEntry batch[256];
  std::lock_guard<std::mutex> lock(backends_mutex_);
  for (LearnedRing* ring : rings_) {
    while (const unsigned n = ring->dequeue_burst(batch, 256)) {
      for (unsigned i = 0; i < n; ++i) {
        if (!wire_ok(batch[i].target)) continue;  // a backend a reload removed meanwhile
        const Entry e = wire_entry(batch[i].key, batch[i].target, batch[i].credit, 0);
        for (auto& peer : peers_) queue_for(*peer, e);
      }
    }
  }
}

// A share of the table per turn, so that the whole of it is walked once per
// refresh period: every entry used within the period goes to every peer.
void PeerSync::walk_refresh(std::uint64_t elapsed_ms) {
  const std::uint32_t period_ms = std::max<std::uint32_t>(1000, std::min<std::uint32_t>(10000, forwarding_.idle_timeout_ms / 3));
  const ForwardingTable& table = tables_.established();
  refresh_carry_ += double(table.bucket_count()) * double(elapsed_ms) / double(period_ms);
  unsigned buckets = unsigned(refresh_carry_);
  refresh_carry_ -= buckets;
  const std::uint32_t now = now_ms();
  std::lock_guard<std::mutex> lock(backends_mutex_);
  while (buckets != 0) {
    const unsigned n = std::min<unsigned>(buckets, table.bucket_count() - refresh_cursor_);
    table.visit(refresh_cursor_, n, now, [&](std::uint64_t key, std::uint16_t target, unsigned credit, std::uint32_t age) {
      if (age >= period_ms || !wire_ok(target)) return;
      const Entry e = wire_entry(key, target, credit, age);
      for (auto& peer : peers_) queue_for(*peer, e);
    });
    refresh_cursor_ = (refresh_cursor_ + n) % table.bucket_count();
    buckets -= n;
  }
}

// Each peer that asked for a copy: the next buckets of the whole table,
// within what may still be sent to it this turn, then kResyncDone.
void PeerSync::serve_resyncs() {
  const ForwardingTable& table = tables_.established();
  const std::uint32_t now = now_ms();
  std::lock_guard<std::mutex> lock(backends_mutex_);
  for (auto& p : peers_) {
    Peer& peer = *p;
    if (!peer.serving) continue;
    unsigned walked = 0;
    while (peer.serve_cursor < table.bucket_count() && walked < kResyncBucketsPerTurn && peer.send_tokens >= 16) {
      const unsigned n = std::min<unsigned>(64, table.bucket_count() - peer.serve_cursor);
      table.visit(peer.serve_cursor, n, now, [&](std::uint64_t key, std::uint16_t target, unsigned credit, std::uint32_t age) {
        if (age >= forwarding_.idle_timeout_ms || !wire_ok(target)) return;
        peer.served += queue_for(peer, wire_entry(key, target, credit, age));
      });
      peer.serve_cursor += n;
      walked += n;
    }
    if (peer.serve_cursor >= table.bucket_count()) {
      flush(peer);
      flush(peer, MessageType::kResyncDone, peer.served);
      peer.serving = false;
      counters_.resyncs_served.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

void PeerSync::flush(Peer& peer, MessageType type, std::uint32_t total) {
  if (type == MessageType::kEntries && peer.pending.empty()) return;
  Header h;
  h.type = type;
  h.boot_id = boot_id_;
  h.sequence = ++sequence_;
  h.sent_ms = wall_ms();
  h.table_buckets = tables_.established().bucket_count();
  h.total = type == MessageType::kResyncDone ? total : 0;
  std::uint8_t out[peer_sync::kMaxDatagram];
  const std::size_t n = type == MessageType::kEntries ? peer.pending.size() : 0;
  const std::size_t len = peer_sync::encode(keys_, h, peer.pending.data(), n, out, sizeof out);
  if (type == MessageType::kEntries) peer.pending.clear();
  if (len == 0) {
    counters_.send_errors.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (send(peer, out, len)) counters_.entries_sent.fetch_add(n, std::memory_order_relaxed);
}

bool PeerSync::send(Peer& peer, const std::uint8_t* data, std::size_t len) {
  if (::sendto(fd_, data, len, 0, reinterpret_cast<const sockaddr*>(&peer.address), peer.address_len) < 0) {
    // No route yet (the TAP's address comes after start), a full socket
    // buffer: counted; the refresh walk sends live entries again. Said
    // once per peer and reason, so that a lasting one is seen.
    counters_.send_errors.fetch_add(1, std::memory_order_relaxed);
    if (errno != peer.last_errno) {
      peer.last_errno = errno;
      std::printf("peer sync: sending to %s: %s (counted as send_errors until it works)\n",
                  spelled(peer.listen).c_str(), std::strerror(errno));
      std::fflush(stdout);
    }
    return false;
  }
  if (peer.last_errno != 0) {
    peer.last_errno = 0;
    std::printf("peer sync: sending to %s works\n", spelled(peer.listen).c_str());
    std::fflush(stdout);
  }
  counters_.messages_sent.fetch_add(1, std::memory_order_relaxed);
  return true;
}

PeerSyncSnapshot PeerSync::snapshot() const {
  PeerSyncSnapshot s;
  const auto get = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  s.ready = ready() ? 1 : 0;
  s.messages_sent = get(counters_.messages_sent);
  s.messages_received = get(counters_.messages_received);
  s.entries_sent = get(counters_.entries_sent);
  s.entries_received = get(counters_.entries_received);
  s.entries_added = get(counters_.entries_added);
  s.entries_refreshed = get(counters_.entries_refreshed);
  s.entries_expired = get(counters_.entries_expired);
  s.table_full = get(counters_.table_full);
  s.send_over_rate = get(counters_.send_over_rate);
  s.send_errors = get(counters_.send_errors);
  s.resyncs_served = get(counters_.resyncs_served);
  s.resyncs_completed = get(counters_.resyncs_completed);
  s.resync_timeouts = get(counters_.resync_timeouts);
  s.resync_entries_lost = get(counters_.resync_entries_lost);
  const auto refused = [&](Refusal r) { return get(counters_.refused[std::size_t(r)]); };
  s.refused_malformed = refused(Refusal::kMalformed);
  s.refused_bad_mac = refused(Refusal::kBadMac);
  s.refused_replayed = refused(Refusal::kReplayed);
  s.refused_stale = refused(Refusal::kStale);
  s.refused_unknown_peer = refused(Refusal::kUnknownPeer);
  s.refused_table_mismatch = refused(Refusal::kTableMismatch);
  s.refused_unknown_backend = refused(Refusal::kUnknownBackend);
  s.refused_over_share = refused(Refusal::kOverShare);
  s.refused_rate_limited = refused(Refusal::kRateLimited);
  return s;
}

}  // namespace qs
