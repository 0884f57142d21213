/* FAULT 2: ABI major mismatch. A hand-written C-style plugin whose descriptor
 * says abi_major = 2 (built against a future, incompatible SDK). Everything
 * else is well formed, so only the ABI check can reject it. */
#include <memplan/plugin_abi.h>

extern "C" {

static int loader_abi2_create(const memplan_host* host, memplan_ctx* ctx, void** state) {
  (void)host;
  (void)ctx;
  *state = 0;
  return MEMPLAN_OK;
}

static int loader_abi2_apply(void* state, const memplan_host* host, memplan_ctx* ctx) {
  (void)state;
  (void)host;
  (void)ctx;
  return MEMPLAN_OK;
}

static void loader_abi2_destroy(void* state) { (void)state; }

static const memplan_plugin_descriptor loader_abi2_descriptor = {
    sizeof(memplan_plugin_descriptor),
    2, /* abi_major: the fault */
    0, /* abi_minor */
    "loader-abi2",
    "2.0.0",
    "Loader test: built for plugin ABI 2.0",
    MEMPLAN_KIND_OPTIMIZER,
    MEMPLAN_PHASE_OPTIMIZER,
    0, /* options */
    0, /* option_count */
    sizeof(memplan_option_spec),
    loader_abi2_create,
    loader_abi2_apply,
    loader_abi2_destroy,
};

MEMPLAN_EXPORT const memplan_plugin_descriptor* memplan_plugin_v1(void) { return &loader_abi2_descriptor; }

}  // extern "C"
