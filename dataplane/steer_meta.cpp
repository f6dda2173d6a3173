#include "dataplane/steer_meta.h"

#include <rte_errno.h>

#include <stdexcept>
#include <string>

namespace qs {

int g_steer_meta_offset = -1;

void register_steer_meta() {
  if (g_steer_meta_offset >= 0) return;
  static const rte_mbuf_dynfield desc = {"quicsteer_steer_meta", sizeof(SteerMeta), alignof(SteerMeta), 0};
  const int offset = rte_mbuf_dynfield_register(&desc);
  if (offset < 0)
    throw std::runtime_error(std::string("cannot register the mbuf dynamic field: ") + rte_strerror(rte_errno));
  g_steer_meta_offset = offset;
}

}  // namespace qs
