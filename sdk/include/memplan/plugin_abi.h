/*
 * memplan plugin ABI, version 1.3: 1.0 plus the functions and fields marked
 * ABI 1.1, 1.2 and 1.3, each added at the end of its struct (or, for 1.3's
 * parameter class, after the last one).
 *
 * This is the only contract between the memplan host and a plugin library.
 * Plugins are built by other teams, with other compilers, at other times, so:
 *   - only C types cross this boundary (no C++ standard-library type, no
 *     exception, no RTTI);
 *   - every struct that may grow carries its own size in `struct_size`; the
 *     reader copies min(struct_size, sizeof(its own struct)) and zero-fills the rest;
 *   - structs and the host function table only ever grow at their end;
 *   - whoever allocates a string frees it: strings the host hands out stay
 *     valid until the next call that changes the same object, strings the
 *     plugin hands in are copied by the host before the call returns.
 *
 * Compatibility rule (checked by the host when it loads a library):
 *   plugin ABI major == host ABI major, and plugin ABI minor <= host ABI minor.
 *
 * Each library exports one function named by MEMPLAN_ENTRY_POINT that returns
 * a pointer to a static descriptor. Most authors never write this by hand: the
 * C++ layer in <memplan/sdk.hpp> generates it from one macro.
 */
#ifndef MEMPLAN_PLUGIN_ABI_H
#define MEMPLAN_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MEMPLAN_ABI_MAJOR 1
#define MEMPLAN_ABI_MINOR 3
#define MEMPLAN_ENTRY_POINT "memplan_plugin_v1"

#if defined(_WIN32)
#define MEMPLAN_EXPORT __declspec(dllexport)
#else
#define MEMPLAN_EXPORT __attribute__((visibility("default")))
#endif

/* Return codes of plugin callbacks and host functions. */
#define MEMPLAN_OK 0
#define MEMPLAN_ABSENT 1 /* an optional value (option, attribute) is not set */
#define MEMPLAN_ERROR (-1)

/* Plugin kinds: what a scenario table may name with `use`. */
#define MEMPLAN_KIND_OPTIMIZER 1   /* [optimizer]   */
#define MEMPLAN_KIND_PRECISION 2   /* [precision]   */
#define MEMPLAN_KIND_ACTIVATIONS 3 /* [activations] */
#define MEMPLAN_KIND_STRATEGY 4    /* [[strategy]]  */

/*
 * Phases: the host applies plugins in increasing phase order, and in scenario
 * order within one phase. A plugin declares its phase in its descriptor.
 * Values are spaced so later ABI minors can insert phases between them.
 */
#define MEMPLAN_PHASE_TRAINABILITY 100 /* which weights train (full, freeze, adapters) */
#define MEMPLAN_PHASE_PRECISION 200    /* dtypes per role; gradients, master weights */
#define MEMPLAN_PHASE_LAYOUT 300       /* split items across ranks (TP, PP, ...); set layout attributes */
#define MEMPLAN_PHASE_OPTIMIZER 400    /* optimizer states for trainable weights */
#define MEMPLAN_PHASE_WORK 450         /* ABI 1.2: the step's work (FLOPs, bytes moved), read from the weights as the
                                          layout split them and before sharding divides them */
#define MEMPLAN_PHASE_SHARDING 500     /* shard or offload states, gradients, weights */
#define MEMPLAN_PHASE_ACTIVATIONS 600  /* activations of the micro-batch(es) in flight */
#define MEMPLAN_PHASE_OVERHEAD 700     /* buffers, allocator and runtime overhead */
#define MEMPLAN_PHASE_BUDGET 800       /* read the finished plan, derive limits (e.g. a serving engine's KV budget) */

/* Roles: the components of the per-GPU breakdown. */
#define MEMPLAN_ROLE_WEIGHTS 0
#define MEMPLAN_ROLE_GRADIENTS 1
#define MEMPLAN_ROLE_MASTER_WEIGHTS 2
#define MEMPLAN_ROLE_OPTIMIZER_STATES 3
#define MEMPLAN_ROLE_ACTIVATIONS 4
#define MEMPLAN_ROLE_KV_CACHE 5
#define MEMPLAN_ROLE_BUFFERS 6
#define MEMPLAN_ROLE_OVERHEAD 7
#define MEMPLAN_ROLE_COUNT 8

/*
 * Lifetimes: when an item occupies memory during one training step
 * (init -> forward -> backward -> optimizer step). The host builds the step
 * timeline from these; see docs/estimate.md.
 */
#define MEMPLAN_LIFETIME_PERSISTENT 0        /* all phases */
#define MEMPLAN_LIFETIME_GRADIENT 1          /* grows during backward, lives through the optimizer step;
                                                held across micro-batches when grad_accum > 1 */
#define MEMPLAN_LIFETIME_ACTIVATION 2        /* grows during forward, freed during backward */
#define MEMPLAN_LIFETIME_TRANSIENT_FORWARD 3 /* temporaries at the peak of forward */
#define MEMPLAN_LIFETIME_TRANSIENT_BACKWARD 4
#define MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER 5
/* Allocated while the job is set up, before its first step (loading the
 * model, wrapping and sharding it), and freed before that step: part of the
 * init phase's high point only. The framework's caching allocator keeps the
 * freed blocks (the 'allocator' plugin holds them as a floor under the
 * compute stream's pool). Added after the first landing of ABI 1.3: a host
 * that predates it rejects the item as an unknown lifetime. */
#define MEMPLAN_LIFETIME_SETUP 6
/* Alive at backward's start only: what the loss's and the LM head's backward
 * allocate before any layer's backward runs (the loss's gradients, and the
 * logits and the loss's saved tensors where they are freed there), beyond
 * what backward's transients (transient_backward, alive throughout it) hold.
 * Autograd frees a node's saved tensors once the node has run, so none of it
 * is alive at backward's end beside all the gradients. Added after 1.3's
 * first landing, like setup: a host that predates it rejects the item. */
#define MEMPLAN_LIFETIME_BACKWARD_START 7
/* Alive at backward's end only, beside all the gradients: what the
 * embedding's backward allocates there, such as the second gradient of a
 * weight used twice (a tied embedding: the LM head's gradient waits in the
 * leaf's input buffer until the embedding's arrives and is added to it,
 * torch/csrc/autograd/input_buffer.cpp). Added with backward_start. */
#define MEMPLAN_LIFETIME_BACKWARD_END 8
/* Alive while the layers' backward runs, from the first layer's backward to
 * backward's end, but not yet at the loss's backward before it: what one
 * layer's backward leaves for the next, such as FSDP2's reduce-scatter input,
 * kept until the next unit's post-backward. At backward's start it counts as
 * the first layer's moment, beside that layer's gradients instead of the
 * loss's backward_start bytes. Added after backward_start and backward_end
 * (the same day); a host that predates it rejects the item. */
#define MEMPLAN_LIFETIME_BACKWARD_LAYERS 9
/* Alive only while a layer's backward runs: not at the loss's backward before
 * the first one, nor at the embedding's backward after the last one: one
 * layer's working set that those do not have, such as FSDP1's block units,
 * gathered again for their backward (the root alone stays gathered from its
 * forward), and a unit's unsharded gradient. At backward's start it counts as
 * the first layer's moment with backward_layers, in place of backward_start
 * where they are the larger; at backward's end as the last layer's, in place
 * of backward_end where it is the larger. Added after backward_layers (the
 * same day); a host that predates it rejects the item. */
#define MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS 10
/* Alive only while a layer's forward runs: not at the forward's end, where
 * the final norm, the LM head and the loss run after the last layer: one
 * layer's forward working set that the head's moment does not have, such as
 * FSDP's gathered layer units (resharded after each unit's forward) and
 * SDPA's masks, freed when the layers' forward returns. Added after
 * backward_in_layers; a host that predates it rejects the item. */
#define MEMPLAN_LIFETIME_FORWARD_IN_LAYERS 11
/* Alive at the forward's end only: what the LM head's and the loss's forward
 * hold after the last layer's forward has returned (the logits and the
 * loss's transients of the micro-batch whose loss is computed), which no
 * layer's forward working set (forward_in_layers) stands beside. Added with
 * forward_in_layers. */
#define MEMPLAN_LIFETIME_FORWARD_END 12
/* The number of lifetimes: arrays indexed by MEMPLAN_LIFETIME_* have this
 * many entries. */
#define MEMPLAN_LIFETIME_COUNT 13
/* Whether a persistent item already exists while the job is set up: every
 * persistent item but the optimizer states (torch.optim creates them in the
 * first step) and activations kept from step to step (a loop's held
 * output). The init phase and the 'allocator' plugin's floor both use it. */
static inline int memplan_exists_at_setup(int32_t role, int32_t lifetime) {
  return lifetime == MEMPLAN_LIFETIME_SETUP ||
         (lifetime == MEMPLAN_LIFETIME_PERSISTENT && role != MEMPLAN_ROLE_OPTIMIZER_STATES &&
          role != MEMPLAN_ROLE_ACTIVATIONS);
}

/* The step's high points by phase from the items' byte sums by lifetime
 * (indexed by MEMPLAN_LIFETIME_*, `entries` of them, at least
 * MEMPLAN_LIFETIME_SETUP + 1: MEMPLAN_LIFETIME_COUNT for every lifetime this
 * header knows; an array of fewer entries, written for the first 1.3 header,
 * reads as no bytes of the later lifetimes; set-up items
 * are gone before the step and do not count). The host applies it to every
 * item (docs/estimate.md, section 4); the 'allocator' plugin to each stream's
 * pool. With G the gradients, A the activations, G1 and A1 the largest single
 * layer's, P the persistent items, T the pass's transients, S what backward's
 * start adds (lifetime backward_start), E what its end adds (backward_end),
 * L what the layers' backward holds through its end (backward_layers) and Y
 * what a layer's backward holds only while it runs (backward_in_layers),
 * and in forward F what a layer's forward holds only while it runs
 * (forward_in_layers) and H what the head's and the loss's forward hold at
 * its end (forward_end):
 *   forward   = P + A + T + max(F, H) (+ G from the second micro-batch on:
 *               accumulating; A stands for the activations at both moments:
 *               the last layer's forward leaves at most the head's to come)
 *   backward  = P + T + max(min(G + A, A + G1) + max(S, L + Y), min(G + A, G + A1) + L + max(E, Y)),
 *               or G + A + max(S, L + max(E, Y)) when accumulating (backward
 *               walks the layers in reverse: gradients grow while activations
 *               are freed, so the high point is its start, where the loss's
 *               backward runs before any layer's (S) or the first layer's
 *               right after it (L + Y), or its end, where the last layer's
 *               (A1, Y) and then the embedding's (E) do; with accumulation
 *               every gradient is allocated from the start)
 *   optimizer = P + G + T
 * Sums below 2^53 bytes are exact in double. */
static inline void memplan_step_high_points_n(const double* by_lifetime, size_t entries,
                                              double largest_gradient_layer, double largest_activation_layer,
                                              int accumulating, double out[3]) {
  const double persistent = by_lifetime[MEMPLAN_LIFETIME_PERSISTENT];
  const double gradients = by_lifetime[MEMPLAN_LIFETIME_GRADIENT];
  const double activations = by_lifetime[MEMPLAN_LIFETIME_ACTIVATION];
  const double everything = gradients + activations;
  double start = everything, end = everything;
  if (!accumulating) {
    if (activations + largest_gradient_layer < start) start = activations + largest_gradient_layer;
    if (gradients + largest_activation_layer < end) end = gradients + largest_activation_layer;
  }
  const double layers = entries > MEMPLAN_LIFETIME_BACKWARD_LAYERS ? by_lifetime[MEMPLAN_LIFETIME_BACKWARD_LAYERS] : 0;
  const double in_layers =
      entries > MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS ? by_lifetime[MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS] : 0;
  const double loss = entries > MEMPLAN_LIFETIME_BACKWARD_START ? by_lifetime[MEMPLAN_LIFETIME_BACKWARD_START] : 0;
  const double first_layer = layers + in_layers;
  start += loss > first_layer ? loss : first_layer;
  /* The end stands for the last layer's backward (A1) and the embedding's after it (E): Y meets the one, E
   * the other. */
  const double embedding = entries > MEMPLAN_LIFETIME_BACKWARD_END ? by_lifetime[MEMPLAN_LIFETIME_BACKWARD_END] : 0;
  end += layers + (embedding > in_layers ? embedding : in_layers);
  const double forward_layers =
      entries > MEMPLAN_LIFETIME_FORWARD_IN_LAYERS ? by_lifetime[MEMPLAN_LIFETIME_FORWARD_IN_LAYERS] : 0;
  const double forward_end = entries > MEMPLAN_LIFETIME_FORWARD_END ? by_lifetime[MEMPLAN_LIFETIME_FORWARD_END] : 0;
  out[0] = persistent + activations + by_lifetime[MEMPLAN_LIFETIME_TRANSIENT_FORWARD] +
           (forward_layers > forward_end ? forward_layers : forward_end) + (accumulating ? gradients : 0);
  out[1] = persistent + (start > end ? start : end) + by_lifetime[MEMPLAN_LIFETIME_TRANSIENT_BACKWARD];
  out[2] = persistent + gradients + by_lifetime[MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER];
}

/* The same over MEMPLAN_LIFETIME_SETUP + 1 entries, as ABI 1.3 first wrote
 * it: code that sizes its array so keeps reading inside it (and sees no
 * backward_start, backward_end, backward_layers, backward_in_layers,
 * forward_in_layers or forward_end bytes). */
static inline void memplan_step_high_points(const double* by_lifetime, double largest_gradient_layer,
                                            double largest_activation_layer, int accumulating, double out[3]) {
  memplan_step_high_points_n(by_lifetime, MEMPLAN_LIFETIME_SETUP + 1, largest_gradient_layer,
                             largest_activation_layer, accumulating, out);
}

#define MEMPLAN_DEVICE_GPU 0
#define MEMPLAN_DEVICE_CPU 1

/* What a parameter group is; layout plugins decide from this how to split it. */
#define MEMPLAN_CLASS_OTHER 0
#define MEMPLAN_CLASS_EMBEDDING 1          /* token embedding, vocab x hidden */
#define MEMPLAN_CLASS_POSITION_EMBEDDING 2 /* learned positions */
#define MEMPLAN_CLASS_ATTENTION 3          /* q and o projections and their biases */
#define MEMPLAN_CLASS_MLP 4                /* dense MLP */
#define MEMPLAN_CLASS_NORM 5               /* layer norms, RMS norms (with layer -1: the embedding's norm) */
#define MEMPLAN_CLASS_ROUTER 6             /* MoE gate */
#define MEMPLAN_CLASS_EXPERT 7             /* MoE expert MLPs */
#define MEMPLAN_CLASS_LM_HEAD 8            /* output projection, hidden x vocab */
#define MEMPLAN_CLASS_ADAPTER 9            /* LoRA and other added trainable weights */
#define MEMPLAN_CLASS_ATTENTION_KV 10      /* k and v projections: kv_heads wide (grouped-query attention) */
#define MEMPLAN_CLASS_FINAL_NORM 11        /* the norm after the last layer, on the LM head's pipeline stage */
#define MEMPLAN_CLASS_ATTENTION_LATENT 12  /* ABI 1.3: multi-head latent attention's down-projections (q_a, and kv_a
                                              with the rope key): one matrix all heads share, replicated under tensor
                                              parallelism */

/* Item flags. */
#define MEMPLAN_ITEM_TRAINABLE 0x1u
/*
 * Which memory an item occupies, for the three quantities of the report:
 * allocated (the tensors the framework's allocator hands out, what
 * torch.cuda.max_memory_allocated counts), reserved (what the allocator holds
 * from the device, torch.cuda.max_memory_reserved) and device (what nvidia-smi
 * shows). An item with neither flag is an allocated tensor and counts in all
 * three. Hosts and plugins of ABI 1.0 that predate these flags read them as 0.
 */
#define MEMPLAN_ITEM_ALLOCATOR_RESERVE 0x2u  /* held by the allocator beyond its tensors (block rounding, cached free
                                                blocks): counts in reserved and device memory */
#define MEMPLAN_ITEM_OUTSIDE_ALLOCATOR 0x4u  /* device memory the allocator never sees (CUDA context, NCCL's own
                                                buffers): counts in device memory only */
/*
 * A tensor that belongs with the weights but is not a model parameter: a
 * module's registered buffer or plain attribute, such as bitsandbytes'
 * quant_state (the absmax scales of its 4-bit and 8-bit weights) or GPTQ's and
 * AWQ's scales and zero points. The host does not count it as a parameter;
 * sharding and parameter-offload strategies, which move parameters (PyTorch
 * FSDP flattens and shards parameters only, DeepSpeed ZeRO-3 partitions
 * param.data only), leave it whole on every rank's GPU. Added after the first
 * landing of ABI 1.0; older plugins read it as 0.
 */
#define MEMPLAN_ITEM_NON_PARAMETER 0x8u
/*
 * Allocator reserve (with MEMPLAN_ITEM_ALLOCATOR_RESERVE) made of whole cached
 * segments that hold no tensor: PyTorch's caching allocator frees them
 * (release_cached_blocks) and retries when cudaMalloc fails, so they never
 * push device memory past the GPU's. The host lowers them, phase by phase, so
 * that device memory stays within the GPU's memory (the scenario's GPU; no
 * limit without one). Added after the first landing of ABI 1.3; an older host
 * counts them in full.
 */
#define MEMPLAN_ITEM_RELEASABLE 0x10u
/*
 * A request of tokens x vocabulary elements (the logits, their copies, the
 * loss's tensors and gradients over them), set by the activation plugin that
 * adds it: the step's largest single requests, which no block a layer frees
 * can serve. An allocator model keeps them in segments of their own
 * (plugins/strategies/allocator). Added in stop 26 of ABI 1.3; the host only
 * stores it.
 */
#define MEMPLAN_ITEM_VOCAB_SIZED 0x20u
/*
 * The CUDA stream whose allocator pool holds the item, in bits 8-15 of the
 * flags: 0 is the compute (default) stream; 1-255 name side streams, numbered
 * by the plugin that allocates on them (MEMPLAN_STREAM_*). PyTorch's caching
 * allocator reuses a freed block only for allocations on the stream that
 * allocated it (c10/cuda/CUDACachingAllocator.cpp), so each side stream keeps
 * a pool of its own: the 'allocator' plugin keeps each pool's high point over
 * the step reserved in every phase. Added after the first landing of ABI 1.1;
 * older plugins read 0 and keep the bits as they found them.
 */
#define MEMPLAN_ITEM_STREAM_SHIFT 8u
#define MEMPLAN_ITEM_STREAM_MASK 0xff00u
#define MEMPLAN_STREAM_COMPUTE 0
#define MEMPLAN_STREAM_FSDP_UNSHARD 1       /* FSDP1's unshard stream: the gathered (unsharded) flat parameters */
#define MEMPLAN_STREAM_FSDP_POST_BACKWARD 2 /* FSDP1's post-backward stream: the reduce-scattered sharded gradients */
#define MEMPLAN_STREAM_DEEPSPEED_REDUCTION 3 /* DeepSpeed ZeRO 1/2's reduction stream under overlap_comm: a flush's
                                                copy of the bucket (added with comm-buffers 1.5.0) */

#define MEMPLAN_MODE_TRAIN 0
#define MEMPLAN_MODE_INFER 1

/* Option value types a plugin may declare. */
#define MEMPLAN_OPTION_INT 1
#define MEMPLAN_OPTION_DOUBLE 2 /* accepts integers and floats */
#define MEMPLAN_OPTION_BOOL 3
#define MEMPLAN_OPTION_STRING 4

typedef struct memplan_ctx memplan_ctx; /* opaque, owned by the host */

/*
 * ABI 1.1: the step timeline of a plan as the host computes it for the report
 * (docs/estimate.md): bytes on the GPU at the high point of each step phase
 * (init, forward, backward, optimizer step) in each of the report's three
 * quantities (allocated, reserved, device), and the plain sum.
 */
#define MEMPLAN_STEP_PHASES 4
#define MEMPLAN_QUANTITIES 3
typedef struct memplan_timeline {
  uint32_t struct_size;
  uint64_t bytes[MEMPLAN_QUANTITIES][MEMPLAN_STEP_PHASES];
  uint64_t sum; /* every GPU item once, whatever its lifetime */
} memplan_timeline;

/*
 * One entry of the memory plan. `elements` is per instance; `count` identical
 * instances exist (identical layers are one item with a count). Bytes of the
 * item = ceil(elements * bytes_per_element) * count.
 */
typedef struct memplan_item {
  uint32_t struct_size;
  const char *name; /* e.g. "attn.q"; layered items are reported as layers.<first>-<last>.<name> */
  int32_t role;
  int32_t lifetime;
  int32_t device;
  int32_t param_class;
  int32_t layer; /* first layer of the group, or -1 when not part of a layer */
  uint32_t count;
  uint32_t flags;
  double elements;
  double bytes_per_element;
} memplan_item;

/* The model architecture as the host resolved it from the scenario. */
typedef struct memplan_model {
  uint32_t struct_size;
  int32_t has_architecture; /* 0 when the scenario gives only `params` */
  double params;            /* total parameter count */
  int64_t layers;
  int64_t hidden;
  int64_t heads;
  int64_t kv_heads;
  int64_t head_dim;
  int64_t ffn_hidden;
  int64_t vocab;
  int32_t gated_mlp; /* SwiGLU-style: gate and up projections */
  int32_t tied_embeddings;
  int64_t experts; /* 0 for a dense model */
  int64_t experts_top_k;
  int64_t expert_ffn_hidden;
  int64_t sliding_window;         /* tokens a windowed attention layer sees; 0 when no layer is windowed */
  int64_t global_attention_every; /* with a window: every Nth layer (N-1, 2N-1, ...) attends globally; 0: none does */
  int64_t max_context;            /* the longest context the model supports; 0 when unknown */
  int32_t layer_norm;             /* 1: LayerNorm (scale and shift, mean and variance); 0: RMSNorm. Added
                                     after the first landing of ABI 1.0: a smaller struct_size means 0 */
  /* ABI 1.3 (a host of an older minor leaves them 0: none of them). Multi-head
   * latent attention (DeepSeek-V2, arXiv 2405.04434, section 2.1): with
   * kv_lora_rank > 0 the keys and values come from a latent of kv_lora_rank
   * per token (and the queries from one of q_lora_rank when it is > 0);
   * head_dim is then the q/k head width (the no-rope part plus
   * qk_rope_head_dim) and v_head_dim the value head width. */
  int64_t q_lora_rank;
  int64_t kv_lora_rank;
  int64_t qk_rope_head_dim;
  int64_t v_head_dim;
  int64_t dense_layers;             /* MoE: the first dense_layers layers have a dense MLP of ffn_hidden */
  int64_t shared_expert_ffn_hidden; /* MoE: width of the shared expert(s) every token passes; 0: none */
  int64_t layer_norms; /* norms of width hidden per layer (2; Gemma 2 and 3: 4, before and after each block).
                          Added after the first landing of ABI 1.3: a smaller struct_size means 0, read as 2 */
  double attn_logit_softcapping;  /* Gemma 2: attention scores capped as cap x tanh(x / cap); 0: none. Added with */
  double final_logit_softcapping; /* layer_norms; likewise the logits; 0: none (also from an older host) */
  int32_t norm_scale_fp32; /* 1: RMSNorm multiplies by its weight in fp32 (Gemma's (1 + w)). Added after the
                              soft-capping fields: a smaller struct_size means 0 */
  int32_t reserved_zero;   /* 0: the padding after norm_scale_fp32 made explicit, so that a later field gets a
                              struct_size of its own */
  int32_t mlp_activation;  /* MEMPLAN_ACTIVATION_*: the MLP's activation where its form decides what autograd
                              keeps. Added after reserved_zero: a smaller struct_size means 0 (standard) */
  int32_t reserved_zero2;  /* 0: the padding after mlp_activation, explicit as reserved_zero */
} memplan_model;

/* memplan_model.mlp_activation: GELU, SiLU, ReLU as one op or a fused kernel
 * (standard), or the tanh GELU approximation written as tensor ops
 * (transformers' NewGELUActivation, "gelu_new"): 0.5 x (1 + tanh(c (x +
 * 0.044715 x^3))), whose autograd keeps tanh's output, 0.5 x and 1 + tanh
 * beside its input. */
#define MEMPLAN_ACTIVATION_STANDARD 0
#define MEMPLAN_ACTIVATION_GELU_NEW 1

/* What the scenario runs: mode, batch and hardware. */
typedef struct memplan_workload {
  uint32_t struct_size;
  int32_t mode; /* MEMPLAN_MODE_* */
  int64_t micro_batch;
  int64_t seq_len;
  int64_t grad_accum;
  int64_t gpu_count;
  uint64_t gpu_memory_bytes; /* what a process can use: the total CUDA reports where the catalog gives it (cuda_total_gib), else the nominal size; 0 when the scenario names no GPU */
} memplan_workload;

/*
 * ABI 1.2: the work of a training step or a serving pass, from which the host
 * derives its time (docs/step-time.md). A record is an amount of one kind of
 * work done by the reported GPU:
 *   MEMPLAN_WORK_COMPUTE  floating-point operations on the GPU's matrix units,
 *                         at the peak of `math` (MEMPLAN_MATH_*) x `efficiency`;
 *   MEMPLAN_WORK_MEMORY   bytes read and written by kernels bound by memory
 *                         bandwidth (an optimizer's element-wise update), at
 *                         the GPU's memory bandwidth x `efficiency`;
 *   MEMPLAN_WORK_COLLECTIVE  a collective over `ranks` GPUs of a tensor of
 *                         `amount` bytes (the whole tensor each rank ends with
 *                         or starts from; for send/receive the bytes sent),
 *                         moving its ring volume per rank (all-reduce
 *                         2 (N - 1) / N x amount, all-gather, reduce-scatter
 *                         and all-to-all (N - 1) / N x amount, send/receive
 *                         amount; seed 004) over the intra-node link when the
 *                         group fits in a node (ranks x stride <= GPUs per
 *                         node), else the inter-node one, at `efficiency` of
 *                         the link; `overlap` of its time may hide behind the
 *                         compute of its pass, as far as that compute lasts
 *                         (once-per-step ones behind the last micro-batch's
 *                         backward);
 *   MEMPLAN_WORK_BUBBLE   idle time as `amount` x the step's forward and
 *                         backward compute time (a pipeline's bubble).
 * `pass` says when: forward or backward records count once per micro-batch
 * (the host multiplies by the micro-batches of a step), optimizer records once
 * per step. Flag MEMPLAN_WORK_MODEL_FLOPS marks the FLOPs the model needs
 * (what model FLOPs utilisation counts, Korthikanti et al. 2022 section 6);
 * work without it (recomputation) counts in hardware FLOPs only.
 */
#define MEMPLAN_WORK_COMPUTE 0
#define MEMPLAN_WORK_MEMORY 1
#define MEMPLAN_WORK_COLLECTIVE 2
#define MEMPLAN_WORK_BUBBLE 3

#define MEMPLAN_COLLECTIVE_ALL_REDUCE 0
#define MEMPLAN_COLLECTIVE_ALL_GATHER 1
#define MEMPLAN_COLLECTIVE_REDUCE_SCATTER 2
#define MEMPLAN_COLLECTIVE_ALL_TO_ALL 3
#define MEMPLAN_COLLECTIVE_SEND_RECV 4
#define MEMPLAN_COLLECTIVE_COUNT 5

#define MEMPLAN_PASS_FORWARD 1
#define MEMPLAN_PASS_BACKWARD 2
#define MEMPLAN_PASS_OPTIMIZER 3

/* The arithmetic a compute record runs in: which of the GPU's peaks applies. */
#define MEMPLAN_MATH_FP32 0
#define MEMPLAN_MATH_TF32 1
#define MEMPLAN_MATH_BF16 2
#define MEMPLAN_MATH_FP16 3
#define MEMPLAN_MATH_FP8 4
#define MEMPLAN_MATH_COUNT 5
/* Their names, in that order, as scenarios and the GPU catalog spell them. */
#define MEMPLAN_MATH_NAMES {"fp32", "tf32", "bf16", "fp16", "fp8"}

#define MEMPLAN_WORK_MODEL_FLOPS 0x1u

typedef struct memplan_work {
  uint32_t struct_size;
  const char *name; /* interned (memplan_host.intern), e.g. "layers.matmul" */
  int32_t kind;     /* MEMPLAN_WORK_* */
  int32_t pass;     /* MEMPLAN_PASS_* */
  int32_t math;     /* MEMPLAN_MATH_*, for compute records */
  uint32_t flags;   /* MEMPLAN_WORK_MODEL_FLOPS */
  double amount;    /* FLOPs, bytes or (bubble) a fraction, >= 0 */
  double efficiency; /* the fraction of the peak this work reaches, in (0, 1]; 0 when not known (the host
                        then reports the amounts but no time) */
  /* Collectives only: */
  int32_t collective; /* MEMPLAN_COLLECTIVE_* */
  int32_t ranks;      /* GPUs in the group, >= 1 (1: nothing moves) */
  int64_t stride;     /* rank distance between neighbours of the group (1: adjacent ranks), >= 1 */
  double overlap;     /* the fraction of its time that may hide behind compute, in [0, 1] */
} memplan_work;

/*
 * The host's function table. Plugins call only through it and link against no
 * host symbol. New functions are added at the end only; check struct_size
 * before calling one added after ABI 1.0.
 */
typedef struct memplan_host {
  uint32_t struct_size;
  uint16_t abi_major;
  uint16_t abi_minor;

  /* Options of the plugin's scenario table, validated by the host against the
   * plugin's declared option specs. Return MEMPLAN_OK, MEMPLAN_ABSENT, or
   * MEMPLAN_ERROR (undeclared key or wrong type; the host records why). */
  int (*option_int)(memplan_ctx *ctx, const char *key, int64_t *out);
  int (*option_double)(memplan_ctx *ctx, const char *key, double *out);
  int (*option_bool)(memplan_ctx *ctx, const char *key, int *out);
  /* Returns NULL when absent; the string is valid until the callback returns. */
  const char *(*option_string)(memplan_ctx *ctx, const char *key);

  /* Records an error. `option_key` may be NULL; when it names an option, the
   * host adds the scenario file:line:column of that option. The callback
   * should then return MEMPLAN_ERROR. */
  void (*report_error)(memplan_ctx *ctx, const char *option_key, const char *message);

  const memplan_model *(*model)(memplan_ctx *ctx);
  const memplan_workload *(*workload)(memplan_ctx *ctx);

  /* The plan. Indices are stable until add_item/remove_item. */
  size_t (*item_count)(memplan_ctx *ctx);
  int (*get_item)(memplan_ctx *ctx, size_t index, memplan_item *out);
  int (*set_item)(memplan_ctx *ctx, size_t index, const memplan_item *item);
  int (*add_item)(memplan_ctx *ctx, const memplan_item *item);
  int (*remove_item)(memplan_ctx *ctx, size_t index);

  /* Attributes: named values plugins share without knowing each other
   * (see <memplan/conventions.h>). Getters return MEMPLAN_ABSENT when unset. */
  int (*set_attr_int)(memplan_ctx *ctx, const char *key, int64_t value);
  int (*get_attr_int)(memplan_ctx *ctx, const char *key, int64_t *out);
  int (*set_attr_double)(memplan_ctx *ctx, const char *key, double value);
  int (*get_attr_double)(memplan_ctx *ctx, const char *key, double *out);
  int (*set_attr_string)(memplan_ctx *ctx, const char *key, const char *value);
  /* Returns NULL when unset; valid until the attribute is set again. */
  const char *(*get_attr_string)(memplan_ctx *ctx, const char *key);

  /* ---- ABI 1.1: the fast path. A plugin built for 1.1 loads only on a host
   * of 1.1 or later, so it may call these without checking struct_size. ---- */

  /* A copy of `name` that stays valid and unchanged while the host runs (the
   * host keeps one copy of each distinct name). Names of items in the plan
   * array and in add_items must be such copies. Intern in create() and keep
   * the result: interning costs a lookup, using the result costs nothing.
   * Returns NULL, and records why, for an empty or over-long name. */
  const char *(*intern)(memplan_ctx *ctx, const char *name);

  /* The plan as an array the plugin reads and edits in place during apply():
   * item i is at (char *)first + i * *stride (the host keeps more per item than
   * memplan_item). Valid until add_items, add_item or remove_item. Rules: a
   * name is an interned one; struct_size is left as it is. The host checks
   * every item once per evaluation, and after each plugin on an estimator's
   * first evaluation and after a failed check, so that an item written wrong is
   * reported with the plugin that wrote it. */
  memplan_item *(*plan_items)(memplan_ctx *ctx, size_t *count, size_t *stride);
  /* Appends `count` items (interned names), checked as the array is. */
  int (*add_items)(memplan_ctx *ctx, const memplan_item *items, size_t count);

  /* Attribute handles: resolve a name once in create(), then read and write
   * it by handle in apply() with no string lookup. A handle is >= 0 and stays
   * valid for the plugin state's life; -1 means an empty name (error recorded).
   * Getters return MEMPLAN_ABSENT when unset, MEMPLAN_ERROR for another type. */
  int32_t (*attr_handle)(memplan_ctx *ctx, const char *key);
  int (*get_attr_int_at)(memplan_ctx *ctx, int32_t handle, int64_t *out);
  int (*set_attr_int_at)(memplan_ctx *ctx, int32_t handle, int64_t value);
  int (*get_attr_double_at)(memplan_ctx *ctx, int32_t handle, double *out);
  int (*set_attr_double_at)(memplan_ctx *ctx, int32_t handle, double value);

  /* The step timeline of the plan as it stands, as the report computes it. */
  int (*timeline)(memplan_ctx *ctx, memplan_timeline *out);

  /* String attributes by handle (recompute.policy, sharding.gradient_buckets).
   * *out stays valid until the attribute is set again; setting keeps the
   * value's storage, so a warm evaluation allocates nothing. */
  int (*get_attr_string_at)(memplan_ctx *ctx, int32_t handle, const char **out);
  int (*set_attr_string_at)(memplan_ctx *ctx, int32_t handle, const char *value);

  /* ---- ABI 1.2: the step's work. A plugin built for 1.2 loads only on a
   * host of 1.2 or later. ---- */

  /* Appends `count` work records (interned names, checked). Records live as
   * long as the evaluation, as items do; an evaluation starts with none. */
  int (*add_work)(memplan_ctx *ctx, const memplan_work *work, size_t count);
  /* The work records as an array the plugin reads and edits in place during
   * apply(), as plan_items: record i is at (char *)first + i * *stride. Valid
   * until add_work. A strategy that does some work another way rewrites the
   * record that counted it (conventions.h names the records plugins share,
   * e.g. MEMPLAN_WORK_GRADIENT_REDUCTION). The host checks the records after
   * each plugin that took the array. */
  memplan_work *(*plan_work)(memplan_ctx *ctx, size_t *count, size_t *stride);
} memplan_host;

/* One option a plugin accepts in its scenario table. */
typedef struct memplan_option_spec {
  const char *name;
  int32_t type; /* MEMPLAN_OPTION_* */
  const char *help;
  const char *default_text; /* what happens when absent, for docs and `memplan plugins` */
  /* ABI 1.2: values of this option that trade step time for memory, comma-
   * separated, for `memplan explain` to try on a job that does not fit (e.g.
   * "selective,full" for a recomputation policy); NULL: none. A table built
   * before 1.2 (smaller option_spec_size) reads as NULL. */
  const char *levers;
} memplan_option_spec;

/*
 * The descriptor a library's entry point returns. `create` reads and validates
 * options and may return a state pointer; `apply` transforms the plan and may
 * run many times per state (one per evaluated configuration); `destroy` frees
 * the state. Callbacks must not throw or unwind across this boundary.
 */
typedef struct memplan_plugin_descriptor {
  uint32_t struct_size;
  uint16_t abi_major;
  uint16_t abi_minor;
  const char *name;    /* lower-case letters, digits and dashes, e.g. "my-optimizer" */
  const char *version; /* the plugin's own version, e.g. "1.2.0" */
  const char *summary; /* one line for `memplan plugins` */
  int32_t kind;        /* MEMPLAN_KIND_* */
  int32_t phase;       /* MEMPLAN_PHASE_* */
  const memplan_option_spec *options;
  uint32_t option_count;
  uint32_t option_spec_size; /* sizeof(memplan_option_spec) as the plugin was built */
  int (*create)(const memplan_host *host, memplan_ctx *ctx, void **state);
  int (*apply)(void *state, const memplan_host *host, memplan_ctx *ctx);
  void (*destroy)(void *state);
  /* ABI 1.1: which workload fields apply() reads (MEMPLAN_READS_*). A host
   * that sweeps the micro-batch or the sequence length reuses the plan as it
   * stood before the first plugin that reads them. A descriptor without this
   * field (ABI 1.0), or without MEMPLAN_READS_DECLARED, reads everything. */
  uint32_t reads;
} memplan_plugin_descriptor;

#define MEMPLAN_READS_MICRO_BATCH 0x1u /* workload micro_batch */
#define MEMPLAN_READS_SEQ_LEN 0x2u     /* workload seq_len */
#define MEMPLAN_READS_GRAD_ACCUM 0x4u  /* ABI 1.2: create() reads workload grad_accum: a search that changes it
                                          creates the plugin again (a plugin that declares its reads without
                                          this bit is kept; one that declares nothing is created again) */
#define MEMPLAN_READS_DECLARED 0x80000000u

typedef const memplan_plugin_descriptor *(*memplan_entry_point_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* MEMPLAN_PLUGIN_ABI_H */
