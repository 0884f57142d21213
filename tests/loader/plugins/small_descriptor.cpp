/* FAULT 9: descriptor struct_size too small. It claims to end before
 * `destroy` (struct_size = offsetof(memplan_plugin_descriptor, destroy)),
 * i.e. smaller than any ABI 1.0 descriptor; all other fields are valid. */
#include <memplan/plugin_abi.h>

#include <stddef.h>

extern "C" {

static int loader_small_create(const memplan_host* host, memplan_ctx* ctx, void** state) {
  (void)host;
  (void)ctx;
  *state = 0;
  return MEMPLAN_OK;
}

static int loader_small_apply(void* state, const memplan_host* host, memplan_ctx* ctx) {
  (void)state;
  (void)host;
  (void)ctx;
  return MEMPLAN_OK;
}

static void loader_small_destroy(void* state) { (void)state; }

static const memplan_plugin_descriptor loader_small_descriptor = {
    offsetof(memplan_plugin_descriptor, destroy), /* struct_size: the fault */
    MEMPLAN_ABI_MAJOR,
    MEMPLAN_ABI_MINOR,
    "loader-small-descriptor",
    "1.0.0",
    "Loader test: descriptor struct_size too small",
    MEMPLAN_KIND_OPTIMIZER,
    MEMPLAN_PHASE_OPTIMIZER,
    0,
    0,
    sizeof(memplan_option_spec),
    loader_small_create,
    loader_small_apply,
    loader_small_destroy,
};

MEMPLAN_EXPORT const memplan_plugin_descriptor* memplan_plugin_v1(void) { return &loader_small_descriptor; }

}  // extern "C"
