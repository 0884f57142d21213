/* FAULT 7: a raw C plugin whose create() returns MEMPLAN_ERROR without
 * calling host->report_error, so the host has no message of its own. */
#include <memplan/plugin_abi.h>

extern "C" {

static int loader_silent_create(const memplan_host* host, memplan_ctx* ctx, void** state) {
  (void)host;
  (void)ctx;
  *state = 0;
  return MEMPLAN_ERROR; /* the fault: no report_error first */
}

static int loader_silent_apply(void* state, const memplan_host* host, memplan_ctx* ctx) {
  (void)state;
  (void)host;
  (void)ctx;
  return MEMPLAN_OK;
}

static void loader_silent_destroy(void* state) { (void)state; }

static const memplan_plugin_descriptor loader_silent_descriptor = {
    sizeof(memplan_plugin_descriptor),
    MEMPLAN_ABI_MAJOR,
    MEMPLAN_ABI_MINOR,
    "loader-silent-error",
    "1.0.0",
    "Loader test: create() fails without a message",
    MEMPLAN_KIND_OPTIMIZER,
    MEMPLAN_PHASE_OPTIMIZER,
    0,
    0,
    sizeof(memplan_option_spec),
    loader_silent_create,
    loader_silent_apply,
    loader_silent_destroy,
};

MEMPLAN_EXPORT const memplan_plugin_descriptor* memplan_plugin_v1(void) { return &loader_silent_descriptor; }

}  // extern "C"
