/*
 * Attribute names that plugins use to talk to each other through the host
 * without knowing each other. The host sets the hardware.* facts below and
 * otherwise stores attributes, interpreting only three families, all by their
 * generic meaning: every integer ranks.* attribute is a
 * factor of the world size (checked against [hardware] count);
 * limits.memory_fraction scales the GPU memory the peak must fit in; report.*
 * attributes are printed in the report.
 *
 * Adding a name here is an ABI-compatible change; renaming one is not.
 */
#ifndef MEMPLAN_CONVENTIONS_H
#define MEMPLAN_CONVENTIONS_H

/* Bytes per element of each role, set by the precision plugin (double). */
#define MEMPLAN_ATTR_DTYPE_WEIGHTS "dtype.weights"
#define MEMPLAN_ATTR_DTYPE_GRADIENTS "dtype.gradients"
#define MEMPLAN_ATTR_DTYPE_MASTER_WEIGHTS "dtype.master_weights"
#define MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES "dtype.optimizer_states"
#define MEMPLAN_ATTR_DTYPE_ACTIVATIONS "dtype.activations"

/* Autocast over wider weights (PyTorch torch.autocast with fp32 parameters),
 * set by the precision plugin that models it (double): the bytes per element
 * of the residual stream and of the norms' inputs and outputs, which stay in
 * the weights' dtype while dtype.activations is the dtype the matrix
 * multiplies compute in (autocast runs layer_norm in fp32, and the residual
 * adds promote to their widest input). Absent or 0: dtype.activations. */
#define MEMPLAN_ATTR_DTYPE_RESIDUAL "dtype.residual"
/* Bytes per element of what the linear layers keep of their inputs for their
 * weights' gradients (double), set by a precision plugin whose recipe casts
 * those inputs before saving them (Transformer Engine's fp8 Linear,
 * LayerNormLinear and LayerNormMLP save the fp8 cast: 1). Absent or 0:
 * dtype.activations (the input itself is kept). */
#define MEMPLAN_ATTR_DTYPE_LINEAR_INPUTS "dtype.linear_inputs"
/* The name suffix of the cast copies of weights such a precision plugin adds
 * (`<weight name>.autocast`, role buffers, lifetime activation): autocast's
 * cache holds each until the forward ends and the matrix multiply saves it
 * for backward. An activation model that recomputes layers in backward
 * re-times the copies of the layers it recomputes. */
#define MEMPLAN_CACHED_CAST_SUFFIX ".autocast"

/* World-size factors (int). The product of all ranks.* is the GPU count. */
#define MEMPLAN_ATTR_RANKS_PREFIX "ranks."
#define MEMPLAN_ATTR_RANKS_DATA "ranks.data"
#define MEMPLAN_ATTR_RANKS_TENSOR "ranks.tensor"
#define MEMPLAN_ATTR_RANKS_PIPELINE "ranks.pipeline"
#define MEMPLAN_ATTR_RANKS_CONTEXT "ranks.context"

/* Layout facts for activation models (int). */
#define MEMPLAN_ATTR_SEQUENCE_PARALLEL "layout.sequence_parallel"         /* 0 or 1 */
#define MEMPLAN_ATTR_STAGE_LAYERS "layout.stage_layers"                   /* layers on the reported rank */
#define MEMPLAN_ATTR_INFLIGHT_MICROBATCHES "layout.inflight_microbatches" /* activations held at once */
/* Multiplies the stored activations of the reported stage (double, default 1):
 * e.g. the interleaved 1F1B schedule's 1 + (p - 1) / (p m) (Korthikanti et al. 2022). */
#define MEMPLAN_ATTR_ACTIVATION_FACTOR "layout.activation_factor"
/* The fraction of the pipeline's send/receive that its schedule overlaps with
 * compute by default (double in [0, 1], 0 when unset): Megatron-LM's
 * interleaved 1F1B overlaps the transfers of its steady state
 * (overlap_p2p_comm), not those of warm-up and flush. */
#define MEMPLAN_ATTR_PIPELINE_P2P_OVERLAP "layout.pipeline_p2p_overlap"
/* Model chunks per pipeline stage (int, 1 when unset): under Megatron-LM's
 * interleaved 1F1B schedule each of the stage's v chunks sends its output to
 * the next stage, so a micro-batch crosses a stage's boundary v times each way. */
#define MEMPLAN_ATTR_PIPELINE_CHUNKS "layout.pipeline_chunks"
/* Expert parallelism (int): experts are split over this many ranks, carved out
 * of the data-parallel (and context-parallel) ranks, so it is not a world-size
 * factor (Megatron-LM's expert_model_parallel_size). */
#define MEMPLAN_ATTR_EXPERT_PARALLEL "layout.expert_parallel"
/* Expert tensor parallelism (int), set by 'expert-parallel' (added with its
 * 1.2.0): the ranks each expert's matrices are split over (Megatron-Core's
 * expert_tensor_parallel_size, the tensor-parallel size unless given). With
 * MoE parallel folding the experts' groups are carved out of tensor x
 * context x data: the expert data-parallel group is tensor x context x data /
 * (expert x expert tensor). Absent: the tensor-parallel size. */
#define MEMPLAN_ATTR_EXPERT_TENSOR_PARALLEL "layout.expert_tensor_parallel"
/* A weight layout that pads the experts' matrices (int, 1 when unset), set
 * by a precision plugin whose kernels need it, read by the layout plugins
 * that split the experts (plugin support's expert_padding.hpp): each rank's
 * expert intermediate size is rounded up to a multiple of
 * EXPERT_PAD_INTERMEDIATE, the hidden size to one of EXPERT_PAD_HIDDEN (vLLM's
 * mxfp4 MoE: Marlin 128 and 256, Triton 64 and 1). The precision plugin pads
 * the items for one rank; a split rescales them to its own padded share. */
#define MEMPLAN_ATTR_EXPERT_PAD_INTERMEDIATE "weights.expert_pad_intermediate"
#define MEMPLAN_ATTR_EXPERT_PAD_HIDDEN "weights.expert_pad_hidden"
/* The bytes a forward's dequantization of the largest quantized matrix holds
 * while that projection runs (double, 0 when unset), set by a precision
 * plugin that counts them as a transient of the forward (the quantized
 * plugin's dequantize_copies), read by an inference activation model that
 * knows which of the layer's tensors are alive at that moment, so that the
 * two together make the layer's high point rather than a sum. */
#define MEMPLAN_ATTR_DEQUANTIZED_TRANSIENT "weights.dequantized_transient"
/* Whether the reported stage holds the token embedding / the LM head (int 0/1),
 * for activation models that add the embedding's and the logits' activations. */
#define MEMPLAN_ATTR_STAGE_HAS_EMBEDDING "layout.stage_has_embedding"
#define MEMPLAN_ATTR_STAGE_HAS_LM_HEAD "layout.stage_has_lm_head"
/* A pipeline runtime's own tensors per step (int, 0 when unset), counted in
 * micro-batches; the activation model sizes them (a stage boundary's hidden
 * states, or the logits on the stage holding the LM head).
 * torch.distributed.pipelining: a receive buffer per micro-batch for the
 * stage's inputs and one for its outputs' gradients (kept across steps), the
 * inputs' gradients kept to the step's end, the outputs kept to the next step,
 * and the last stage's outputs merged at the step's end. */
#define MEMPLAN_ATTR_PIPELINE_INPUT_BUFFERS "layout.pipeline_input_buffers"
#define MEMPLAN_ATTR_PIPELINE_GRAD_BUFFERS "layout.pipeline_grad_buffers"
#define MEMPLAN_ATTR_PIPELINE_INPUT_GRADS "layout.pipeline_input_grads"
#define MEMPLAN_ATTR_PIPELINE_KEPT_OUTPUTS "layout.pipeline_kept_outputs"
#define MEMPLAN_ATTR_PIPELINE_MERGED_OUTPUTS "layout.pipeline_merged_outputs"
/* Context parallelism's ring attention gathers every layer's K and V over the
 * context-parallel ranks (int 0/1, 0 when unset): torch's context_parallel
 * with its "allgather" rotate method; the activation model sizes the buffers. */
#define MEMPLAN_ATTR_CONTEXT_KV_ALLGATHER "layout.context_kv_allgather"

/* Whether the sharding plugin counts the weights it gathers back to the GPU
 * before use (int 0/1): ZeRO-3 and FSDP set it; offloading parameters needs it. */
#define MEMPLAN_ATTR_GATHERS_PARAMETERS "sharding.gathers_parameters"
/* Bytes per element of the weights a sharding strategy gathers for compute
 * (FSDP's MixedPrecision param_dtype), where they differ from the weights'
 * own dtype: the dtype autograd computes their gradients in. Absent: each
 * weight's own. */
#define MEMPLAN_ATTR_GATHERED_WEIGHT_BYTES "sharding.gathered_weight_bytes"

/* Facts about the hardware, set by the host before the first plugin runs
 * (from the GPU catalog, core/data/gpus.toml); absent when not known.
 * hardware.nvlink_sharp (int 1): the GPUs of a node sit on an NVSwitch with
 * NVLink SHARP (multicast), so NCCL can use its NVLS algorithm (HGX H100 and
 * H200 8-GPU boards). */
#define MEMPLAN_ATTR_HARDWARE_NVLINK_SHARP "hardware.nvlink_sharp"
/* hardware.architecture (string): the GPU's compute target, "sm_" and NVIDIA's
 * compute capability without its dot ("sm_80", "sm_90", "sm_100") or AMD's
 * LLVM target ("gfx942"); absent when the catalog does not give it (a
 * scenario's own memory_gib). */
#define MEMPLAN_ATTR_HARDWARE_ARCHITECTURE "hardware.architecture"

/* The weight format the model's checkpoint declares (a Hugging Face
 * config.json's quantization_config), set by the host before plugins are
 * created, so a precision plugin may read them in create(); all absent when
 * the model declares none. The host does not interpret them.
 *   model.quantization.method          string: quant_method as written ("mxfp4", "gptq", ...)
 *   model.quantization.bits            int: bits per value ("bits", AWQ's "w_bit"), when given
 *   model.quantization.group_size      int: elements per scale ("group_size", AWQ's "q_group_size"),
 *                                      -1 for one scale per row, when given
 *   model.quantization.block_elements  int: elements per 2-D scale block (the product of
 *                                      weight_block_size, e.g. 128 x 128), when given
 *   model.quantization.value_type      string: the values' type, when named (bitsandbytes'
 *                                      bnb_4bit_quant_type: "nf4", "fp4")
 *   model.quantization.double_quant    int 1: the scales are quantized too (bitsandbytes'
 *                                      bnb_4bit_use_double_quant); absent otherwise
 *   model.quantization.unquantized     string: the parts the config keeps unquantized
 *                                      (modules_to_not_convert, ignored_layers,
 *                                      llm_int8_skip_modules), comma-separated
 *                                      from attention, mlp, experts, router, embeddings, lm_head */
#define MEMPLAN_ATTR_MODEL_QUANT_METHOD "model.quantization.method"
#define MEMPLAN_ATTR_MODEL_QUANT_BITS "model.quantization.bits"
#define MEMPLAN_ATTR_MODEL_QUANT_GROUP_SIZE "model.quantization.group_size"
#define MEMPLAN_ATTR_MODEL_QUANT_BLOCK "model.quantization.block_elements"
#define MEMPLAN_ATTR_MODEL_QUANT_VALUE_TYPE "model.quantization.value_type"
#define MEMPLAN_ATTR_MODEL_QUANT_DOUBLE_QUANT "model.quantization.double_quant"
#define MEMPLAN_ATTR_MODEL_QUANT_UNQUANTIZED "model.quantization.unquantized"

/* Bytes of GPU copies of offloaded parameter shards that the sharding plugin
 * stages in an allocator pool of their own before gathering them (double),
 * e.g. PyTorch FSDP's pre-unshard stream: set by the sharding plugin, turned
 * into reserved memory by 'offload' when it moves the parameters. */
#define MEMPLAN_ATTR_OFFLOAD_STAGING "sharding.offload_staging"

/* How the job's set-up leaves the caching allocator (double, 1 = yes), set by
 * a sharding plugin whose framework does so, read by an allocator model:
 * SETUP_CACHE_EMPTIED, the framework empties the cache once set up (no floor
 * of cached set-up blocks under the step; DeepSpeed stage3.py after
 * partitioning a whole model); SETUP_FRESH_SEGMENTS, the set-up allocates
 * its items one after another with nothing freed between them (module.to of
 * a whole model), so they need no fragmentation margin. */
#define MEMPLAN_ATTR_SETUP_CACHE_EMPTIED "setup.cache_emptied"
#define MEMPLAN_ATTR_SETUP_FRESH_SEGMENTS "setup.fresh_segments"

/* The bytes of the largest block the set-up leaves free in the compute
 * stream's cached segments (double), set by a plugin that replays its set-up
 * through the allocator's block rules (plugin support's caching_allocator.hpp),
 * read by an allocator model: a later request of that size or less is served
 * from the set-up's blocks (best fit splits them) instead of a segment of its
 * own. A writer keeps the larger of its own block and one already set.
 * Absent: the sizes of the set-up's free blocks are not known. */
#define MEMPLAN_ATTR_SETUP_LARGEST_FREE_BLOCK "setup.largest_free_block"

/* The bytes the caching allocator's segments for the loss path's
 * logits-sized requests settle at, step after step (double), set by an
 * activation plugin that knows the order of those requests (a replay through
 * the allocator's block rules: plugin support's caching_allocator.hpp), read
 * by an allocator model as the least that pool holds. Absent: the order is
 * not known, the pool is what the requests hold at once. */
#define MEMPLAN_ATTR_LOSS_SEGMENTS "allocator.loss_segments"

/* The same replay where steps differ in length (double, bytes at the
 * workload's sequence length, set beside LOSS_SEGMENTS): FIRST_STEP, what the
 * path's first step maps; LONGER_STEP, what a step longer than every step
 * before maps (the shorter steps' segments cannot hold its requests and stay
 * mapped), in LONGER_SEGMENTS segments of equal size. Read by an allocator
 * model told that the run's lengths vary. */
#define MEMPLAN_ATTR_LOSS_FIRST_STEP "allocator.loss_first_step"
#define MEMPLAN_ATTR_LOSS_LONGER_STEP "allocator.loss_longer_step"
#define MEMPLAN_ATTR_LOSS_LONGER_SEGMENTS "allocator.loss_longer_segments"

/* ZeRO-3's optimizer step, set by the sharding plugin for the offload plugin
 * (double): STEP_SUB_GROUP_FRACTION, the share of the partition in the
 * largest sub-group the step works on at once (the recipe's fp32 gradient
 * copies are scaled to it; offload scales them back when the step runs on the
 * host); GATHER_STAGING_FORWARD / _BACKWARD, bytes of host-resident parameter
 * partitions copied to the GPU before a gather, at the worst moment of each
 * pass (offload counts them with parameters = true). */
#define MEMPLAN_ATTR_STEP_SUB_GROUP_FRACTION "zero3.step_sub_group_fraction"
#define MEMPLAN_ATTR_GATHER_STAGING_FORWARD "zero3.gather_staging_forward"
#define MEMPLAN_ATTR_GATHER_STAGING_BACKWARD "zero3.gather_staging_backward"

/* The backward pass of a sharding plugin that gathers parameters (string),
 * set in training by the sharding plugin, read by the gradient-bucket plugin:
 * the gathered bytes it counts at the backward's high point, then, for each
 * step that readies gradients in the order they become ready, their elements
 * and the gathered bytes held meanwhile (support/backward_gradients.hpp writes
 * and reads it: whole numbers separated by single spaces). 'zero' stage 3
 * sets it from its coordinator's replay when its trace holds every trainable
 * gradient of one reduce group; 'comm-buffers' places DeepSpeed's
 * reduce-bucket flushes with it. */
#define MEMPLAN_ATTR_BACKWARD_GRADIENTS "sharding.backward_gradients"

/* Layers whose input (and its gradient) a sharding runtime keeps until
 * backward ends (int), set by the sharding plugin, read by the activation
 * plugin: FSDP1 units that need no gradient, recomputed by reentrant
 * checkpointing around them (the reshard-only hook on their detached inputs). */
#define MEMPLAN_ATTR_KEPT_LAYER_INPUTS "fsdp.kept_layer_inputs"

/* How the data-parallel gradients are reduced (string), set by sharding
 * plugins for 'comm-buffers' (buckets = "auto"): "deepspeed" (ZeRO 1/2's
 * bucketed reduce, a bucket per backward), "deepspeed-stage3" (ZeRO-3's one
 * bucket, kept from start-up) or "none" (from the gradients' own buffers, as
 * FSDP). */
#define MEMPLAN_ATTR_GRADIENT_BUCKETS "sharding.gradient_buckets"
/* The ZeRO stage (int: 1, 2 or 3), set by 'zero' (1.10.0) beside
 * sharding.gradient_buckets: 'comm-buffers' (1.5.0) places ZeRO 1's flushes
 * after backward (unless overlap_comm) and keeps its buckets through gradient
 * accumulation. Absent: a stage that flushes from the gradient hooks. */
#define MEMPLAN_ATTR_ZERO_STAGE "zero.stage"

/* What LoRA adapters keep for backward, per token of a layer (double), set by
 * 'lora' for activation models: the adapted matrices' input widths summed, the
 * same counting an input several matrices share once, r x adapted matrices
 * (lora_B's inputs), and lora_dropout. */
#define MEMPLAN_ATTR_LORA_INPUTS "lora.inputs"
#define MEMPLAN_ATTR_LORA_DISTINCT_INPUTS "lora.distinct_inputs"
#define MEMPLAN_ATTR_LORA_RANK_INPUTS "lora.rank_inputs"
#define MEMPLAN_ATTR_LORA_DROPOUT "lora.dropout"
/* Whether the dense MLP's matrices carry adapters through PEFT's forward (int,
 * 1 or 0; 0 where lora.kernels covers the MLP), set by 'lora': an adapted
 * projection adds its adapter's output to the base output, transients of the
 * projection's output width that a recomputed layer's working set meets
 * (docs/formulas.md, "The recomputed layer's high point with LoRA on its MLP"). */
#define MEMPLAN_ATTR_LORA_MLP "lora.mlp"
/* Whether o, the attention output projection, carries an adapter through
 * PEFT's forward (int, 1 or 0), set by 'lora': its lora_A reads the attention
 * output, which the layer may keep already (SDPA saves it under flash). */
#define MEMPLAN_ATTR_LORA_O "lora.o"
/* Whether q, k or v carries an adapter through PEFT's forward (int, 1 or 0), set
 * by 'lora' (added with lora 1.7.0): its lora_A reads the attention's normed
 * input, which a compiled layer keeps then even with q, k and v frozen. */
#define MEMPLAN_ATTR_LORA_QKV "lora.qkv"
/* The adapter groups computed by fused LoRA autograd functions instead of
 * PEFT's forward (int, a sum of MEMPLAN_LORA_KERNEL_*), set by 'lora' with
 * kernels = "axolotl" or "unsloth" (axolotl's lora_*_kernel, Unsloth's
 * fast_lora), where lora_dropout is 0 and a group is adapted whole: each
 * function keeps its input in the activations' dtype (the MLP's also its gate
 * and up outputs) and the covered adapters keep nothing of their own; they are
 * left out of lora.inputs, lora.distinct_inputs, lora.rank_inputs and lora.mlp. */
#define MEMPLAN_ATTR_LORA_KERNELS "lora.kernels"
#define MEMPLAN_LORA_KERNEL_QKV 1 /* q, k and v, adapted together */
#define MEMPLAN_LORA_KERNEL_O 2   /* the attention output projection */
#define MEMPLAN_LORA_KERNEL_MLP 4 /* a gated MLP's gate, up and down */
#define MEMPLAN_LORA_KERNEL_ADD_IN_PLACE 8 /* the adapters' product added in place (Unsloth's
                                            * matmul_lora from 2025.3.1: out.addmm_), not through a
                                            * temporary of the output's width (axolotl's, and Unsloth's
                                            * before: out += (X @ A) @ (s B)); lora's
                                            * unsloth_adds_in_place */
/* The adapters' rank r (double), set by 'lora': each adapted d_in x d_out
 * matrix gets lora_A of r x d_in and lora_B of d_out x r elements. Read by
 * 'zero', which keeps the adapter matrices at most
 * stage3_param_persistence_threshold elements whole on every rank. */
#define MEMPLAN_ATTR_LORA_RANK "lora.rank"
/* DoRA (Liu et al. 2024, arXiv 2402.09353; PEFT's LoraConfig(use_dora=True),
 * torchtune's DoRALinear), set by 'lora' (1.9.0, option dora; all 0 without
 * it) for activation models (double):
 *   DORA_OUTPUTS         per token of a layer, the output widths of the
 *                        DoRA-adapted matrices summed (elements): the
 *                        magnitude scaling saves each matrix's base output
 *                        and lora_B's output for the magnitude's gradient;
 *   DORA_WEIGHTS         per layer, d_in x d_out of those matrices summed
 *                        (elements): with lora_dropout PEFT recomputes the
 *                        base output from the dropped input with a cast copy
 *                        of the weight, which that matmul saves;
 *   DORA_WIDEST_INPUT    the largest d_in of those matrices, and
 *   DORA_LARGEST_MATRIX  the largest d_in x d_out: the weight norm each
 *                        forward computes (an identity of d_in x d_in through
 *                        the adapters, the weight plus the scaled product),
 *                        transients of one matrix at a time. */
#define MEMPLAN_ATTR_LORA_DORA_OUTPUTS "lora.dora_outputs"
#define MEMPLAN_ATTR_LORA_DORA_WEIGHTS "lora.dora_weights"
#define MEMPLAN_ATTR_LORA_DORA_WIDEST_INPUT "lora.dora_widest_input"
#define MEMPLAN_ATTR_LORA_DORA_LARGEST_MATRIX "lora.dora_largest_matrix"

/* Names of work records (ABI 1.2) that more than one plugin knows. The
 * data-parallel gradient reduction: the step-work plugin counts it as an
 * all-reduce over the data-parallel ranks once per step; a sharding plugin
 * that reduces gradients its own way (ZeRO, FSDP: reduce-scatters) rewrites
 * the record (memplan_host.plan_work). */
#define MEMPLAN_WORK_GRADIENT_REDUCTION "data_parallel.gradients"
/* The optimizer step's memory traffic (bytes its element-wise kernels read
 * and write, MEMPLAN_WORK_MEMORY in MEMPLAN_PASS_OPTIMIZER), for the dense
 * weights and the experts apart: a sharding plugin that partitions the step
 * (ZeRO stage >= 1, FSDP) divides each by its partition's ranks, one that
 * moves the step to the CPU sets it to 0. */
#define MEMPLAN_WORK_OPTIMIZER_STEP "optimizer.step"
#define MEMPLAN_WORK_OPTIMIZER_STEP_EXPERTS "optimizer.step.experts"

/* Recomputation policy (string): "none", "selective", "full" or "op". */
#define MEMPLAN_ATTR_RECOMPUTE_POLICY "recompute.policy"
/* Whether the recomputation is reentrant (int, 1 or 0), set by 'recompute':
 * torch.utils.checkpoint with use_reentrant=True reruns the layer's whole
 * forward and holds its output through the layer's backward; the
 * non-reentrant checkpoint stops recomputing once the last tensor backward
 * needs is made (torch >= 2.1's early stop). */
#define MEMPLAN_ATTR_RECOMPUTE_REENTRANT "recompute.reentrant"

/* KV cache layout, set by the plugin that adds kv_cache items (int/double):
 * tokens per allocation block (1 when not paged) and bytes of one block on
 * the reported rank, for budget plugins that turn free memory into blocks. */
#define MEMPLAN_ATTR_KV_BLOCK_TOKENS "kv.block_tokens"
#define MEMPLAN_ATTR_KV_BLOCK_BYTES "kv.block_bytes"

/* The CUDA context's growth after the process created it (int, bytes): the
 * kernels a job loads when it first runs them (lazy module loading), device
 * memory outside the caching allocator. Set by the plugin that counts the
 * context (cuda-context); read by a budget plugin whose engine measures from a
 * snapshot taken after start-up (serving-budget's charged = "since-nccl", vLLM's
 * memory_profiling). */
#define MEMPLAN_ATTR_CUDA_CONTEXT_GROWTH "cuda.context_growth_bytes"
/* The part of the CUDA context that exists once the process created it (int,
 * bytes): the context less its growth. Set by cuda-context; read by a budget
 * plugin whose engine measures free memory at start-up (serving-budget's
 * charged = "static", SGLang's mem_fraction_static). */
#define MEMPLAN_ATTR_CUDA_CONTEXT_START "cuda.context_start_bytes"

/* The fraction of GPU memory the job may use (double, 0 < f <= 1), e.g. a
 * serving engine's gpu_memory_utilization. The host compares the peak with
 * f x GPU memory when it decides whether the job fits. */
#define MEMPLAN_ATTR_MEMORY_FRACTION "limits.memory_fraction"

/* Figures a plugin wants in the report: every attribute whose name starts with
 * this prefix is printed, without the prefix, under "details" in JSON and in
 * the table (e.g. "report.kv_blocks"). */
#define MEMPLAN_ATTR_REPORT_PREFIX "report."

#endif /* MEMPLAN_CONVENTIONS_H */
