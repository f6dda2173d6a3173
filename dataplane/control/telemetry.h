// The /quicsteer/* rte_telemetry commands (dpdk-telemetry.py, or any client
// of EAL's telemetry socket): totals, per lcore, queue, ring and port, drops
// by reason, the steering generation, health, the resolved profile, and a
// steering reload. They run on DPDK's telemetry threads and read only what
// the control loop published in a LiveView: the data path is never touched.
#pragma once

#include <memory>

#include "dataplane/control/live_view.h"

namespace qs {

// Registers the commands (once per process; EAL must be up) and points them
// at `view`; nullptr detaches them (they then answer an error).
void attach_telemetry(std::shared_ptr<LiveView> view);

}  // namespace qs
