/*
 * A minimal memplan host in C, for the compatibility tests: the install suite
 * compiles it with clang and loads a plugin library that g++ built, so the
 * plugin's C++ (its SDK layer, its exceptions, its standard library) runs
 * under a host built by another compiler, in another language, that knows
 * only <memplan/plugin_abi.h>. This is the reverse of the main direction the
 * suite tests (clang-built plugins in the g++-built memplan).
 *
 *   mini_host LIBRARY [IMPLEMENTATION]
 *
 * Loads LIBRARY (dlopen, RTLD_NOW | RTLD_LOCAL, as memplan does), checks the
 * descriptor's ABI version, runs create/apply/destroy over a one-item plan (a
 * params-only model of 10^9 trainable parameters, 2-byte weights, 4-byte
 * optimizer states), with option "implementation" = IMPLEMENTATION when given,
 * and prints the plan. Exit status 0 on success, 1 when the plugin reported an
 * error (printed), 2 when the library could not be used.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memplan/plugin_abi.h>

#define MAX_ITEMS 16
#define MAX_NAMES 64

struct memplan_ctx {
  const char *implementation; /* the one option this host knows, or NULL */
  memplan_model model;
  memplan_workload workload;
  memplan_item items[MAX_ITEMS];
  size_t item_count;
  const char *names[MAX_NAMES]; /* interned names and attribute keys, never freed */
  size_t name_count;
  char error[512];
};

static int absent_int(memplan_ctx *ctx, const char *key, int64_t *out) {
  (void)ctx, (void)key, (void)out;
  return MEMPLAN_ABSENT;
}
static int absent_double(memplan_ctx *ctx, const char *key, double *out) {
  (void)ctx, (void)key, (void)out;
  return MEMPLAN_ABSENT;
}
static int absent_bool(memplan_ctx *ctx, const char *key, int *out) {
  (void)ctx, (void)key, (void)out;
  return MEMPLAN_ABSENT;
}
static const char *option_string(memplan_ctx *ctx, const char *key) {
  return strcmp(key, "implementation") == 0 ? ctx->implementation : NULL;
}
static void report_error(memplan_ctx *ctx, const char *option_key, const char *message) {
  if (ctx->error[0] != '\0') return; /* keep the first, as memplan does */
  snprintf(ctx->error, sizeof ctx->error, "option '%s': %s", option_key ? option_key : "(none)", message);
}
static const memplan_model *model(memplan_ctx *ctx) { return &ctx->model; }
static const memplan_workload *workload(memplan_ctx *ctx) { return &ctx->workload; }
static size_t item_count(memplan_ctx *ctx) { return ctx->item_count; }

/* The reader copies min(struct_size, its own size), zero-filling the rest. */
static void copy_item(memplan_item *to, const memplan_item *from) {
  memplan_item copy;
  size_t size = from->struct_size < sizeof copy ? from->struct_size : sizeof copy;
  memset(&copy, 0, sizeof copy);
  memcpy(&copy, from, size);
  copy.struct_size = sizeof copy;
  *to = copy;
}
static char *copy_name(const char *name) {
  size_t length = strlen(name) + 1;
  char *copy = malloc(length);
  if (copy != NULL) memcpy(copy, name, length);
  return copy;
}
/* One copy per distinct name, kept while the host runs (ABI 1.1 intern). */
static const char *intern(memplan_ctx *ctx, const char *name) {
  if (name == NULL || name[0] == '\0') return NULL;
  for (size_t i = 0; i < ctx->name_count; ++i)
    if (strcmp(ctx->names[i], name) == 0) return ctx->names[i];
  if (ctx->name_count == MAX_NAMES) return NULL;
  char *copy = copy_name(name);
  if (copy != NULL) ctx->names[ctx->name_count++] = copy;
  return copy;
}
static int get_item(memplan_ctx *ctx, size_t index, memplan_item *out) {
  if (index >= ctx->item_count) return MEMPLAN_ERROR;
  uint32_t size = out->struct_size < sizeof *out ? out->struct_size : (uint32_t)sizeof *out;
  memcpy(out, &ctx->items[index], size);
  out->struct_size = size;
  return MEMPLAN_OK;
}
static int set_item(memplan_ctx *ctx, size_t index, const memplan_item *item) {
  if (index >= ctx->item_count || item->name == NULL) return MEMPLAN_ERROR;
  const char *name = intern(ctx, item->name);
  if (name == NULL) return MEMPLAN_ERROR;
  copy_item(&ctx->items[index], item);
  ctx->items[index].name = name;
  return MEMPLAN_OK;
}
static int add_item(memplan_ctx *ctx, const memplan_item *item) {
  if (ctx->item_count == MAX_ITEMS || item->name == NULL) return MEMPLAN_ERROR;
  const char *name = intern(ctx, item->name);
  if (name == NULL) return MEMPLAN_ERROR;
  copy_item(&ctx->items[ctx->item_count], item);
  ctx->items[ctx->item_count++].name = name;
  return MEMPLAN_OK;
}
static int remove_item(memplan_ctx *ctx, size_t index) {
  if (index >= ctx->item_count) return MEMPLAN_ERROR;
  memmove(&ctx->items[index], &ctx->items[index + 1], (ctx->item_count - index - 1) * sizeof ctx->items[0]);
  --ctx->item_count;
  return MEMPLAN_OK;
}
static int set_attr_int(memplan_ctx *ctx, const char *key, int64_t value) {
  (void)ctx, (void)key, (void)value;
  return MEMPLAN_OK;
}
static int set_attr_double(memplan_ctx *ctx, const char *key, double value) {
  (void)ctx, (void)key, (void)value;
  return MEMPLAN_OK;
}
static int set_attr_string(memplan_ctx *ctx, const char *key, const char *value) {
  (void)ctx, (void)key, (void)value;
  return MEMPLAN_OK;
}
/* The precision plugin's dtypes, as mixed precision sets them. */
static int get_attr_double(memplan_ctx *ctx, const char *key, double *out) {
  (void)ctx;
  if (strcmp(key, "dtype.optimizer_states") == 0 || strcmp(key, "dtype.master_weights") == 0) *out = 4;
  else if (strncmp(key, "dtype.", 6) == 0) *out = 2;
  else return MEMPLAN_ABSENT;
  return MEMPLAN_OK;
}
static const char *get_attr_string(memplan_ctx *ctx, const char *key) {
  (void)ctx, (void)key;
  return NULL;
}

/* ABI 1.1: the plan array in place, bulk appends, attribute handles (an
 * attribute's handle is its key's index among the interned names), timeline. */
static memplan_item *plan_items(memplan_ctx *ctx, size_t *count, size_t *stride) {
  *count = ctx->item_count;
  *stride = sizeof ctx->items[0];
  return ctx->items;
}
static int add_items(memplan_ctx *ctx, const memplan_item *items, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (add_item(ctx, &items[i]) != MEMPLAN_OK) return MEMPLAN_ERROR;
  return MEMPLAN_OK;
}
static int32_t attr_handle(memplan_ctx *ctx, const char *key) {
  const char *name = intern(ctx, key);
  for (size_t i = 0; name != NULL && i < ctx->name_count; ++i)
    if (ctx->names[i] == name) return (int32_t)i;
  return -1;
}
static int get_attr_double_at(memplan_ctx *ctx, int32_t handle, double *out) {
  if (handle < 0 || (size_t)handle >= ctx->name_count) return MEMPLAN_ERROR;
  return get_attr_double(ctx, ctx->names[handle], out);
}
static int get_attr_int_at(memplan_ctx *ctx, int32_t handle, int64_t *out) {
  (void)out;
  return handle < 0 || (size_t)handle >= ctx->name_count ? MEMPLAN_ERROR : MEMPLAN_ABSENT;
}
static int set_attr_int_at(memplan_ctx *ctx, int32_t handle, int64_t value) {
  (void)value;
  return handle < 0 || (size_t)handle >= ctx->name_count ? MEMPLAN_ERROR : MEMPLAN_OK;
}
static int set_attr_double_at(memplan_ctx *ctx, int32_t handle, double value) {
  (void)value;
  return handle < 0 || (size_t)handle >= ctx->name_count ? MEMPLAN_ERROR : MEMPLAN_OK;
}
static int timeline(memplan_ctx *ctx, memplan_timeline *out) {
  (void)out;
  snprintf(ctx->error, sizeof ctx->error, "this host computes no timeline");
  return MEMPLAN_ERROR;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: mini_host LIBRARY [IMPLEMENTATION]\n");
    return 2;
  }
  void *library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    fprintf(stderr, "dlopen failed: %s\n", dlerror());
    return 2;
  }
  memplan_entry_point_fn entry = (memplan_entry_point_fn)dlsym(library, MEMPLAN_ENTRY_POINT);
  const memplan_plugin_descriptor *descriptor = entry != NULL ? entry() : NULL;
  if (descriptor == NULL || descriptor->abi_major != MEMPLAN_ABI_MAJOR || descriptor->abi_minor > MEMPLAN_ABI_MINOR) {
    fprintf(stderr, "not a memplan plugin of ABI %d.%d\n", MEMPLAN_ABI_MAJOR, MEMPLAN_ABI_MINOR);
    return 2;
  }
  printf("plugin %s %s, ABI %u.%u, kind %d, phase %d\n", descriptor->name, descriptor->version,
         (unsigned)descriptor->abi_major, (unsigned)descriptor->abi_minor, (int)descriptor->kind,
         (int)descriptor->phase);

  memplan_host host;
  memset(&host, 0, sizeof host);
  host.struct_size = sizeof host;
  host.abi_major = MEMPLAN_ABI_MAJOR;
  host.abi_minor = MEMPLAN_ABI_MINOR;
  host.option_int = absent_int;
  host.option_double = absent_double;
  host.option_bool = absent_bool;
  host.option_string = option_string;
  host.report_error = report_error;
  host.model = model;
  host.workload = workload;
  host.item_count = item_count;
  host.get_item = get_item;
  host.set_item = set_item;
  host.add_item = add_item;
  host.remove_item = remove_item;
  host.set_attr_int = set_attr_int;
  host.get_attr_int = absent_int;
  host.set_attr_double = set_attr_double;
  host.get_attr_double = get_attr_double;
  host.set_attr_string = set_attr_string;
  host.get_attr_string = get_attr_string;
  host.intern = intern;
  host.plan_items = plan_items;
  host.add_items = add_items;
  host.attr_handle = attr_handle;
  host.get_attr_int_at = get_attr_int_at;
  host.set_attr_int_at = set_attr_int_at;
  host.get_attr_double_at = get_attr_double_at;
  host.set_attr_double_at = set_attr_double_at;
  host.timeline = timeline;

  static memplan_ctx ctx; /* zero-initialized */
  ctx.implementation = argc == 3 ? argv[2] : NULL;
  ctx.model.struct_size = sizeof ctx.model;
  ctx.model.params = 1e9;
  ctx.workload.struct_size = sizeof ctx.workload;
  ctx.workload.mode = MEMPLAN_MODE_TRAIN;
  ctx.workload.micro_batch = 1;
  ctx.workload.grad_accum = 1;
  ctx.workload.gpu_count = 1;
  memplan_item weights;
  memset(&weights, 0, sizeof weights);
  weights.struct_size = sizeof weights;
  weights.name = intern(&ctx, "parameters");
  weights.role = MEMPLAN_ROLE_WEIGHTS;
  weights.lifetime = MEMPLAN_LIFETIME_PERSISTENT;
  weights.device = MEMPLAN_DEVICE_GPU;
  weights.layer = -1;
  weights.count = 1;
  weights.flags = MEMPLAN_ITEM_TRAINABLE;
  weights.elements = 1e9;
  weights.bytes_per_element = 2;
  add_item(&ctx, &weights);

  void *state = NULL;
  int status = descriptor->create(&host, &ctx, &state);
  if (status == MEMPLAN_OK) status = descriptor->apply(state, &host, &ctx);
  if (status == MEMPLAN_OK || state != NULL) descriptor->destroy(state);
  if (status != MEMPLAN_OK) {
    printf("error (status %d): %s\n", status, ctx.error);
    return 1;
  }
  for (size_t i = 0; i < ctx.item_count; ++i) {
    const memplan_item *item = &ctx.items[i];
    printf("item %s role %d lifetime %d device %d elements %.0f bytes_per_element %g\n", item->name, (int)item->role,
           (int)item->lifetime, (int)item->device, item->elements, item->bytes_per_element);
  }
  return 0;
}
