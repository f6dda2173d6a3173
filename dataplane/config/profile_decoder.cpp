// The profile decoder: the schema (which keys, which types, which ranges),
// its validators, and the cross-checks between sections (every RX queue
// polled once, TX queues per owner, frames that fit the mbufs, ...).
#include "dataplane/config/profile_decoder.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "dataplane/config/enum_names.h"
#include "steering/hex.h"
#include "steering/maglev.h"
#include "steering/service_table.h"

namespace qs::config {

namespace {

// Limits of the schema that are not plain per-field ranges.
constexpr std::uint16_t kMaxQueuesPerPort = 64;
constexpr unsigned kMaxLcoreId = 127;
constexpr std::uint32_t kMinMbufs = 1024;
constexpr std::uint32_t kMaxMbufs = 16u << 20;
constexpr std::uint32_t kMaxMempoolCache = 512;  // RTE_MEMPOOL_CACHE_MAX_SIZE
// rte_mempool_create() refuses a per-lcore cache above n / 1.5; the ranges
// alone guarantee it, so no profile can trip over it at start-up.
static_assert(kMaxMempoolCache * 3 <= kMinMbufs * 2);
// RTE_PKTMBUF_HEADROOM of the Debian DPDK build: the start of every mbuf data
// room that the NIC does not write, so a frame gets data_room minus this.
constexpr std::uint32_t kMbufHeadroom = 128;
// Ethernet header + FCS on top of the MTU (what PMDs size RX buffers for).
constexpr std::uint32_t kEthernetOverhead = 14 + 4;
constexpr std::size_t kMaxQuicLbConfigs = 7;   // config ids 0..6
constexpr unsigned kMaxCidPayload = 19;        // 20-octet CID minus first octet
constexpr std::size_t kMaxPortNameLength = 32;
// Per-lcore synthetic cost may stall an owner for tens of milliseconds a
// packet (a stuck owner in experiments); the profile-wide one stays modest.
constexpr std::uint32_t kMaxLcoreCostCycles = 100000000;
constexpr std::size_t kMaxBackendNameLength = 32;
constexpr std::uint32_t kMaxBackendWeight = 1000;
constexpr std::uint32_t kMaxVxlanVni = (1u << 24) - 1;  // 24 bits (RFC 7348)

// What a port or a backend may be called: 1..max_length of A-Z a-z 0-9 and
// the given punctuation.
struct NameRule {
  const char* what;         // "port", "backend"
  std::size_t max_length;
  std::string_view punctuation;

  bool allows(const std::string& name) const {
    if (name.empty() || name.size() > max_length) return false;
    return std::all_of(name.begin(), name.end(), [&](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || punctuation.find(c) != std::string_view::npos;
    });
  }
  // "port names are 1..32 of A-Z a-z 0-9 _ -, got 'x y'"
  std::string refusal(const std::string& name) const {
    std::string allowed = "A-Z a-z 0-9";
    for (char c : punctuation) allowed += std::string(" ") + c;
    return std::string(what) + " names are 1.." + std::to_string(max_length) + " of " + allowed + ", got '" + name +
           "'";
  }
};
constexpr NameRule kPortNames{"port", kMaxPortNameLength, "_-"};
constexpr NameRule kBackendNames{"backend", kMaxBackendNameLength, "_.-"};
constexpr NameRule kServiceNames{"service", kMaxBackendNameLength, "_.-"};

bool hex_digits(std::string_view s, std::size_t n) {
  return s.size() == n &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// DDDD:BB:DD.F or BB:DD.F, device 00..1f, function 0..7 (what EAL's PCI
// allow-list accepts).
bool valid_pci_address(std::string_view s) {
  if (s.size() == 12) {
    if (!hex_digits(s.substr(0, 4), 4) || s[4] != ':') return false;
    s.remove_prefix(5);
  }
  if (s.size() != 7 || !hex_digits(s.substr(0, 2), 2) || s[2] != ':' || !hex_digits(s.substr(3, 2), 2) ||
      s[5] != '.' || s[6] < '0' || s[6] > '7') {
    return false;
  }
  unsigned device = 0;
  std::from_chars(s.data() + 3, s.data() + 5, device, 16);
  return device <= 0x1f;
}

// net_<driver><instance>[,key=value...]: a name EAL's --vdev accepts; the
// arguments are the driver's business.
bool valid_vdev(std::string_view s) {
  const std::size_t comma = s.find(',');
  const std::string_view name = s.substr(0, comma);
  if (name.size() <= 4 || name.substr(0, 4) != "net_") return false;
  if (!std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      })) {
    return false;
  }
  return std::none_of(s.begin(), s.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
}

// The identity EAL gives a device: the vdev name before its arguments, or the
// PCI address without the default domain.
std::string device_identity(const std::string& device) {
  if (device.rfind("net_", 0) == 0) return device.substr(0, device.find(','));
  std::string id = device;
  std::transform(id.begin(), id.end(), id.begin(), [](char c) { return char(std::tolower(c)); });
  return id.size() == 7 ? "0000:" + id : id;
}

std::string list_names(const std::vector<PortConfig>& ports) {
  std::string names;
  for (const PortConfig& p : ports) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

std::string list_numbers(const std::vector<unsigned>& numbers) {
  std::string s;
  for (unsigned n : numbers) s += (s.empty() ? "" : ", ") + std::to_string(n);
  return s.empty() ? "none" : s;
}

// Where cross-checks point: the node of a key, or the map that lacks it.
Field field_or(const MapReader& map, std::string_view name) {
  if (auto f = map.get(name)) return *f;
  Field self = map.self();
  self.key = join_key(self.key, name);
  return self;
}

// "ADDRESS:PORT" as telemetry.prometheus_listen spells it: an IPv4 dotted
// quad or a bracketed IPv6 address, and a port 1..65535. Empty when valid.
std::string listen_address_problem(const std::string& text) {
  const std::string expected = "expected ADDRESS:PORT (\"127.0.0.1:9464\", \"0.0.0.0:9464\" or \"[::1]:9464\"), got '" +
                               text + "'";
  ListenAddress a;
  if (!parse_listen_address(text, a)) return expected;
  return "";
}

class ProfileDecoder {
 public:
  ProfileDecoder(const Decoder& d, Profile& p) : d_(d), p_(p) {}

  void decode(const YAML::Node& root_node) {
    const MapReader root(d_, Field{root_node, root_node.Mark(), ""},
                         {"eal", "ports", "mempool", "lcores", "rings", "steering", "backends", "services",
                          "exception_path", "peer_sync", "health_checks", "backpressure", "action", "polling", "stats", "telemetry",
                          "drain", "duration_s"});
    if (auto f = root.get("eal")) {
      for (const Field& arg : d_.list(*f)) p_.eal.push_back(d_.text(arg));
    }
    decode_ports(root.require("ports"));
    if (auto f = root.get("mempool")) decode_mempool(*f);
    check_frames_fit();
    decode_lcores(root.require("lcores"));
    if (auto f = root.get("rings")) decode_rings(*f);
    fallback_key_at_ = field_or(root, "steering");
    if (auto f = root.get("steering")) decode_steering(*f);
    // After steering (server IDs need the QUIC-LB configs) and before the
    // action (delivery needs the backends).
    if (auto f = root.get("backends")) decode_backends(*f);
    check_backend_table_size();
    if (auto f = root.get("services")) decode_services(*f);
    if (auto f = root.get("exception_path")) decode_exception_path(*f);
    check_taps();
    if (auto f = root.get("peer_sync")) decode_peer_sync(*f);
    decode_backpressure(root.get("backpressure"));
    decode_action(root, root.get("action"));
    // After the action: the probes leave by its TX port.
    if (auto f = root.get("health_checks")) decode_health_checks(*f);
    if (auto f = root.get("polling")) decode_polling(*f);
    if (auto f = root.get("stats")) decode_stats(*f);
    if (auto f = root.get("telemetry")) decode_telemetry(*f);
    if (auto f = root.get("drain")) decode_drain(*f);
    if (auto f = root.get("duration_s")) p_.duration_s = d_.real(*f, 0, 86400);
    check_fallback_key();
  }

 private:
  void decode_ports(const Field& f) {
    const std::vector<Field> items = d_.list(f);
    if (items.empty()) d_.fail(f, "at least one port is required");
    for (const Field& item : items) {
      const MapReader m(d_, item,
                        {"name", "device", "rx_queues", "tx_queues", "rx_descriptors", "tx_descriptors", "rss",
                         "mtu", "flow_control", "rx_drop_en", "promiscuous", "tap"});
      PortConfig port;
      const Field name = m.require("name");
      port.name = named(name, kPortNames);
      if (const int other = p_.port_index(port.name); other >= 0) {
        d_.fail(name, "duplicate port name '" + port.name + "' (also ports[" + std::to_string(other) + "])");
      }
      const Field device = m.require("device");
      port.device = d_.text(device);
      if (!valid_pci_address(port.device) && !valid_vdev(port.device)) {
        d_.fail(device, "expected a PCI address (DDDD:BB:DD.F or BB:DD.F) or vdev devargs starting with "
                        "net_ (e.g. net_null0,no-rx=1), got '" + port.device + "'");
      }
      for (std::size_t i = 0; i < p_.ports.size(); ++i) {
        if (device_identity(p_.ports[i].device) == device_identity(port.device)) {
          d_.fail(device, "device '" + device_identity(port.device) + "' is already ports[" + std::to_string(i) +
                              "] ('" + p_.ports[i].name + "')");
        }
      }
      if (auto v = m.get("rx_queues")) port.rx_queues = d_.integer<std::uint16_t>(*v, 0, kMaxQueuesPerPort);
      if (auto v = m.get("tx_queues")) port.tx_queues = d_.integer<std::uint16_t>(*v, 0, kMaxQueuesPerPort);
      if (port.rx_queues == 0 && port.tx_queues == 0) {
        d_.fail(item, "a port needs rx_queues or tx_queues (both are 0)");
      }
      if (auto v = m.get("rx_descriptors")) port.rx_descriptors = d_.integer<std::uint16_t>(*v, 32, 16384);
      if (auto v = m.get("tx_descriptors")) port.tx_descriptors = d_.integer<std::uint16_t>(*v, 32, 16384);
      if (auto v = m.get("rss")) port.rss = d_.boolean(*v);
      if (auto v = m.get("mtu")) port.mtu = d_.integer<std::uint16_t>(*v, 68, 9600);
      if (auto v = m.get("flow_control")) {
        port.flow_control = d_.choice(*v, kFlowControlSpellings);
      }
      if (auto v = m.get("rx_drop_en")) port.rx_drop_en = d_.boolean(*v);
      if (auto v = m.get("promiscuous")) port.promiscuous = d_.boolean(*v);
      if (auto v = m.get("tap")) {
        port.tap = d_.text(*v);
        // The kernel's rule for an interface name (dev_valid_name): 1..15
        // octets, neither "." nor "..", no '/', ':' or white space.
        const bool valid = !port.tap.empty() && port.tap.size() < 16 && port.tap != "." && port.tap != ".." &&
                           std::none_of(port.tap.begin(), port.tap.end(), [](char c) {
                             return c == '/' || c == ':' || std::isspace(static_cast<unsigned char>(c)) ||
                                    static_cast<unsigned char>(c) < 0x20;
                           });
        if (!valid) d_.fail(*v, "expected a kernel interface name (1..15 octets, no '/', ':' or space), got " +
                                    describe(v->node));
        for (std::size_t i = 0; i < p_.ports.size(); ++i)
          if (p_.ports[i].tap == port.tap)
            d_.fail(*v, "tap '" + port.tap + "' is already ports[" + std::to_string(i) + "]'s");
        if (port.rx_queues == 0) d_.fail(*v, "a port with a tap receives (rx_queues is 0)");
      }
      p_.ports.push_back(std::move(port));
      port_maps_.push_back(m);
    }
  }

  void decode_mempool(const Field& f) {
    const MapReader m(d_, f, {"mbufs", "cache", "data_room"});
    if (auto v = m.get("mbufs")) p_.mempool.mbufs = d_.integer<std::uint32_t>(*v, kMinMbufs, kMaxMbufs);
    if (auto v = m.get("cache")) p_.mempool.cache = d_.integer<std::uint32_t>(*v, 0, kMaxMempoolCache);
    if (auto v = m.get("data_room")) p_.mempool.data_room = d_.integer<std::uint16_t>(*v, 1024, 65535);
  }

  // The data path receives single-segment frames only.
  void check_frames_fit() const {
    const std::uint32_t room = p_.mempool.data_room > kMbufHeadroom ? p_.mempool.data_room - kMbufHeadroom : 0;
    for (std::size_t i = 0; i < p_.ports.size(); ++i) {
      const std::uint32_t frame = p_.ports[i].mtu + kEthernetOverhead;
      if (frame > room) {
        d_.fail(field_or(port_maps_[i], "mtu"),
                "a " + std::to_string(p_.ports[i].mtu) + "-byte MTU needs " + std::to_string(frame) +
                    "-byte frames, but mempool.data_room " + std::to_string(p_.mempool.data_room) + " minus " +
                    std::to_string(kMbufHeadroom) + " headroom leaves " + std::to_string(room) +
                    "; raise mempool.data_room to at least " + std::to_string(frame + kMbufHeadroom));
      }
    }
  }

  void decode_lcores(const Field& f) {
    const std::vector<Field> items = d_.list(f);
    if (items.empty()) d_.fail(f, "at least one lcore is required");
    // Which lcore entry polls each queue, per port; -1 = nobody yet.
    std::vector<std::vector<int>> poller(p_.ports.size());
    for (std::size_t i = 0; i < p_.ports.size(); ++i) poller[i].assign(p_.ports[i].rx_queues, -1);

    for (std::size_t index = 0; index < items.size(); ++index) {
      const Field& item = items[index];
      const MapReader m(d_, item, {"id", "rx", "owner", "cost_cycles"});
      LcoreConfig lcore;
      const Field id = m.require("id");
      lcore.id = d_.integer<unsigned>(id, 0, kMaxLcoreId);
      for (std::size_t j = 0; j < p_.lcores.size(); ++j) {
        if (p_.lcores[j].id == lcore.id) {
          d_.fail(id, "duplicate lcore id " + std::to_string(lcore.id) + " (also lcores[" + std::to_string(j) + "])");
        }
      }
      if (auto rx = m.get("rx")) {
        for (const Field& entry : d_.list(*rx)) {
          const RxQueueRef ref = decode_queue_ref(entry);
          int& who = poller[ref.port][ref.queue];
          if (who >= 0) {
            d_.fail(entry, "queue " + std::to_string(ref.queue) + " of port '" + p_.ports[ref.port].name +
                               "' is already polled by lcores[" + std::to_string(who) + "] (id " +
                               std::to_string(p_.lcores.size() > std::size_t(who) ? p_.lcores[who].id : lcore.id) +
                               "); each RX queue needs exactly one poller");
          }
          who = static_cast<int>(index);
          lcore.rx.push_back(ref);
        }
      }
      if (auto owner = m.get("owner")) lcore.owner = d_.boolean(*owner);
      if (auto cost = m.get("cost_cycles")) {
        if (!lcore.owner) d_.fail(*cost, "cost_cycles is the owner's connection-stage cost; lcore " +
                                              std::to_string(lcore.id) + " is not an owner");
        lcore.cost_cycles = d_.integer<std::uint32_t>(*cost, 0, kMaxLcoreCostCycles);
      }
      if (lcore.rx.empty() && !lcore.owner) {
        d_.fail(item, "lcore " + std::to_string(lcore.id) + " polls no RX queue and is not an owner");
      }
      if (lcore.owner) {
        if (p_.steering.owner_lcores.size() == kMaxOwnerLcores) {
          d_.fail(*m.get("owner"), "at most " + std::to_string(kMaxOwnerLcores) +
                                       " lcores may be owners; lcore " + std::to_string(lcore.id) + " would be owner " +
                                       std::to_string(kMaxOwnerLcores + 1));
        }
        p_.steering.owner_lcores.push_back(lcore.id);
      }
      p_.lcores.push_back(std::move(lcore));
    }
    if (p_.steering.owner_lcores.empty()) {
      d_.fail(f, "no lcore has owner: true; at least one lcore must own connections");
    }
    for (std::size_t port = 0; port < poller.size(); ++port) {
      for (std::size_t queue = 0; queue < poller[port].size(); ++queue) {
        if (poller[port][queue] < 0) {
          d_.fail(field_or(port_maps_[port], "rx_queues"),
                  "queue " + std::to_string(queue) + " of port '" + p_.ports[port].name +
                      "' is polled by no lcore; list \"" + p_.ports[port].name + ":" + std::to_string(queue) +
                      "\" in one lcore's rx");
        }
      }
    }
  }

  std::string named(const Field& f, const NameRule& rule) const {
    std::string name = d_.text(f);
    if (!rule.allows(name)) d_.fail(f, rule.refusal(name));
    return name;
  }

  RxQueueRef decode_queue_ref(const Field& entry) const {
    const std::string s = d_.text(entry);
    const std::size_t colon = s.rfind(':');
    const auto malformed = [&] {
      d_.fail(entry, "expected \"port:queue\" (e.g. \"" + (p_.ports.empty() ? std::string("wire") : p_.ports[0].name) +
                         ":0\"), got '" + s + "'");
    };
    if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) malformed();
    const std::string name = s.substr(0, colon);
    unsigned queue = 0;
    const auto [end, ec] = std::from_chars(s.data() + colon + 1, s.data() + s.size(), queue);
    if (ec != std::errc() || end != s.data() + s.size() || !kPortNames.allows(name)) malformed();
    const int port = p_.port_index(name);
    if (port < 0) d_.fail(entry, "unknown port '" + name + "' (ports: " + list_names(p_.ports) + ")");
    const PortConfig& pc = p_.ports[port];
    if (queue >= pc.rx_queues) {
      d_.fail(entry, "queue " + std::to_string(queue) + " is beyond port '" + name + "', which has " +
                         std::to_string(pc.rx_queues) + " rx_queues" +
                         (pc.rx_queues ? " (0.." + std::to_string(pc.rx_queues - 1) + ")" : std::string()));
    }
    return RxQueueRef{static_cast<std::uint16_t>(port), static_cast<std::uint16_t>(queue)};
  }

  void decode_rings(const Field& f) {
    const MapReader m(d_, f, {"size", "burst"});
    if (auto v = m.get("size")) {
      p_.rings.size = d_.integer<std::uint32_t>(*v, 16, 65536);
      if ((p_.rings.size & (p_.rings.size - 1)) != 0) {
        d_.fail(*v, "must be a power of two, got " + std::to_string(p_.rings.size));
      }
    }
    if (auto v = m.get("burst")) {
      p_.rings.burst = d_.integer<std::uint16_t>(*v, 1, 64);
      if (p_.rings.burst > p_.rings.size) {
        d_.fail(*v, "must not exceed rings.size (" + std::to_string(p_.rings.size) + "), got " +
                        std::to_string(p_.rings.burst));
      }
    }
  }

  void decode_steering(const Field& f) {
    SteeringConfig& s = p_.steering;
    const MapReader m(d_, f, {"mode", "quic_ports", "short_dcid_len", "quic_lb", "servers", "fallback", "forwarding",
                                 "backend_table_size"});
    if (auto v = m.get("mode")) {
      s.mode = d_.choice(*v, kSteeringModeSpellings);
    }
    if (auto v = m.get("quic_ports")) {
      const std::vector<Field> items = d_.list(*v);
      if (items.empty()) d_.fail(*v, "at least one UDP port is required");
      s.quic_ports.clear();
      for (const Field& item : items) {
        const auto port = d_.integer<std::uint16_t>(item, 1, 65535);
        if (std::find(s.quic_ports.begin(), s.quic_ports.end(), port) != s.quic_ports.end()) {
          d_.fail(item, "duplicate UDP port " + std::to_string(port));
        }
        s.quic_ports.push_back(port);
      }
    }
    if (auto v = m.get("short_dcid_len")) s.short_dcid_len = d_.integer<std::uint8_t>(*v, 0, 20);
    if (auto v = m.get("quic_lb")) decode_quic_lb(*v);
    servers_ = m.get("servers");
    if (servers_) decode_servers(*servers_);
    fallback_key_at_ = field_or(m, "fallback");
    if (auto v = m.get("fallback")) {
      const MapReader fb(d_, *v, {"key", "vnodes", "rekey_on_reload", "hash"});
      fallback_key_at_ = field_or(fb, "key");
      if (auto k = fb.get("key")) s.fallback_key = d_.key128(*k);
      if (auto n = fb.get("vnodes")) s.fallback_vnodes = d_.integer<unsigned>(*n, 1, 4096);
      if (auto r = fb.get("rekey_on_reload")) p_.rekey_fallback_on_reload = d_.boolean(*r);
      if (auto h = fb.get("hash")) s.fallback_hash = d_.choice(*h, kFallbackHashSpellings);
    }
    if (auto v = m.get("forwarding")) {
      const MapReader fw(d_, *v, {"enabled", "max_entries", "max_setup_entries", "max_entries_per_source"});
      if (auto e = fw.get("enabled")) s.forwarding.enabled = d_.boolean(*e);
      if (auto n = fw.get("max_entries")) s.forwarding.max_entries = d_.integer<std::uint32_t>(*n, 16, 1u << 28);
      if (auto n = fw.get("max_setup_entries"))
        s.forwarding.max_setup_entries = d_.integer<std::uint32_t>(*n, 16, 1u << 28);
      s.forwarding.max_entries_per_source = ForwardingConfig::default_entries_per_source(s.forwarding.max_entries);
      if (auto n = fw.get("max_entries_per_source"))
        s.forwarding.max_entries_per_source = d_.integer<std::uint32_t>(*n, 0, 1u << 28);
    }
    backend_table_size_ = m.get("backend_table_size");
    if (backend_table_size_) {
      s.backend_table_size = d_.integer<std::uint32_t>(*backend_table_size_, 0, kMaglevMaxTableSize);
      // A prime size makes each backend's preferred slots a permutation of
      // all of them (steering/maglev.h).
      if (s.backend_table_size != 0 && !maglev_is_prime(s.backend_table_size)) {
        d_.fail(*backend_table_size_, "must be a prime (or 0: the default size), got " +
                                          std::to_string(s.backend_table_size));
      }
    }
  }

  // After the backends: a size of its own needs a fleet to hash over, and a
  // slot for each backend.
  void check_backend_table_size() {
    const SteeringConfig& s = p_.steering;
    if (s.backend_table_size == 0) return;
    if (s.backends.empty()) {
      d_.fail(*backend_table_size_, "sizes the backend hash, but the profile lists no backends (0 or leave it out)");
    }
    if (s.backend_table_size < s.backends.size()) {
      d_.fail(*backend_table_size_, "must be at least the number of backends (" + std::to_string(s.backends.size()) +
                                        "), got " + std::to_string(s.backend_table_size));
    }
  }

  // An all-zero fallback key (the default) lets anyone work out the owner of
  // every connection QUIC-LB does not route, and so aim a flood of chosen
  // DCIDs at one owner: refused where the profile drives a NIC, a warning
  // where it drives vdevs only (tests, the demo, captures).
  void check_fallback_key() {
    if (p_.steering.fallback_key != std::array<std::uint8_t, 16>{}) return;
    Field at = fallback_key_at_;
    at.key = "steering.fallback.key";
    for (const PortConfig& port : p_.ports) {
      if (port.is_vdev()) continue;
      d_.fail(at, "all zeros (the default) on PCI port '" + port.name + "' (" + port.device +
                      "): anyone could work out which owner each connection QUIC-LB does not route goes to; "
                      "generate a key for this deployment (openssl rand -hex 16) and set steering.fallback.key");
    }
    p_.warnings.push_back(p_.path + ": warning: steering.fallback.key is all zeros (the default): anyone can work "
                                    "out which owner each connection QUIC-LB does not route goes to; set one "
                                    "(openssl rand -hex 16) before this carries real traffic");
  }

  void decode_quic_lb(const Field& f) {
    const std::vector<Field> items = d_.list(f);
    if (items.size() > kMaxQuicLbConfigs) {
      d_.fail(f, "at most " + std::to_string(kMaxQuicLbConfigs) + " configs (config_id 0..6), got " +
                     std::to_string(items.size()));
    }
    for (std::size_t i = 0; i < items.size(); ++i) {
      const MapReader m(d_, items[i], {"config_id", "server_id_len", "nonce_len", "key", "len_self_encode"});
      QuicLbConfig c;
      const Field id = m.require("config_id");
      c.config_id = d_.integer<std::uint8_t>(id, 0, 6);
      for (std::size_t j = 0; j < p_.steering.quic_lb.size(); ++j) {
        if (p_.steering.quic_lb[j].config_id == c.config_id) {
          d_.fail(id, "duplicate config_id " + std::to_string(c.config_id) + " (also steering.quic_lb[" +
                          std::to_string(j) + "])");
        }
      }
      c.server_id_len = d_.integer<std::uint8_t>(m.require("server_id_len"), 1, 15);
      const Field nonce = m.require("nonce_len");
      c.nonce_len = d_.integer<std::uint8_t>(nonce, 4, 18);
      if (unsigned(c.server_id_len) + c.nonce_len > kMaxCidPayload) {
        d_.fail(nonce, "server_id_len + nonce_len must be at most " + std::to_string(kMaxCidPayload) +
                           " (a CID is at most 20 octets), got " + std::to_string(c.server_id_len) + " + " +
                           std::to_string(c.nonce_len));
      }
      if (auto k = m.get("key")) c.key = d_.key128(*k);
      if (auto v = m.get("len_self_encode")) c.len_self_encode = d_.boolean(*v);
      p_.steering.quic_lb.push_back(c);
    }
  }

  void decode_servers(const Field& f) {
    SteeringConfig& s = p_.steering;
    const std::vector<Field> items = d_.list(f);
    // server_id -> index: duplicates are found in one pass (65,533 servers
    // with 2-octet IDs must not cost a quadratic scan).
    std::unordered_map<std::string, std::size_t> server_index;
    server_index.reserve(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      const MapReader m(d_, items[i], {"server_id", "owner"});
      ServerRoute route;
      const Field sid = m.require("server_id");
      route.server_id = d_.hex(sid, 1, 15);
      check_server_id_length(sid, route.server_id, "server_id");
      const auto [seen, fresh] = server_index.emplace(
          std::string(route.server_id.begin(), route.server_id.end()), s.server_routes.size());
      if (!fresh) d_.fail(sid, "duplicate server_id (also steering.servers[" + std::to_string(seen->second) + "])");
      route.owner_lcore = owner_lcore(m.require("owner"));
      s.server_routes.push_back(std::move(route));
    }
  }

  // A server ID is minted under some QUIC-LB config: its length must be one
  // a config has.
  void check_server_id_length(const Field& f, const std::vector<std::uint8_t>& id, const char* what) const {
    const std::vector<QuicLbConfig>& configs = p_.steering.quic_lb;
    const bool length_known = std::any_of(configs.begin(), configs.end(),
                                          [&](const QuicLbConfig& c) { return c.server_id_len == id.size(); });
    if (!length_known) {
      std::vector<unsigned> lengths;
      for (const QuicLbConfig& c : configs) lengths.push_back(c.server_id_len);
      d_.fail(f, std::string(what) + " is " + std::to_string(id.size()) +
                     " octets, but no steering.quic_lb config has that server_id_len (have: " + list_numbers(lengths) +
                     ")");
    }
  }

  unsigned owner_lcore(const Field& f) const {
    const std::vector<unsigned>& owners = p_.steering.owner_lcores;
    const auto id = d_.integer<unsigned>(f, 0, kMaxLcoreId);
    if (std::find(owners.begin(), owners.end(), id) == owners.end()) {
      d_.fail(f, "lcore " + std::to_string(id) + " is not an owner lcore (owners: " + list_numbers(owners) + ")");
    }
    return id;
  }

  void decode_backends(const Field& f) {
    SteeringConfig& s = p_.steering;
    const std::vector<Field> items = d_.list(f);
    if (items.empty()) d_.fail(f, "at least one backend is required (leave backends out for none)");
    if (items.size() > kMaxBackends) {
      d_.fail(f, "at most " + std::to_string(kMaxBackends) + " backends, got " + std::to_string(items.size()));
    }
    if (!s.server_routes.empty()) {
      d_.fail(f, "cannot be combined with steering.servers (line " + std::to_string(servers_->mark.line + 1) +
                     "): with backends, each backend lists its own server_ids");
    }
    // What must be unique across backends -> the first backend that has it.
    std::unordered_map<std::string, std::size_t> names, server_ids, addresses;
    const auto first = [](std::unordered_map<std::string, std::size_t>& seen, std::string value, std::size_t i) {
      return seen.emplace(std::move(value), i);
    };
    const auto also = [](std::size_t i) { return " (also backends[" + std::to_string(i) + "])"; };
    std::size_t unassigned = 0;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const MapReader m(d_, items[i],
                        {"name", "server_ids", "ipv4", "ipv6", "mac", "vxlan_mac", "weight", "state", "owner"});
      BackendConfig b;
      const Field name = m.require("name");
      b.name = named(name, kBackendNames);
      if (const auto [seen, fresh] = first(names, b.name, i); !fresh) {
        d_.fail(name, "duplicate backend name '" + b.name + "'" + also(seen->second));
      }
      if (auto v = m.get("server_ids")) {
        for (const Field& sid : d_.list(*v)) {
          std::vector<std::uint8_t> id = d_.hex(sid, 1, 15);
          check_server_id_length(sid, id, "server ID");
          if (const auto [seen, fresh] = first(server_ids, std::string(id.begin(), id.end()), i); !fresh) {
            d_.fail(sid, "duplicate server ID " + to_hex(id) + also(seen->second));
          }
          b.server_ids.push_back(std::move(id));
        }
      }
      if (auto v = m.get("ipv4")) {
        b.ipv4 = d_.ipv4(*v);
        if (const auto [seen, fresh] = first(addresses, format_ipv4(*b.ipv4), i); !fresh) {
          d_.fail(*v, "duplicate address " + format_ipv4(*b.ipv4) + also(seen->second));
        }
      }
      if (auto v = m.get("ipv6")) {
        b.ipv6 = d_.ipv6(*v);
        if (const auto [seen, fresh] = first(addresses, format_ipv6(*b.ipv6), i); !fresh) {
          d_.fail(*v, "duplicate address " + format_ipv6(*b.ipv6) + also(seen->second));
        }
      }
      b.mac = d_.mac(m.require("mac"));
      if (auto v = m.get("vxlan_mac")) b.vxlan_mac = d_.mac(*v);
      if (auto v = m.get("weight")) b.weight = d_.integer<std::uint32_t>(*v, 1, kMaxBackendWeight);
      if (auto v = m.get("state")) {
        b.state = d_.choice(*v, kBackendStateSpellings);
      }
      if (auto v = m.get("owner")) {
        b.owner_lcore = owner_lcore(*v);
      } else {
        // Spread evenly: the k-th backend without an owner goes to the
        // k-th owner, round robin, in profile order.
        b.owner_lcore = s.owner_lcores[unassigned++ % s.owner_lcores.size()];
      }
      b.slot = static_cast<std::uint16_t>(i);
      s.backends.push_back(std::move(b));
      backend_maps_.push_back(m);
    }
    if (std::none_of(s.backends.begin(), s.backends.end(),
                     [](const BackendConfig& b) { return b.state == BackendState::kActive; })) {
      d_.fail(f, "no backend is active; at least one must take new connections (state: active)");
    }
  }

  // services: [{name, addresses: [IPv4 | IPv6, ...], udp_ports: [...]}, ...]
  void decode_services(const Field& f) {
    std::map<std::string, std::string> seen;  // address -> the service that lists it
    std::size_t pairs = 0;
    const std::vector<Field> items = d_.list(f);
    for (std::size_t i = 0; i < items.size(); ++i) {
      const MapReader m(d_, items[i], {"name", "addresses", "udp_ports"});
      ServiceConfig svc;
      if (auto v = m.get("name")) {
        svc.name = named(*v, kServiceNames);
      } else {
        svc.name = "service" + std::to_string(i);
      }
      for (const auto& other : p_.steering.services)
        if (other.name == svc.name) d_.fail(field_or(m, "name"), "duplicate service name '" + svc.name + "'");
      const Field addresses = m.require("addresses");
      const std::vector<Field> list = d_.list(addresses);
      if (list.empty()) d_.fail(addresses, "a service needs at least one address");
      for (const Field& a : list) {
        const std::string text = d_.text(a);
        std::string shown_as;
        if (text.find(':') != std::string::npos) {
          svc.ipv6.push_back(d_.ipv6(a));
          shown_as = format_ipv6(svc.ipv6.back());
        } else {
          svc.ipv4.push_back(d_.ipv4(a));
          shown_as = format_ipv4(svc.ipv4.back());
        }
        if (const auto [it, fresh] = seen.emplace(shown_as, svc.name); !fresh)
          d_.fail(a, "address " + shown_as + " is already in service '" + it->second + "'");
      }
      const Field ports = m.require("udp_ports");
      const std::vector<Field> port_list = d_.list(ports);
      if (port_list.empty()) d_.fail(ports, "a service needs at least one UDP port");
      for (const Field& pf : port_list) {
        const auto port = d_.integer<std::uint16_t>(pf, 1, 65535);
        if (std::find(svc.udp_ports.begin(), svc.udp_ports.end(), port) != svc.udp_ports.end())
          d_.fail(pf, "port " + std::to_string(port) + " is listed twice");
        svc.udp_ports.push_back(port);
      }
      pairs += list.size() * (svc.udp_ports.size() + 1);
      if (pairs > ServiceTable::kMaxEntries)
        d_.fail(items[i], "the services list over " + std::to_string(ServiceTable::kMaxEntries) +
                              " (address, port) pairs");
      p_.steering.services.push_back(std::move(svc));
    }
  }

  // exception_path: {ring_size, police: {CLASS: {packets_per_s, bytes_per_s}}}
  void decode_exception_path(const Field& f) {
    ExceptionPathConfig& x = p_.exception_path;
    const MapReader m(d_, f, {"ring_size", "police"});
    if (auto v = m.get("ring_size")) {
      x.ring_size = d_.integer<std::uint32_t>(*v, 64, 65536);
      if ((x.ring_size & (x.ring_size - 1)) != 0)
        d_.fail(*v, "must be a power of two, got " + std::to_string(x.ring_size));
    }
    if (auto v = m.get("police")) {
      const MapReader police(d_, *v, {"arp", "nd", "bgp", "bfd", "link", "icmp", "other"});
      for (unsigned c = 0; c < kExceptionClasses; ++c) {
        const auto cls = police.get(exception_class_name(ExceptionClass(c)));
        if (!cls) continue;
        const MapReader rate(d_, *cls, {"packets_per_s", "bytes_per_s"});
        if (auto r = rate.get("packets_per_s")) x.police[c].packets_per_s = d_.integer<std::uint64_t>(*r, 0, 10000000);
        if (auto r = rate.get("bytes_per_s"))
          x.police[c].bytes_per_s = d_.integer<std::uint64_t>(*r, 0, 10000000000LL);
      }
    }
  }

  // A TAP carries what is not a service's: without services nothing is.
  // Its frames leave through the port on a TX queue of their own, the one
  // after the owners' (each owner sends on its own queue of a port it
  // answers on).
  void check_taps() const {
    const std::size_t owners = p_.steering.owner_lcores.size();
    for (std::size_t i = 0; i < p_.ports.size(); ++i) {
      const PortConfig& port = p_.ports[i];
      if (port.tap.empty()) continue;
      const Field at = field_or(port_maps_[i], "tap");
      if (p_.steering.services.empty())
        d_.fail(at, "a tap needs services: without them every frame is steered and none is the kernel's");
      if (port.tx_queues < owners + 1)
        d_.fail(field_or(port_maps_[i], "tx_queues"),
                "a port with a tap needs a TX queue for the kernel's frames after the " + std::to_string(owners) +
                    " of the owners: at least " + std::to_string(owners + 1) + ", got " +
                    std::to_string(port.tx_queues));
    }
  }

  ListenAddress listen_address(const Field& f) {
    const std::string text = d_.text(f);
    const std::string problem = listen_address_problem(text);
    if (!problem.empty()) d_.fail(f, problem);
    ListenAddress a;
    parse_listen_address(text, a);
    if (a.port == 0) d_.fail(f, "needs a port (1..65535), got '" + text + "'");
    return a;
  }

  // Health checks probe backends through their delivery, from the address
  // of a port's TAP, to the services' addresses: they need all three, and a
  // TX queue of the action's port after the owners' (the exception path's).
  void decode_health_checks(const Field& f) {
    HealthChecksConfig& x = p_.health_checks;
    const MapReader m(d_, f, {"interval_ms", "timeout_ms", "rise", "fall", "probes_per_s", "probe_udp_port",
                              "targets", "tap_port"});
    x.enabled = true;
    if (auto v = m.get("interval_ms")) x.interval_ms = d_.integer<std::uint32_t>(*v, 10, 60000);
    if (auto v = m.get("timeout_ms")) x.timeout_ms = d_.integer<std::uint32_t>(*v, 1, 60000);
    if (x.timeout_ms >= x.interval_ms)
      d_.fail(field_or(m, "timeout_ms"), "must be below interval_ms (" + std::to_string(x.interval_ms) +
                                             "): a probe is judged before the next one leaves");
    if (auto v = m.get("rise")) x.rise = d_.integer<std::uint32_t>(*v, 1, 100);
    if (auto v = m.get("fall")) x.fall = d_.integer<std::uint32_t>(*v, 1, 100);
    if (auto v = m.get("probes_per_s")) x.probes_per_s = d_.integer<std::uint32_t>(*v, 1, 1000000);
    if (auto v = m.get("probe_udp_port")) x.probe_udp_port = d_.integer<std::uint16_t>(*v, 1, 65535);
    if (p_.action.type != OwnerAction::kForward || p_.steering.backends.empty())
      d_.fail(f, "probes backends: needs action.type forward and a backends list");
    if (p_.action.delivery.mode == DeliveryMode::kAsIs)
      d_.fail(f, "probes go by each backend's delivery: action.delivery.mode as_is names none (l2, ipip or vxlan)");
    if (p_.steering.services.empty())
      d_.fail(f, "probes ask for a service's address: the profile lists no services");
    if (auto v = m.get("tap_port")) {
      const std::string name = d_.text(*v);
      x.tap_port = p_.port_index(name);
      if (x.tap_port < 0) d_.fail(*v, "unknown port '" + name + "' (ports: " + list_names(p_.ports) + ")");
      if (p_.ports[std::size_t(x.tap_port)].tap.empty())
        d_.fail(*v, "port '" + name + "' has no tap: the probes' source is its TAP's address");
    } else {
      for (std::size_t i = 0; i < p_.ports.size() && x.tap_port < 0; ++i)
        if (!p_.ports[i].tap.empty()) x.tap_port = int(i);
      if (x.tap_port < 0)
        d_.fail(f, "probes leave from the appliance's own address, a TAP's: no port has a tap (ports[].tap)");
    }
    if (auto v = m.get("targets")) {
      for (const Field& item : d_.list(*v)) {
        const ListenAddress a = listen_address(item);
        HealthTarget t;
        t.ipv6 = a.ipv6;
        t.udp_port = a.port;
        inet_pton(a.ipv6 ? AF_INET6 : AF_INET, a.host.c_str(), t.address.data());
        if (!service_has(t))
          d_.fail(item, "is no service's address and UDP port: a probe asks for what clients reach");
        for (const HealthTarget& o : x.targets)
          if (o.ipv6 == t.ipv6 && o.address == t.address && o.udp_port == t.udp_port) d_.fail(item, "listed twice");
        x.targets.push_back(t);
      }
      if (x.targets.empty()) d_.fail(*v, "at least one target is required (or leave targets out)");
      if (x.targets.size() > kMaxHealthTargets)
        d_.fail(*v, "at most " + std::to_string(kMaxHealthTargets) + " targets (every round probes each)");
    } else {
      const ServiceConfig& s = p_.steering.services.front();
      if (!s.ipv4.empty()) {
        HealthTarget t;
        std::copy(s.ipv4.front().begin(), s.ipv4.front().end(), t.address.begin());
        t.udp_port = s.udp_ports.front();
        x.targets.push_back(t);
      }
      if (!s.ipv6.empty()) {
        HealthTarget t;
        t.ipv6 = true;
        t.address = s.ipv6.front();
        t.udp_port = s.udp_ports.front();
        x.targets.push_back(t);
      }
    }
    const std::size_t owners = p_.steering.owner_lcores.size();
    const PortConfig& tx = p_.ports[std::size_t(p_.action.tx_port)];
    if (tx.tx_queues < owners + 1)
      d_.fail(field_or(port_maps_[std::size_t(p_.action.tx_port)], "tx_queues"),
              "health_checks send their probes on the action's tx_port, on a TX queue after the " +
                  std::to_string(owners) + " of the owners: at least " + std::to_string(owners + 1) + ", got " +
                  std::to_string(tx.tx_queues));
    const std::uint64_t per_s = std::uint64_t(p_.steering.backends.size()) * x.targets.size() * 1000 / x.interval_ms;
    if (per_s > x.probes_per_s)
      p_.warnings.push_back("health_checks: " + std::to_string(p_.steering.backends.size()) + " backends x " +
                            std::to_string(x.targets.size()) + " targets every " + std::to_string(x.interval_ms) +
                            " ms need " + std::to_string(per_s) + " probes/s, over probes_per_s (" +
                            std::to_string(x.probes_per_s) + "): rounds come late (counted as probes_deferred)");
  }

  bool service_has(const HealthTarget& t) const {
    for (const ServiceConfig& s : p_.steering.services) {
      if (std::find(s.udp_ports.begin(), s.udp_ports.end(), t.udp_port) == s.udp_ports.end()) continue;
      if (t.ipv6) {
        if (std::find(s.ipv6.begin(), s.ipv6.end(), t.address) != s.ipv6.end()) return true;
      } else {
        for (const auto& a : s.ipv4)
          if (std::equal(a.begin(), a.end(), t.address.begin())) return true;
      }
    }
    return false;
  }

  // Peer sync shares what forwarding tables learn about backends: it needs
  // both, and peers of one family.
  void decode_peer_sync(const Field& f) {
    PeerSyncConfig& x = p_.peer_sync;
    const MapReader m(d_, f, {"listen", "peers", "key", "max_peer_share", "entries_per_s", "max_skew_ms",
                              "resync_timeout_ms", "ring_size"});
    x.enabled = true;
    x.listen = listen_address(m.require("listen"));
    const Field peers = m.require("peers");
    for (const Field& item : d_.list(peers)) {
      const ListenAddress a = listen_address(item);
      if (a.ipv6 != x.listen.ipv6) d_.fail(item, "must be of the listen address's family");
      for (const ListenAddress& b : x.peers)
        if (b.host == a.host && b.port == a.port) d_.fail(item, "listed twice");
      if (a.host == x.listen.host && a.port == x.listen.port) d_.fail(item, "is this instance's own listen address");
      x.peers.push_back(a);
    }
    if (x.peers.empty()) d_.fail(peers, "at least one peer is required");
    const Field key = m.require("key");
    const std::vector<std::uint8_t> octets = d_.hex(key, 32, 32);
    std::copy(octets.begin(), octets.end(), x.key.begin());
    if (x.key == std::array<std::uint8_t, 32>{})
      d_.fail(key, "all zeros: anyone could forge entries; generate one (openssl rand -hex 32)");
    if (auto v = m.get("max_peer_share")) {
      x.max_peer_share = d_.real(*v, 0, 1);
      if (x.max_peer_share <= 0) d_.fail(*v, "must be above 0 (and at most 1)");
    }
    if (auto v = m.get("entries_per_s")) x.entries_per_s = d_.integer<std::uint32_t>(*v, 100, 10000000);
    if (auto v = m.get("max_skew_ms")) x.max_skew_ms = d_.integer<std::uint32_t>(*v, 100, 600000);
    if (auto v = m.get("resync_timeout_ms")) x.resync_timeout_ms = d_.integer<std::uint32_t>(*v, 0, 600000);
    if (auto v = m.get("ring_size")) {
      x.ring_size = d_.integer<std::uint32_t>(*v, 64, 1u << 20);
      if ((x.ring_size & (x.ring_size - 1)) != 0) d_.fail(*v, "must be a power of two, got " + std::to_string(x.ring_size));
    }
    if (p_.steering.backends.empty())
      d_.fail(f, "shares what the forwarding tables learn about backends: the profile lists none");
    if (!p_.steering.forwarding.enabled || p_.steering.mode != SteeringMode::kCid)
      d_.fail(f, "shares what the forwarding tables learn: they are off (steering.forwarding.enabled, steering.mode)");
  }

  void decode_backpressure(const std::optional<Field>& f) {
    BackpressureConfig& b = p_.backpressure;
    const std::uint32_t size = p_.rings.size;
    std::optional<Field> high, low;
    if (f) {
      const MapReader m(d_, *f, {"policy", "high_watermark", "low_watermark", "park_timeout_us"});
      if (auto v = m.get("policy")) {
        b.policy = d_.choice(*v, kPolicySpellings);
      }
      high = m.get("high_watermark");
      low = m.get("low_watermark");
      if (auto v = m.get("park_timeout_us")) b.park_timeout_us = d_.integer<std::uint32_t>(*v, 1, 10000000);
    }
    if (high) {
      b.high_watermark = d_.integer<std::uint32_t>(*high, 0, std::numeric_limits<std::uint32_t>::max());
      if (b.high_watermark < 1 || b.high_watermark > size) {
        d_.fail(*high, "must be in 1..rings.size (" + std::to_string(size) + "), got " +
                           std::to_string(b.high_watermark));
      }
    } else {
      b.high_watermark = size;
    }
    if (low) {
      b.low_watermark = d_.integer<std::uint32_t>(*low, 0, std::numeric_limits<std::uint32_t>::max());
      if (b.low_watermark >= b.high_watermark) {
        d_.fail(*low, "must be below high_watermark (" + std::to_string(b.high_watermark) + "), got " +
                          std::to_string(b.low_watermark));
      }
    } else {
      // Half the ring, unless an explicit high watermark sits at or below
      // that; then half of the high watermark.
      b.low_watermark = size / 2 < b.high_watermark ? size / 2 : b.high_watermark / 2;
    }
  }

  void decode_action(const MapReader& root, const std::optional<Field>& f) {
    ActionConfig& a = p_.action;
    std::optional<Field> tx_port, delivery;
    std::optional<MapReader> m;
    if (f) {
      m.emplace(d_, *f, std::initializer_list<std::string_view>{"type", "tx_port", "delivery", "cost_cycles",
                                                                "tx_drain_us", "max_connections", "slots_per_connection",
                                                                "idle_timeout_ms"});
      if (auto v = m->get("type")) {
        a.type = d_.choice(*v, kActionSpellings);
      }
      tx_port = m->get("tx_port");
      delivery = m->get("delivery");
      if (auto v = m->get("cost_cycles")) a.cost_cycles = d_.integer<std::uint32_t>(*v, 0, 1000000);
      if (auto v = m->get("tx_drain_us")) a.tx_drain_us = d_.integer<std::uint32_t>(*v, 1, 100000);
      if (auto v = m->get("max_connections")) a.max_connections = d_.integer<std::uint32_t>(*v, 1, 16u << 20);
      if (auto v = m->get("slots_per_connection")) {
        a.slots_per_connection = d_.integer<std::uint32_t>(*v, 2, 8);
        if (a.slots_per_connection != 2 && a.slots_per_connection != 4 && a.slots_per_connection != 8)
          d_.fail(*v, std::string("must be 2, 4 or 8, got ").append(std::to_string(a.slots_per_connection)));
      }
      if (auto v = m->get("idle_timeout_ms")) a.idle_timeout_ms = d_.integer<std::uint32_t>(*v, 1, 86400000);
    }
    // The forwarding tables forget a connection when its state does.
    p_.steering.forwarding.idle_timeout_ms = a.idle_timeout_ms;
    const std::size_t owners = p_.steering.owner_lcores.size();
    const auto check_tx_queues = [&](std::size_t port, const std::string& role) {
      const PortConfig& pc = p_.ports[port];
      if (pc.tx_queues < owners) {
        d_.fail(field_or(port_maps_[port], "tx_queues"),
                "port '" + pc.name + "' is " + role + " and needs one TX queue per owner lcore (" +
                    std::to_string(owners) + "), has " + std::to_string(pc.tx_queues));
      }
    };
    if (a.type == OwnerAction::kForward) {
      if (!tx_port) {
        const Field where = m ? field_or(*m, "tx_port") : field_or(root, "action.tx_port");
        d_.fail(where, "required when action.type is forward (name the port to send on)");
      }
      const std::string name = d_.text(*tx_port);
      a.tx_port = p_.port_index(name);
      if (a.tx_port < 0) d_.fail(*tx_port, "unknown port '" + name + "' (ports: " + list_names(p_.ports) + ")");
      check_tx_queues(static_cast<std::size_t>(a.tx_port), "the forward tx_port");
      if (delivery) decode_delivery(*delivery);
    } else {
      for (const auto& forward_only : {tx_port, delivery}) {
        if (forward_only) {
          d_.fail(*forward_only, std::string("only allowed when action.type is forward (type is ") +
                                     action_name(a.type) + ")");
        }
      }
      a.tx_port = -1;
      if (a.type == OwnerAction::kReflect) {
        for (std::size_t i = 0; i < p_.ports.size(); ++i) {
          if (p_.ports[i].rx_queues > 0) check_tx_queues(i, "an RX port and action.type is reflect");
        }
      }
    }
  }

  void decode_delivery(const Field& f) {
    DeliveryConfig& d = p_.action.delivery;
    const MapReader m(d_, f,
                      {"mode", "source_ipv4", "source_ipv6", "vxlan_vni", "vxlan_port", "vxlan_mac", "ttl",
                       "icmp_too_big_per_s", "icmp_too_big_per_client_per_s"});
    if (auto v = m.get("mode")) {
      d.mode = d_.choice(*v, kDeliveryModeSpellings);
    }
    if (auto v = m.get("source_ipv4")) d.source_ipv4 = d_.ipv4(*v);
    if (auto v = m.get("source_ipv6")) d.source_ipv6 = d_.ipv6(*v);
    if (auto v = m.get("vxlan_vni")) d.vxlan_vni = d_.integer<std::uint32_t>(*v, 0, kMaxVxlanVni);
    if (auto v = m.get("vxlan_port")) d.vxlan_port = d_.integer<std::uint16_t>(*v, 1, 65535);
    if (auto v = m.get("vxlan_mac")) d.vxlan_mac = d_.mac(*v);
    if (auto v = m.get("ttl")) d.ttl = d_.integer<std::uint8_t>(*v, 1, 255);
    if (auto v = m.get("icmp_too_big_per_s")) d.icmp_too_big_per_s = d_.integer<std::uint32_t>(*v, 0, 1000000);
    if (auto v = m.get("icmp_too_big_per_client_per_s"))
      d.icmp_too_big_per_client_per_s = d_.integer<std::uint32_t>(*v, 0, 1000000);
    if (d.mode == DeliveryMode::kAsIs) return;

    const std::string mode = delivery_mode_name(d.mode);
    const std::vector<BackendConfig>& backends = p_.steering.backends;
    if (backends.empty()) {
      d_.fail(*m.get("mode"), "mode " + mode + " delivers to backends, but the profile lists none (add backends)");
    }
    if (d.mode == DeliveryMode::kL2) return;  // every backend has its mac

    const auto named = [&](std::size_t i) {
      return "backends[" + std::to_string(i) + "] ('" + backends[i].name + "')";
    };
    // The outer header's family is the inner packet's when the backend has
    // an address of that family, else its other one: a backend with an
    // IPv4 address is reached over IPv4 (for some traffic at least), and so
    // for IPv6.
    std::optional<std::size_t> over_ipv4, over_ipv6;
    for (std::size_t i = 0; i < backends.size(); ++i) {
      const BackendConfig& b = backends[i];
      if (!b.ipv4 && !b.ipv6) {
        d_.fail(field_or(backend_maps_[i], "ipv4"),
                "required when action.delivery.mode is " + mode + ": " + named(i) +
                    " needs an address to be reached at (ipv4, ipv6 or both)");
      }
      if (b.ipv4 && !over_ipv4) over_ipv4 = i;
      if (b.ipv6 && !over_ipv6) over_ipv6 = i;
      if (d.mode == DeliveryMode::kVxlan && !b.vxlan_mac && !d.vxlan_mac) {
        d_.fail(field_or(backend_maps_[i], "vxlan_mac"),
                "required when action.delivery.mode is vxlan and action.delivery.vxlan_mac is not given: the "
                "inner destination MAC of " + named(i) + "'s VXLAN device");
      }
    }
    if (over_ipv4 && !d.source_ipv4) {
      d_.fail(field_or(m, "source_ipv4"), "required when action.delivery.mode is " + mode + ": " +
                                              named(*over_ipv4) + " is reached over IPv4 (it has an ipv4 address)");
    }
    if (over_ipv6 && !d.source_ipv6) {
      d_.fail(field_or(m, "source_ipv6"), "required when action.delivery.mode is " + mode + ": " +
                                              named(*over_ipv6) + " is reached over IPv6 (it has an ipv6 address)");
    }
  }

  void decode_polling(const Field& f) {
    const MapReader m(d_, f, {"idle_sleep_us", "idle_polls_before_sleep", "doorbell_spin_us"});
    if (auto v = m.get("idle_sleep_us")) {
      p_.polling.idle_sleep_us = d_.integer<std::uint32_t>(*v, 0, 1000000);
      // A receiver whose every queue is parked naps for idle_sleep_us at once;
      // a nap as long as the park timeout lets every parked packet time out.
      const std::uint32_t timeout = p_.backpressure.park_timeout_us;
      if (p_.backpressure.policy != BackpressurePolicy::kDrop && p_.polling.idle_sleep_us >= timeout) {
        d_.fail(*v, "must be below backpressure.park_timeout_us (" + std::to_string(timeout) + "), got " +
                        std::to_string(p_.polling.idle_sleep_us) +
                        ": a receiver whose queues are all parked naps this long, and its parked packets would "
                        "time out while it sleeps; lower idle_sleep_us or raise park_timeout_us");
      }
    }
    if (auto v = m.get("idle_polls_before_sleep")) {
      p_.polling.idle_polls_before_sleep = d_.integer<std::uint32_t>(*v, 1, 1000000000);
    }
    if (auto v = m.get("doorbell_spin_us")) {
      p_.polling.doorbell_spin_us = d_.integer<std::uint32_t>(*v, 0, 1000000);
    } else {
      p_.polling.doorbell_spin_us = p_.polling.idle_sleep_us;
    }
  }

  void decode_stats(const Field& f) {
    const MapReader m(d_, f, {"period_ms", "json"});
    if (auto v = m.get("period_ms")) {
      p_.stats.period_ms = d_.integer<std::uint32_t>(*v, 0, 3600000);
      if (p_.stats.period_ms != 0 && p_.stats.period_ms < 100) {
        d_.fail(*v, "must be 0 (off) or in 100..3600000, got " + std::to_string(p_.stats.period_ms));
      }
    }
    if (auto v = m.get("json")) p_.stats.json_path = d_.text(*v);
  }

  void decode_telemetry(const Field& f) {
    const MapReader m(d_, f, {"prometheus_listen"});
    if (auto v = m.get("prometheus_listen")) {
      std::string text = d_.text(*v);
      if (!text.empty()) {
        const std::string problem = listen_address_problem(text);
        if (!problem.empty()) d_.fail(*v, problem);
      }
      p_.telemetry.prometheus_listen = std::move(text);
    }
  }

  void decode_drain(const Field& f) {
    const MapReader m(d_, f, {"grace_s"});
    if (auto v = m.get("grace_s")) p_.drain.grace_s = d_.real(*v, 0, 3600);
  }

  const Decoder& d_;
  Profile& p_;
  std::vector<MapReader> port_maps_;  // parallel to p_.ports, for cross-check positions
  std::vector<MapReader> backend_maps_;  // parallel to p_.steering.backends, likewise
  std::optional<Field> servers_;         // steering.servers, when given
  std::optional<Field> backend_table_size_;  // steering.backend_table_size, when given
  Field fallback_key_at_;                // steering.fallback.key, or where it would go
};

}  // namespace

void decode_profile(const Decoder& decoder, const YAML::Node& root, Profile& profile) {
  ProfileDecoder(decoder, profile).decode(root);
}

}  // namespace qs::config
