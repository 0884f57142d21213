#!/usr/bin/env python3
"""Measure what a Hugging Face Transformers job really holds on one CUDA GPU.

memplan's validation cases compare its estimate with published figures; this
script makes such figures itself, on a GPU at hand, for jobs written the way
their frameworks' own scripts write them (PEFT's MetaMathQA benchmark loop,
model.generate). Each job runs in its own process, so that every figure starts
from a fresh CUDA context and an empty caching allocator:

    python3 tools/measure/hf_memory.py --out DIR [--only NAME,...]

Job kinds: "train" (PEFT MetaMathQA's loop, written out here), "trainer" (the
Hugging Face Trainer with its defaults; a TrainerCallback reads the peaks per
optimizer step) and "generate" (one model.generate call).

For every job it writes one JSON line to DIR/results.jsonl: the library
versions, the GPU, and per step torch.cuda.max_memory_allocated(),
max_memory_reserved(), memory_allocated() and the device memory in use
(mem_get_info: total - free, the figure nvidia-smi shows for the whole GPU).
Jobs marked `snapshot` also record the allocator's history over one steady
step (torch.cuda.memory._record_memory_history) and write, per job, the
tensors allocated during that step and alive at its allocated peak, grouped by
the Python frames that allocated them (what was allocated before the step,
weights and optimizer states, is `baseline_allocated`): the evidence to find
"the tensor that explains" a gap.

Models are built from their published config.json shapes with random weights
(no download: the device machine has no network), saved with save_pretrained
and loaded back with from_pretrained(device_map="cuda"), the path real runs
take (transformers' caching_allocator_warmup included).
"""
import argparse
import gzip
import json
import os
import pickle
import subprocess
import sys
import time
import traceback

# config.json shapes (architecture fields only), as published on the Hub:
# meta-llama/Llama-3.2-1B, meta-llama/Llama-3.2-3B, meta-llama/Llama-3.1-8B,
# Qwen/Qwen3-0.6B, allenai/Olmo-3-7B-Instruct-SFT (OLMo 2 7B's shape with q/k norms over the
# projections, post-norms, three sliding-window layers in four; dolma2's 100,278 entries),
# google/gemma-3-12b-it's text_config (four norms a layer, per-head q/k norms, five windowed
# layers of 1,024 tokens in six), google/gemma-2-9b (four norms a layer, every other layer windowed
# to 4,096 tokens, attention and final logits soft-capped: its eager attention is the one that
# applies the cap).
# memplan's presets carry the same shapes.
SHAPES = {
    "llama-3.2-1b": dict(arch="llama", vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                         num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                         tie_word_embeddings=True, max_position_embeddings=131072, rms_norm_eps=1e-5),
    "llama-3.2-3b": dict(arch="llama", vocab_size=128256, hidden_size=3072, intermediate_size=8192,
                         num_hidden_layers=28, num_attention_heads=24, num_key_value_heads=8, head_dim=128,
                         tie_word_embeddings=True, max_position_embeddings=131072, rms_norm_eps=1e-5),
    "llama-3.1-8b": dict(arch="llama", vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                         num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                         tie_word_embeddings=False, max_position_embeddings=131072, rms_norm_eps=1e-5),
    "qwen3-0.6b": dict(arch="qwen3", vocab_size=151936, hidden_size=1024, intermediate_size=3072,
                       num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                       tie_word_embeddings=True, max_position_embeddings=40960, rms_norm_eps=1e-6),
    "olmo3-7b": dict(arch="olmo3", vocab_size=100278, hidden_size=4096, intermediate_size=11008,
                     num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                     tie_word_embeddings=False, max_position_embeddings=65536, rms_norm_eps=1e-6,
                     sliding_window=4096),
    "gemma3-12b": dict(arch="gemma3_text", vocab_size=262208, hidden_size=3840, intermediate_size=15360,
                       num_hidden_layers=48, num_attention_heads=16, num_key_value_heads=8, head_dim=256,
                       tie_word_embeddings=True, max_position_embeddings=131072, rms_norm_eps=1e-6,
                       sliding_window=1024, query_pre_attn_scalar=256),
    "gemma2-9b": dict(arch="gemma2", vocab_size=256000, hidden_size=3584, intermediate_size=14336,
                      num_hidden_layers=42, num_attention_heads=16, num_key_value_heads=8, head_dim=256,
                      tie_word_embeddings=True, max_position_embeddings=8192, rms_norm_eps=1e-6,
                      sliding_window=4096, query_pre_attn_scalar=256, attn_logit_softcapping=50.0,
                      final_logit_softcapping=30.0),
    # Qwen-1_8B's shape (its config.json: 24 layers, hidden 2048, 16 heads, intermediate_size 11008 halved
    # into w1/w2 of 5504, vocab 151936, untied head, biases on q/k/v) in transformers' Qwen2 classes, whose
    # layer is Qwen-1's with separate q/k/v projections: the ms-swift benchmark's qwen-1_8b-chat rows.
    "qwen-1.8b": dict(arch="qwen2", vocab_size=151936, hidden_size=2048, intermediate_size=5504,
                      num_hidden_layers=24, num_attention_heads=16, num_key_value_heads=16,
                      tie_word_embeddings=False, max_position_embeddings=8192, rms_norm_eps=1e-6),
}

# transformers' config and model classes per architecture.
CLASSES = {"llama": ("LlamaConfig", "LlamaForCausalLM"), "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
           "olmo3": ("Olmo3Config", "Olmo3ForCausalLM"), "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM"),
           "gemma2": ("Gemma2Config", "Gemma2ForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM")}

# The jobs. kind "train": PEFT MetaMathQA's loop (method_comparison/MetaMathQA/run.py):
# zero_grad (set_to_none), outputs = model(**batch, num_items_in_batch=n) kept until the
# next forward, loss.backward(), clip_grad_norm_(1.0), optimizer.step(). lengths: the
# samples' lengths in a batch padded on the right to `seq` (tokenizer.pad); labels -100
# past each sample's first pad token (run.py). kind "generate": model.generate, greedy.
JOBS = [
    dict(name="llama-3.2-3b-lora-r32-qv-bs4-s768", shape="llama-3.2-3b", kind="train", method="lora",
         r=32, alpha=64, targets=None, batch=4, seq=768, lengths=[768, 741, 702, 655], snapshot=True),
    dict(name="llama-3.2-3b-full-bs4-s768", shape="llama-3.2-3b", kind="train", method="full",
         batch=4, seq=768, lengths=[768, 741, 702, 655], snapshot=True),
    dict(name="llama-3.2-3b-lora-r10-mlp-bs4-s768", shape="llama-3.2-3b", kind="train", method="lora",
         r=10, alpha=20, targets=["gate_proj", "up_proj", "down_proj"], batch=4, seq=768,
         lengths=[768, 741, 702, 655]),
    dict(name="llama-3.2-3b-lora-r64-qv-bs4-s768", shape="llama-3.2-3b", kind="train", method="lora",
         r=64, alpha=128, targets=None, batch=4, seq=768, lengths=[768, 741, 702, 655]),
    dict(name="llama-3.2-3b-lora-r32-qv-bs4-s768-nopad", shape="llama-3.2-3b", kind="train", method="lora",
         r=32, alpha=64, targets=None, batch=4, seq=768),
    dict(name="llama-3.2-3b-lora-r32-qv-bs4-s768-eager", shape="llama-3.2-3b", kind="train", method="lora",
         r=32, alpha=64, targets=None, batch=4, seq=768, lengths=[768, 741, 702, 655], attn="eager"),
    dict(name="qwen3-0.6b-full-bs8-s2048", shape="qwen3-0.6b", kind="train", method="full",
         batch=8, seq=2048, snapshot=True),
    dict(name="llama-3.2-1b-full-fp32-autocast-fused-bs8-s1024", shape="llama-3.2-1b", kind="train",
         method="full", weights="fp32", autocast=True, fused=True, batch=8, seq=1024, snapshot=True),
    dict(name="llama-3.2-3b-lora-r16-all-gc-bs8-s2048", shape="llama-3.2-3b", kind="train", method="lora",
         r=16, alpha=32, targets="all-linear", batch=8, seq=2048, gc=True, snapshot=True),
    dict(name="llama-3.2-3b-generate-bs8-p1024-n256", shape="llama-3.2-3b", kind="generate",
         batch=8, seq=1024, new_tokens=256),
    dict(name="llama-3.1-8b-lora-r16-qv-bs2-s2048", shape="llama-3.1-8b", kind="train", method="lora",
         r=16, alpha=32, targets=None, batch=2, seq=2048),
    # kind "trainer": the Hugging Face Trainer with its defaults (optimizer, no held output), 3 steps.
    dict(name="llama-3.2-1b-trainer-fp32-bf16amp-bs8-s1024", shape="llama-3.2-1b", kind="trainer", method="full",
         weights="fp32", bf16=True, batch=8, seq=1024),
    dict(name="qwen3-0.6b-trainer-bf16-bs8-s2048", shape="qwen3-0.6b", kind="trainer", method="full",
         bf16=True, batch=8, seq=2048),
    dict(name="llama-3.2-3b-trainer-lora-r16-all-gc-bs8-s2048", shape="llama-3.2-3b", kind="trainer",
         method="lora", r=16, alpha=32, targets="all-linear", batch=8, seq=2048, gc=True, bf16=True),
    # The Trainer as most LoRA scripts run it (2026-11-27): gradient_checkpointing with the Trainer's own
    # kwargs (gc_kwargs None: whatever gradient_checkpointing_enable defaults to, reentrant in transformers
    # 4.35 to 4.x, non-reentrant from 5.0: 5.17 built {'use_reentrant': False}), PEFT's lora_dropout 0.05, bf16 (accelerate's autocast over the 16-bit model). The olmo3 job is
    # axolotl's examples/olmo3 run (HFX-axolotl-olmo3-7b-qlora-r32) without the 4-bit base, flash-attn,
    # packing and the 8-bit optimizer, none of which this machine has.
    dict(name="olmo3-7b-trainer-lora-r32-all-d0.05-gcdefault-bs1-s4096", shape="olmo3-7b", kind="trainer",
         method="lora", r=32, alpha=16, dropout=0.05, targets="all-linear", batch=1, seq=4096, gc=True,
         gc_kwargs=None, bf16=True, snapshot=True),
    dict(name="llama-3.2-3b-trainer-lora-r16-all-d0.05-gcdefault-bs8-s2048", shape="llama-3.2-3b",
         kind="trainer", method="lora", r=16, alpha=32, dropout=0.05, targets="all-linear", batch=8, seq=2048,
         gc=True, gc_kwargs=None, bf16=True, snapshot=True),
    dict(name="llama-3.2-3b-trainer-lora-r16-all-gcdefault-bs8-s2048", shape="llama-3.2-3b", kind="trainer",
         method="lora", r=16, alpha=32, targets="all-linear", batch=8, seq=2048, gc=True, gc_kwargs=None,
         bf16=True, snapshot=True),
    dict(name="llama-3.1-8b-trainer-lora-r16-all-d0.05-gcdefault-bs4-s2048", shape="llama-3.1-8b",
         kind="trainer", method="lora", r=16, alpha=32, dropout=0.05, targets="all-linear", batch=4, seq=2048,
         gc=True, gc_kwargs=None, bf16=True),
    # Gemma 3 12B's text layers (2026-11-27): the Trainer with LoRA and checkpointing, and PEFT's loop
    # without checkpointing (every windowed layer keeps its SDPA mask bias at 2,048 tokens > the window).
    dict(name="gemma3-12b-trainer-lora-r16-all-gcdefault-bs2-s2048", shape="gemma3-12b", kind="trainer",
         method="lora", r=16, alpha=32, targets="all-linear", batch=2, seq=2048, gc=True, gc_kwargs=None,
         bf16=True, snapshot=True),
    dict(name="gemma3-12b-lora-r16-all-bs1-s2048", shape="gemma3-12b", kind="train", method="lora",
         r=16, alpha=32, targets="all-linear", batch=1, seq=2048, snapshot=True),
    # Gemma 2 9B under the Trainer with LoRA and checkpointing, eager attention (the soft-capping path
    # its model card asks for), one 4,096-token row; and the 3B Trainer job run for 20 steps, to see
    # whether its reserve still grows after the third.
    dict(name="gemma2-9b-trainer-lora-r16-all-gcdefault-eager-bs1-s4096", shape="gemma2-9b", kind="trainer",
         method="lora", r=16, alpha=32, targets="all-linear", batch=1, seq=4096, gc=True, gc_kwargs=None,
         bf16=True, attn="eager", snapshot=True),
    dict(name="llama-3.2-3b-trainer-lora-r16-all-gcdefault-bs8-s2048-20steps", shape="llama-3.2-3b",
         kind="trainer", method="lora", r=16, alpha=32, targets="all-linear", batch=8, seq=2048, gc=True,
         gc_kwargs=None, bf16=True, steps=20),
    # Full fine-tuning under the Trainer with checkpointing (every weight trains: the recomputed layer keeps
    # the linears' inputs for their weight gradients), bf16 weights and AdamW states.
    dict(name="llama-3.2-3b-trainer-full-gcdefault-bs4-s2048", shape="llama-3.2-3b", kind="trainer",
         method="full", batch=4, seq=2048, gc=True, gc_kwargs=None, bf16=True, snapshot=True),
    # Dynamic shapes (2026-11-28): ms-swift's benchmark (validation/SWIFT-*) runs batch 1 with truncation
    # 'delete', so every sample runs at its own length, and reads max_memory_reserved over the whole run.
    # The same Trainer job at a fixed length and at lengths drawn per sample, the peaks never reset
    # (reset_peaks False), to see what the caching allocator keeps when request sizes change step by step.
    # "lengths": the kept samples' lengths: a normal of the dataset's token statistics (cls-fudan-news-zh
    # under the Qwen tokenizer: 3234.4 +- 2547.5, min 91) cut to [lo, hi], or uniform on [lo, hi]; GA 16 and
    # reentrant checkpointing with the inputs' require-grad hook, as ms-swift 97e4d198b's sft.py runs them.
    dict(name="qwen-1.8b-trainer-lora-r8-qkv-gcre-ga16-bs1-s2048-fixed", shape="qwen-1.8b", kind="trainer",
         method="lora", r=8, alpha=32, dropout=0.05, targets=["q_proj", "k_proj", "v_proj"], batch=1, seq=2048,
         gc=True, gc_kwargs={"use_reentrant": True}, bf16=True, ga=16, steps=3, reset_peaks=False),
    dict(name="qwen-1.8b-trainer-lora-r8-qkv-gcre-ga16-bs1-dyn2048", shape="qwen-1.8b", kind="trainer",
         method="lora", r=8, alpha=32, dropout=0.05, targets=["q_proj", "k_proj", "v_proj"], batch=1, seq=2048,
         gc=True, gc_kwargs={"use_reentrant": True}, bf16=True, ga=16, steps=8, reset_peaks=False,
         lengths=dict(kind="normal", mean=3234.4, sd=2547.5, lo=91, hi=2048, seed=1)),
    dict(name="qwen-1.8b-trainer-lora-r8-qkv-gcre-ga16-bs1-dyn512", shape="qwen-1.8b", kind="trainer",
         method="lora", r=8, alpha=32, dropout=0.05, targets=["q_proj", "k_proj", "v_proj"], batch=1, seq=512,
         gc=True, gc_kwargs={"use_reentrant": True}, bf16=True, ga=16, steps=8, reset_peaks=False,
         lengths=dict(kind="normal", mean=3234.4, sd=2547.5, lo=91, hi=512, seed=1)),
    dict(name="qwen-1.8b-trainer-lora-r8-qkv-gcre-ga16-bs1-s512-fixed", shape="qwen-1.8b", kind="trainer",
         method="lora", r=8, alpha=32, dropout=0.05, targets=["q_proj", "k_proj", "v_proj"], batch=1, seq=512,
         gc=True, gc_kwargs={"use_reentrant": True}, bf16=True, ga=16, steps=3, reset_peaks=False),
    dict(name="qwen-1.8b-trainer-lora-r8-qkv-gcre-ga16-bs1-dyn2048-expandable", shape="qwen-1.8b",
         kind="trainer", method="lora", r=8, alpha=32, dropout=0.05, targets=["q_proj", "k_proj", "v_proj"],
         batch=1, seq=2048, gc=True, gc_kwargs={"use_reentrant": True}, bf16=True, ga=16, steps=8,
         reset_peaks=False, env={"PYTORCH_ALLOC_CONF": "expandable_segments:True"},
         lengths=dict(kind="normal", mean=3234.4, sd=2547.5, lo=91, hi=2048, seed=1)),
    dict(name="qwen-1.8b-trainer-lora-r8-qkv-gcre-ga16-bs1-uni2048", shape="qwen-1.8b", kind="trainer",
         method="lora", r=8, alpha=32, dropout=0.05, targets=["q_proj", "k_proj", "v_proj"], batch=1, seq=2048,
         gc=True, gc_kwargs={"use_reentrant": True}, bf16=True, ga=16, steps=20, reset_peaks=False,
         lengths=dict(kind="uniform", lo=91, hi=2048, seed=1)),
]

MARKS = ["forward", "loss_ready", "backward_done", "clipped", "stepped"]
MARK_BYTES = {label: 512 * (101 + i) for i, label in enumerate(MARKS)}


def device_used():
    import torch
    free, total = torch.cuda.mem_get_info()
    return total - free


def smi():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.used,memory.total,driver_version",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
        return {"gpu": out.stdout.strip(), "apps": apps.stdout.strip()}
    except Exception as exc:  # the figure is a cross-check, not the measurement
        return {"error": repr(exc)}


def versions():
    import torch
    found = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda}
    for mod in ("transformers", "peft", "accelerate"):
        try:
            found[mod] = __import__(mod).__version__
        except Exception as exc:
            found[mod] = repr(exc)
    found["gpu"] = torch.cuda.get_device_name(0)
    return found


def mark(label):
    """A uniquely sized allocation freed at once: a phase boundary in the allocator's history."""
    import torch
    t = torch.empty(MARK_BYTES[label], dtype=torch.uint8, device="cuda")
    del t


def make_model(shape, path):
    import torch
    import transformers
    spec = dict(SHAPES[shape])
    arch = spec.pop("arch")
    config_cls, model_cls = (getattr(transformers, name) for name in CLASSES[arch])
    config = config_cls(**spec)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = model_cls(config)
    torch.set_default_dtype(torch.float32)
    model.save_pretrained(path)
    return sum(p.numel() for p in model.parameters())


def load_model(job, path):
    import torch
    import transformers
    dtype = torch.float32 if job.get("weights") == "fp32" else torch.bfloat16
    return transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=dtype, device_map="cuda", attn_implementation=job.get("attn", "sdpa"))


def sample_lengths(spec, seq, count):
    """Per-sample token counts: all `seq` without a spec, else drawn with a fixed seed (see JOBS)."""
    if not spec:
        return [seq] * count
    import random
    rng = random.Random(spec.get("seed", 0))
    out = []
    while len(out) < count:
        if spec["kind"] == "uniform":
            n = rng.randint(spec["lo"], spec["hi"])
        else:
            n = int(round(rng.gauss(spec["mean"], spec["sd"])))
            if n < spec["lo"] or n > spec["hi"]:
                continue  # truncation 'delete': samples outside are dropped
        out.append(n)
    return out


def segment_list():
    """The caching allocator's segments: [total, allocated, stream, blocks], largest first (at most 300)."""
    import torch
    segs = [[s["total_size"], s["allocated_size"], s.get("stream", 0), len(s.get("blocks", []))]
            for s in torch.cuda.memory_snapshot()]
    segs.sort(key=lambda x: -x[0])
    return segs[:300]


def make_batch(job, vocab):
    import torch
    bs, seq = job["batch"], job["seq"]
    lengths = job.get("lengths") or [seq] * bs
    ids = torch.randint(0, vocab, (bs, seq), device="cuda")
    mask = torch.zeros(bs, seq, dtype=torch.long, device="cuda")
    labels = ids.clone()
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
        labels[i, n + 1:] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def frame_key(frames, depth=4):
    if not frames:
        return "<no python frame: autograd engine or C++>"
    parts = []
    for f in frames[:depth]:
        name = f.get("filename", "?")
        short = "/".join(name.split("/")[-2:])
        parts.append(f"{short}:{f.get('line', '?')}:{f.get('name', '?')}")
    return " < ".join(parts)


def analyze(snapshot, baseline):
    """The tensors alive at the allocated peak of the recorded interval, grouped by allocating frames."""
    traces = snapshot["device_traces"][0]
    cur, peak, peak_index = 0, 0, -1
    for i, e in enumerate(traces):
        if e["action"] == "alloc":
            cur += e["size"]
            if cur > peak:
                peak, peak_index = cur, i
        elif e["action"] == "free_completed":
            cur -= e["size"]
    live = {}
    marks = []
    label_of = {size: label for label, size in MARK_BYTES.items()}
    for i, e in enumerate(traces):
        if e["action"] == "alloc":
            if e["size"] in label_of and any(f.get("name") == "mark" for f in e.get("frames", [])):
                marks.append((label_of[e["size"]], i))
            if i <= peak_index:
                live[e["addr"]] = (e["size"], frame_key(e.get("frames", [])), i)
        elif e["action"] == "free_completed" and i <= peak_index:
            live.pop(e["addr"], None)
    groups = {}
    for size, key, index in live.values():
        g = groups.setdefault(key, {"bytes": 0, "count": 0, "first_index": index, "sizes": {}})
        g["bytes"] += size
        g["count"] += 1
        g["first_index"] = min(g["first_index"], index)
        g["sizes"][size] = g["sizes"].get(size, 0) + 1
    ranked = sorted(groups.items(), key=lambda kv: -kv[1]["bytes"])
    for _, g in ranked:
        g["sizes"] = sorted(((s, n) for s, n in g["sizes"].items()), key=lambda sn: -sn[0] * sn[1])[:6]
    segments = {}
    for seg in snapshot.get("segments", []):
        kind = seg.get("segment_type", "?")
        s = segments.setdefault(kind, {"count": 0, "total": 0, "allocated": 0})
        s["count"] += 1
        s["total"] += seg.get("total_size", 0)
        s["allocated"] += seg.get("allocated_size", 0)
    return {"baseline_allocated": baseline, "trace_peak_over_baseline": peak, "peak_index": peak_index,
            "entries": len(traces), "marks": marks, "segments_at_end": segments,
            "alive_at_peak": [{"site": k, **g} for k, g in ranked[:80]]}


def save_snapshot(job, snap, baseline, out_dir, rec):
    """The peak analysis into the job's record, the raw history beside it (dropped over 15 MiB)."""
    try:
        rec["peak_analysis"] = analyze(snap, baseline)
    except Exception:
        rec["peak_analysis_error"] = traceback.format_exc()
    try:
        raw = os.path.join(out_dir, f"snapshot-{job['name']}.pickle.gz")
        with gzip.open(raw, "wb", compresslevel=3) as fh:
            pickle.dump(snap, fh)
        if os.path.getsize(raw) > 15 * 1024 * 1024:
            os.remove(raw)
            rec["snapshot_file"] = "dropped: over 15 MiB"
        else:
            rec["snapshot_file"] = os.path.basename(raw)
    except Exception:
        rec["snapshot_file_error"] = traceback.format_exc()


def train(job, model, out_dir, rec):
    import torch
    if job.get("gc"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if job["method"] == "lora":
        import peft
        cfg = peft.LoraConfig(r=job["r"], lora_alpha=job["alpha"], lora_dropout=0.0,
                              target_modules=job["targets"], task_type="CAUSAL_LM")
        model = peft.get_peft_model(model, cfg)  # autocast_adapter_dtype=True: fp32 adapters
    rec["trainable_params"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    rec["trainable_dtypes"] = sorted({str(p.dtype) for p in model.parameters() if p.requires_grad})
    rec["after_wrap_allocated"] = torch.cuda.memory_allocated()
    params = [p for p in model.parameters() if p.requires_grad]
    opt_kwargs = {"lr": 1e-5}
    if job.get("fused"):
        opt_kwargs["fused"] = True
    optimizer = torch.optim.AdamW(params, **opt_kwargs)
    model.train()
    vocab = model.config.vocab_size if hasattr(model, "config") else SHAPES[job["shape"]]["vocab_size"]
    steps = []
    outputs = None
    for step in range(3):
        batch = make_batch(job, vocab)
        n_items = batch["attention_mask"].sum().item()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        recording = job.get("snapshot") and step == 2
        if recording:
            baseline = torch.cuda.memory_allocated()
            torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                                     max_entries=400000)
        t0 = time.perf_counter()
        optimizer.zero_grad()
        mark("forward")
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bool(job.get("autocast"))):
            outputs = model(**batch, num_items_in_batch=n_items)
            loss = outputs.loss
        mark("loss_ready")
        loss.backward()
        mark("backward_done")
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        mark("clipped")
        optimizer.step()
        mark("stepped")
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        steps.append({"step": step, "seconds": round(seconds, 4), "loss": float(loss.item()),
                      "max_allocated": torch.cuda.max_memory_allocated(),
                      "max_reserved": torch.cuda.max_memory_reserved(),
                      "allocated": torch.cuda.memory_allocated(),
                      "reserved": torch.cuda.memory_reserved(),
                      "device_used": device_used()})
        if recording:
            snap = torch.cuda.memory._snapshot()
            torch.cuda.memory._record_memory_history(enabled=None)
            save_snapshot(job, snap, baseline, out_dir, rec)
    rec["steps"] = steps
    rec["outputs_held_logits"] = list(outputs.logits.shape) + [str(outputs.logits.dtype)]


def trainer(job, model, out_dir, rec):
    """The Trainer's own loop (compute_loss returns the loss only), its default optimizer, 3 steps."""
    import torch
    import transformers
    if job.get("gc") and (job.get("gc_kwargs") or {}).get("use_reentrant"):
        model.enable_input_require_grads()  # as ms-swift's sft.py: reentrant checkpoints need an input with grad
    if job["method"] == "lora":
        import peft
        cfg = peft.LoraConfig(r=job["r"], lora_alpha=job["alpha"], lora_dropout=job.get("dropout", 0.0),
                              target_modules=job["targets"], task_type="CAUSAL_LM")
        model = peft.get_peft_model(model, cfg)
    rec["trainable_params"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    rec["trainable_dtypes"] = sorted({str(p.dtype) for p in model.parameters() if p.requires_grad})
    vocab = SHAPES[job["shape"]]["vocab_size"]

    lengths = sample_lengths(job.get("lengths"), job["seq"], 4000)
    served = []

    class Random(torch.utils.data.Dataset):
        def __len__(self):
            return len(lengths)

        def __getitem__(self, i):
            ids = torch.randint(0, vocab, (lengths[i],))
            served.append(lengths[i])
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}

    steps = []
    substeps = []
    recorded = {}
    reset_peaks = job.get("reset_peaks", True)

    class Memory(transformers.TrainerCallback):
        def on_substep_end(self, args, state, control, **kwargs):
            substeps.append([torch.cuda.memory_reserved(), torch.cuda.max_memory_reserved(),
                             torch.cuda.max_memory_allocated()])

        def on_step_begin(self, args, state, control, **kwargs):
            torch.cuda.synchronize()
            if reset_peaks:
                torch.cuda.reset_peak_memory_stats()
            if job.get("snapshot") and len(steps) == 2:  # the third (last) step, as the train kind records
                recorded["baseline"] = torch.cuda.memory_allocated()
                torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                                         max_entries=400000)

        def on_step_end(self, args, state, control, **kwargs):
            torch.cuda.synchronize()
            substeps.append([torch.cuda.memory_reserved(), torch.cuda.max_memory_reserved(),
                             torch.cuda.max_memory_allocated()])
            steps.append({"step": len(steps), "max_allocated": torch.cuda.max_memory_allocated(),
                          "max_reserved": torch.cuda.max_memory_reserved(),
                          "allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
                          "device_used": device_used()})
            if "baseline" in recorded and "done" not in recorded:
                recorded["done"] = True
                snap = torch.cuda.memory._snapshot()
                torch.cuda.memory._record_memory_history(enabled=None)
                save_snapshot(job, snap, recorded["baseline"], out_dir, rec)

    # gc_kwargs absent: non-reentrant, as this script's first trainer job ran; None: the Trainer's default.
    gc_kwargs = job.get("gc_kwargs", {"use_reentrant": False}) if job.get("gc") else None
    args = transformers.TrainingArguments(
        output_dir="/tmp/memplan-trainer", per_device_train_batch_size=job["batch"], max_steps=job.get("steps", 3),
        gradient_accumulation_steps=job.get("ga", 1), logging_steps=1000,
        bf16=bool(job.get("bf16")), gradient_checkpointing=bool(job.get("gc")),
        gradient_checkpointing_kwargs=gc_kwargs,
        save_strategy="no", report_to=[], dataloader_num_workers=0, disable_tqdm=True)
    rec["trainer_optim"] = str(args.optim)
    rec["gradient_checkpointing_kwargs"] = str(args.gradient_checkpointing_kwargs)
    t = transformers.Trainer(model=model, args=args, train_dataset=Random(), callbacks=[Memory()])
    t.train()
    gc_func = getattr(t.model, "_gradient_checkpointing_func", None)
    for module in t.model.modules():  # the layers hold the partial that gradient_checkpointing_enable built
        gc_func = getattr(module, "_gradient_checkpointing_func", None) or gc_func
    rec["gradient_checkpointing_func"] = repr(getattr(gc_func, "keywords", gc_func))
    rec["use_cache_after"] = str(getattr(getattr(t.model, "config", None), "use_cache", None))
    rec["steps"] = steps
    # per micro-batch: [reserved, max reserved, max allocated]; the lengths in the order the dataset served
    # them (the Trainer fetches an optimizer step's micro-batches ahead, accelerate one batch more); the
    # segments the run ends with.
    rec["substeps"] = substeps
    rec["served_lengths"] = served
    rec["segments_at_end"] = segment_list()


def generate(job, model, rec):
    import torch
    model.eval()
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (job["batch"], job["seq"]), device="cuda")
    mask = torch.ones_like(ids)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=job["new_tokens"],
                             min_new_tokens=job["new_tokens"], do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()
    rec["generated_shape"] = list(out.shape)
    rec["steps"] = [{"step": 0, "seconds": round(time.perf_counter() - t0, 3),
                     "max_allocated": torch.cuda.max_memory_allocated(),
                     "max_reserved": torch.cuda.max_memory_reserved(),
                     "allocated": torch.cuda.memory_allocated(),
                     "reserved": torch.cuda.memory_reserved(), "device_used": device_used()}]


def run_job(job, model_dir, out_dir):
    import torch
    rec = {"name": job["name"], "job": job}
    torch.cuda.init()
    rec["device_used_at_start"] = device_used()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    rec["device_used_after_context"] = device_used()
    rec["versions"] = versions()
    t0 = time.perf_counter()
    model = load_model(job, os.path.join(model_dir, job["shape"]))
    torch.cuda.synchronize()
    rec["load_seconds"] = round(time.perf_counter() - t0, 2)
    rec["after_load"] = {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
                         "max_allocated": torch.cuda.max_memory_allocated(),
                         "max_reserved": torch.cuda.max_memory_reserved(), "device_used": device_used()}
    rec["param_count"] = sum(p.numel() for p in model.parameters())
    if job["kind"] == "train":
        train(job, model, out_dir, rec)
    elif job["kind"] == "trainer":
        trainer(job, model, out_dir, rec)
    else:
        generate(job, model, rec)
    rec["overall_max_reserved"] = torch.cuda.max_memory_reserved()
    rec["smi_at_end"] = smi()
    return rec


def context_probe():
    """What the process holds beside the caching allocator, step by step (the 'CUDA context' a run pays)."""
    import torch
    import torch.nn.functional as F
    rec = {"name": "cuda-context-probe", "smi_before": smi()}
    torch.cuda.init()
    before = device_used()  # mem_get_info creates the context: this is context + driver reservations
    rec["device_used_first_call"] = before
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    rec["after_first_tensor"] = {"device_used": device_used(), "reserved": torch.cuda.memory_reserved()}
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = a @ a
    torch.cuda.synchronize()
    rec["after_bf16_matmul"] = {"device_used": device_used(), "reserved": torch.cuda.memory_reserved()}
    a32 = torch.randn(4096, 4096, device="cuda", requires_grad=True)
    (a32 @ a32).sum().backward()
    torch.cuda.synchronize()
    rec["after_fp32_matmul_backward"] = {"device_used": device_used(), "reserved": torch.cuda.memory_reserved()}
    q = torch.randn(4, 24, 2048, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    o = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    o.sum().backward()
    torch.cuda.synchronize()
    rec["after_sdpa"] = {"device_used": device_used(), "reserved": torch.cuda.memory_reserved()}
    try:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
        t = torch.ones(1 << 20, device="cuda")
        dist.all_reduce(t)
        torch.cuda.synchronize()
        rec["after_nccl_all_reduce"] = {"device_used": device_used(), "reserved": torch.cuda.memory_reserved()}
        dist.destroy_process_group()
    except Exception as exc:
        rec["nccl_error"] = repr(exc)
    rec["smi_at_end"] = smi()
    rec["versions"] = versions()
    del x, b
    return rec


def child(argv):
    mode, arg, model_dir, out_dir = argv
    if mode == "make":
        t0 = time.perf_counter()
        n = make_model(arg, os.path.join(model_dir, arg))
        print(json.dumps({"made": arg, "params": n, "seconds": round(time.perf_counter() - t0, 1)}))
        return
    if mode == "context":
        rec = context_probe()
    else:
        job = next(j for j in JOBS if j["name"] == arg)
        try:
            rec = run_job(job, model_dir, out_dir)
        except Exception:
            rec = {"name": job["name"], "job": job, "error": traceback.format_exc()}
            try:
                import torch
                rec["max_allocated_before_error"] = torch.cuda.max_memory_allocated()
            except Exception:
                pass
    with open(os.path.join(out_dir, "results.jsonl"), "a") as fh:
        fh.write(json.dumps(rec) + "\n")


def summary_line(rec):
    if "error" in rec:
        return f"{rec['name']}: ERROR {rec['error'].strip().splitlines()[-1]}"
    if rec["name"] == "cuda-context-probe":
        keys = ["device_used_first_call", "after_first_tensor", "after_bf16_matmul", "after_sdpa",
                "after_nccl_all_reduce"]
        parts = []
        for k in keys:
            v = rec.get(k)
            if isinstance(v, dict):
                parts.append(f"{k}={v['device_used'] / 2**20:.0f}MiB(res {v['reserved'] / 2**20:.0f})")
            elif v is not None:
                parts.append(f"{k}={v / 2**20:.0f}MiB")
        return "context: " + " ".join(parts)
    s = rec["steps"]
    peak_a = max(x["max_allocated"] for x in s)
    peak_r = max(x["max_reserved"] for x in s)
    peak_d = max(x["device_used"] for x in s)
    return (f"{rec['name']}: alloc {peak_a / 2**30:.3f} GiB, reserved {peak_r / 2**30:.3f} GiB, "
            f"device {peak_d / 2**30:.3f} GiB, per-step alloc "
            + "/".join(f"{x['max_allocated'] / 2**30:.3f}" for x in s))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="/tmp/memplan-models")
    ap.add_argument("--only", default="")
    ap.add_argument("--job-timeout", type=int, default=150)
    ap.add_argument("--no-context", action="store_true", help="skip the CUDA context probe")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.models, exist_ok=True)
    wanted = [j for j in JOBS if not args.only or j["name"] in args.only.split(",")]
    me = os.path.abspath(__file__)

    def sub(mode, arg):
        t0 = time.perf_counter()
        try:
            env = dict(os.environ)
            if mode == "job":
                env.update(next(j for j in JOBS if j["name"] == arg).get("env", {}))
            done = subprocess.run([sys.executable, me, "--child", mode, arg, args.models, args.out],
                                  timeout=args.job_timeout, capture_output=True, text=True, env=env)
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            print(f"[{time.perf_counter() - t0:6.1f} s] {mode} {arg}: rc {done.returncode} " + " | ".join(tail),
                  flush=True)
        except subprocess.TimeoutExpired:
            print(f"[{time.perf_counter() - t0:6.1f} s] {mode} {arg}: TIMEOUT", flush=True)

    if not args.no_context:
        sub("context", "-")
    for job in wanted:
        if not os.path.exists(os.path.join(args.models, job["shape"], "config.json")):
            sub("make", job["shape"])
        sub("job", job["name"])
    print("\n== summary ==")
    with open(os.path.join(args.out, "results.jsonl")) as fh:
        for line in fh:
            print(summary_line(json.loads(line)))


if __name__ == "__main__":
    main()
