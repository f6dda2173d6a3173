// A deployment profile: the operator's whole interface to quicsteer.
//
// load_profile() decodes one YAML file strictly (unknown keys, wrong types and
// out-of-range values are errors) and cross-checks it (every RX queue polled
// by exactly one lcore, at least one owner, watermarks inside the ring, ...)
// before anything touches EAL or a device. Every error is a ProfileError whose
// message names the file, line, column and key.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dataplane/config/file_descriptor.h"
#include "dataplane/config/listen_address.h"
#include "dataplane/config/modes.h"
#include "steering/exception_class.h"
#include "steering/steering_config.h"

namespace qs {

// The most owner lcores a profile may have: the receive loop groups each
// burst by owner in arrays of this size (kMaxOwners, mbuf_classifier.h).
inline constexpr unsigned kMaxOwnerLcores = 64;
// The largest profile file load_profile() reads (the shipped ones are a few
// KiB; 65,533 servers fit in well under this).
inline constexpr std::size_t kMaxProfileBytes = 4u << 20;

enum class FlowControl { kNone, kRxPause, kTxPause, kFull };  // 802.3x

struct PortConfig {
  std::string name;    // how lcores and the action refer to the port
  std::string device;  // PCI address ("0000:3b:00.0") or vdev devargs ("net_ring0", "net_pcap0,rx_pcap=x.pcap")
  std::uint16_t rx_queues = 1;
  std::uint16_t tx_queues = 1;
  std::uint16_t rx_descriptors = 1024;
  std::uint16_t tx_descriptors = 1024;
  bool rss = true;
  std::uint16_t mtu = 1500;
  FlowControl flow_control = FlowControl::kNone;
  bool rx_drop_en = false;  // per-queue drop: isolates queues, but no PAUSE
  // Receive frames for every MAC (a NIC filters the others out otherwise).
  // Off unless asked for: an appliance receives its own MAC's frames,
  // broadcast and multicast.
  bool promiscuous = false;
  // The kernel interface of the port's exception path (a net_tap device
  // quicsteer creates with the port's MAC): what arrives and is no service's
  // goes there, what the kernel sends there leaves through the port. Empty:
  // none. Only with services.
  std::string tap;

  bool is_vdev() const { return device.rfind("net_", 0) == 0; }
};

struct MempoolConfig {
  std::uint32_t mbufs = 16383;  // 2^n - 1 is the mempool's sweet spot
  std::uint32_t cache = 256;    // per-lcore cache
  std::uint16_t data_room = 2176;  // RTE_MBUF_DEFAULT_BUF_SIZE
};

struct RxQueueRef {
  std::uint16_t port = 0;   // index into Profile::ports
  std::uint16_t queue = 0;
  bool operator==(const RxQueueRef&) const = default;
};

struct LcoreConfig {
  unsigned id = 0;              // EAL lcore id
  std::vector<RxQueueRef> rx;   // queues this lcore polls (may be empty for a pure owner)
  bool owner = false;           // runs the connection stage for a shard of connections
  // This owner's synthetic per-packet cost, overriding action.cost_cycles:
  // lets an experiment (or a test) make one owner slow.
  std::optional<std::uint32_t> cost_cycles;
};

struct RingConfig {
  std::uint32_t size = 1024;  // slots per producer->owner ring, power of two
  std::uint16_t burst = 32;   // RX, hand-off and TX burst
};

// The exception path (dataplane/fastpath/exception_path.h): per class, what
// each port lets through to its kernel (by ExceptionClass).
struct ExceptionPathConfig {
  std::uint32_t ring_size = 1024;  // per receiving lcore, control and bulk each; power of two
  std::array<PoliceRate, kExceptionClasses> police = default_police();
  static constexpr std::array<PoliceRate, kExceptionClasses> default_police() {
    return {{
        {1000, 1000000},     // arp
        {1000, 1000000},     // nd
        {10000, 20000000},   // bgp: a full table's updates at about 150 Mbit/s
        {2000, 1000000},     // bfd: 20 sessions at 10 ms, with room
        {100, 100000},       // link: LACP, LLDP
        {500, 500000},       // icmp
        {1000, 2000000},     // other
    }};
  }
};

// Peers that share what their forwarding tables learn (issue 37;
// dataplane/runtime/peer_sync.h): off unless the profile has `peer_sync`.
struct PeerSyncConfig {
  bool enabled = false;
  ListenAddress listen;                // where this instance's sync socket binds
  std::vector<ListenAddress> peers;    // the other instances' listen addresses
  std::array<std::uint8_t, 32> key{};  // shared by every peer: authenticates, and keys the tables' hash
  // New entries one peer may add per idle timeout, as a share of
  // steering.forwarding.max_entries.
  double max_peer_share = 0.25;
  // Entries a peer may send per second (more are refused as rate_limited),
  // and the most this instance sends each peer per second.
  std::uint32_t entries_per_s = 20000;
  std::uint32_t max_skew_ms = 10000;       // a message sent longer ago (or later) than this is stale
  std::uint32_t resync_timeout_ms = 5000;  // a start waits this long for a peer's copy before it reports healthy
  std::uint32_t ring_size = 4096;          // per receiving lcore: learned entries waiting for the sync thread
};

// Backend health checks (issue 39; dataplane/runtime/health_checks.h): off
// unless the profile has `health_checks`. Each backend is probed through its
// own delivery with a QUIC packet of a reserved version, which any QUIC
// server answers with Version Negotiation.
struct HealthTarget {
  bool ipv6 = false;
  std::array<std::uint8_t, 16> address{};  // IPv4 in the first 4 octets
  std::uint16_t udp_port = 0;
};
inline constexpr std::size_t kMaxHealthTargets = 8;
// "10.0.0.1:443" or "[2001:db8::1]:443", as the profile spells a target.
std::string health_target_text(const HealthTarget& t);
struct HealthChecksConfig {
  bool enabled = false;
  std::uint32_t interval_ms = 1000;  // each backend is probed once per interval
  std::uint32_t timeout_ms = 500;    // a probe unanswered this long failed
  std::uint32_t rise = 2;            // answered probe rounds in a row that mark a down backend up
  std::uint32_t fall = 3;            // failed probe rounds in a row that mark an up backend down
  std::uint32_t probes_per_s = 10000;  // every backend and target together
  std::uint16_t probe_udp_port = 61000;  // the probes' source port: answers come back to it
  // The service addresses each probe asks for; a round passes when every
  // one answered. The loader fills the default (the first service's first
  // address of each family, its first UDP port).
  std::vector<HealthTarget> targets;
  int tap_port = -1;  // index into Profile::ports: the port whose TAP's address is the probes' source
};

struct BackpressureConfig {
  BackpressurePolicy policy = BackpressurePolicy::kPark;
  // Ring occupancy that stops hand-off, and occupancy at or below which parked
  // packets go back. The loader always fills both (defaults: the ring size,
  // and half of the lower of ring size and high watermark).
  std::uint32_t high_watermark = 0;
  std::uint32_t low_watermark = 0;
  std::uint32_t park_timeout_us = 10000;
};

struct ActionConfig {
  OwnerAction type = OwnerAction::kForward;
  int tx_port = -1;                 // index into Profile::ports (forward only)
  DeliveryConfig delivery;          // forward only
  std::uint32_t cost_cycles = 0;    // synthetic per-packet work, for experiments
  std::uint32_t tx_drain_us = 100;  // flush a partial TX burst after this long
  std::uint32_t max_connections = 65536;  // per owner shard
  // Slots per connection in each of the shard's tables (2, 4 or 8): memory
  // for speed, ConnectionTable's constructor says how. The default is
  // ConnectionTable::kDefaultSlotsPerConnection (a static_assert in
  // dataplane.cpp keeps them one).
  std::uint32_t slots_per_connection = 4;
  std::uint32_t idle_timeout_ms = 30000;  // connection state expiry
};

struct PollingConfig {
  // After this many empty polls in a row an lcore sleeps idle_sleep_us, so that
  // more lcores than CPUs (tests, CI, demo) still progress. 0 = never sleep.
  std::uint32_t idle_sleep_us = 0;
  std::uint32_t idle_polls_before_sleep = 256;
  // An owner that polls no RX queue sleeps on its doorbell, once idle this
  // long as well: waking it costs the lcore that enqueues for it an eventfd
  // write, so short gaps are spun through. The spin takes the CPU from
  // whatever shares it. Unset in the profile: idle_sleep_us.
  std::uint32_t doorbell_spin_us = 0;
};

// Operating it live. Telemetry commands (rte_telemetry, /quicsteer/...) are
// always there; the Prometheus endpoint only when an address is given.
struct TelemetryConfig {
  // "ADDRESS:PORT" (IPv4 dotted quad, or [IPv6]) the Prometheus text endpoint
  // listens on, served by a control-plane thread; empty = off.
  std::string prometheus_listen;
};

// Stopping as a service: on SIGTERM quicsteer reports itself unhealthy
// ("draining", so that whatever announces its route withdraws it), keeps
// forwarding for grace_s while the routers move the traffic away, then stops
// as on SIGINT (which never waits).
struct DrainConfig {
  double grace_s = 0;  // 0 = stop at once
};

struct StatsConfig {
  std::uint32_t period_ms = 1000;  // live table period; 0 = no table
  std::string json_path;           // summary written at exit; empty = none
};

struct Profile {
  std::string path;
  std::vector<std::string> eal;  // EAL arguments used when none are given on the command line
  std::vector<PortConfig> ports;
  MempoolConfig mempool;
  std::vector<LcoreConfig> lcores;
  RingConfig rings;
  SteeringConfig steering;  // steering.owner_lcores is derived from lcores
  // steering.fallback.rekey_on_reload: a reload to this profile may change
  // steering.fallback.key (which moves connections whose CIDs are not
  // routable to other owners). Read from the profile being loaded.
  bool rekey_fallback_on_reload = false;
  BackpressureConfig backpressure;
  ExceptionPathConfig exception_path;
  PeerSyncConfig peer_sync;
  HealthChecksConfig health_checks;
  ActionConfig action;
  PollingConfig polling;
  StatsConfig stats;
  TelemetryConfig telemetry;
  DrainConfig drain;
  double duration_s = 0;  // 0 = run until SIGINT/SIGTERM
  // What the operator should hear about a profile that loads (an all-zero
  // fallback key on vdev ports); load_profile_or_report prints each to stderr.
  std::vector<std::string> warnings;

  int port_index(const std::string& name) const;  // -1 when absent
};

class ProfileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The profile's spelling of each setting (as --check prints it).
const char* flow_control_name(FlowControl fc);
const char* policy_name(BackpressurePolicy p);
const char* action_name(OwnerAction a);
const char* delivery_mode_name(DeliveryMode m);
const char* backend_state_name(BackendState s);

// Reads, decodes and validates; throws ProfileError. Only a regular file of
// at most kMaxProfileBytes is read (a FIFO, a device or a directory is refused
// before any read).
Profile load_profile(const std::string& path);
// The same from a file already open for reading; `name` stands for the file in
// messages.
Profile load_profile(FileDescriptor file, const std::string& name);
// A number of seconds as the profile spells one (duration_s): decimal, no
// hex, nan or inf, within [min, max]. Throws ProfileError naming `what`.
double parse_seconds(const std::string& text, const std::string& what, double min, double max);
// For command-line programs: the profile (its warnings printed to stderr),
// or nothing after the error was printed to stderr.
std::optional<Profile> load_profile_or_report(const std::string& path);
// Same as load_profile, from text; `name` stands for the file in messages.
Profile parse_profile(const std::string& yaml_text, const std::string& name);
// How a key is shown to people: "sha256:" and the first 8 hex digits of the
// SHA-256 of its 16 octets (`openssl rand -hex 16` output X is checked with
// `echo X | xxd -r -p | sha256sum | cut -c1-8`). Never the key.
std::string key_fingerprint(const std::array<std::uint8_t, 16>& key);
std::string key_fingerprint(const std::array<std::uint8_t, 32>& key);  // peer_sync.key: the same over its 32 octets

// How dump_profile writes the QUIC-LB keys and the fallback key. A dump is
// shown to people (`quicsteer --check`, /quicsteer/profile, the reload
// diff's refusals), so by default it holds fingerprints, which load_profile
// refuses; kInFull is the profile as load_profile reads it back, for
// writing a profile file (the round-trip tests hold dump and loader to it).
enum class DumpKeys { kFingerprints, kInFull };

// What the data path steers, in one line for people (--check, the start-up
// log): "services: web 192.0.2.10 udp 443; ..." or, without services,
// that every UDP datagram is.
std::string services_summary(const Profile& profile);

// The resolved profile, every default filled in, as YAML that load_profile
// accepts (with kInFull; with fingerprints, all but the keys).
std::string dump_profile(const Profile& profile, DumpKeys keys = DumpKeys::kFingerprints);

// Whether a running data path built from `running` can switch to `next`
// without a restart: only the steering section's QUIC-LB configurations and
// server routes, the backends (added, removed, any field changed), the
// backend hash's steering.backend_table_size and action.delivery may change (and steering.fallback.key when `next` sets
// steering.fallback.rekey_on_reload). Returns why not, naming the first key
// that differs ("rings.size: ..."), or nothing when the reload can go ahead.
std::optional<std::string> reload_refusal(const Profile& running, const Profile& next);

}  // namespace qs
