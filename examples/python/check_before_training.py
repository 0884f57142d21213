#!/usr/bin/env python3
"""A training script that checks its memory before it starts (docs/python.md).

The job's own configuration (CONFIG, with --micro-batch and --gpu from the
command line) becomes a memplan scenario; memplan.estimate says whether it
fits the GPU. If it does not, the script stops before loading anything, with
the shortfall and memplan's advice, instead of failing with an out-of-memory
error minutes into the run.

    PYTHONPATH=build/lib/python python3 examples/python/check_before_training.py
    PYTHONPATH=build/lib/python python3 examples/python/check_before_training.py --micro-batch 2
"""
import argparse
import sys

import memplan

GiB = 2**30

# The training job's configuration, as the script would read it from its own file.
CONFIG = {
    "model": "llama-2-7b",
    "gpu": "a100-sxm-40gb",
    "micro_batch": 1,
    "seq_len": 4096,
    "grad_accum": 8,
    "lora": {"rank": 8, "alpha": 32, "targets": "q,v"},
}


def scenario_for(config):
    """The memplan scenario of this job: a dict, as memplan.estimate takes it."""
    return {
        "name": "lora-" + config["model"],
        "mode": "train",
        "model": {"preset": config["model"]},
        "batch": {"micro_batch": config["micro_batch"], "seq_len": config["seq_len"],
                  "grad_accum": config["grad_accum"]},
        "precision": {"use": "mixed-bf16"},
        "optimizer": {"use": "adamw"},
        "activations": {"use": "megatron", "flash_attention": True, "dropout": False},
        "strategy": [dict(use="lora", **config["lora"])],
        "hardware": {"gpu": config["gpu"], "count": 1},
    }


def check_memory(config):
    """Exits with a clear message if the job does not fit its GPU."""
    try:
        report = memplan.estimate(scenario_for(config))
    except memplan.Error as error:  # a bad configuration: the message says where and why
        sys.exit(f"memplan could not estimate this job:\n{error}")
    peak = report["per_gpu"]["peak"] / GiB
    capacity = report["capacity"] / GiB
    if not report["fits"]:
        lines = [f"{report['scenario']} does not fit: {report['shortfall'] / GiB:.2f} GiB short "
                 f"(peak {peak:.2f} GiB on {report['gpu']}, {capacity:.1f} GiB)"]
        lines += ["  " + advice for advice in report["advice"]]
        sys.exit("\n".join(lines))
    print(f"{report['scenario']} fits: peak {peak:.2f} GiB of {capacity:.1f} GiB "
          f"({report['headroom'] / GiB:.2f} GiB to spare)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--micro-batch", type=int, default=CONFIG["micro_batch"])
    parser.add_argument("--gpu", default=CONFIG["gpu"])
    args = parser.parse_args()
    config = dict(CONFIG, micro_batch=args.micro_batch, gpu=args.gpu)
    check_memory(config)
    print("starting training ...")  # the real script would build its model and data loader here


if __name__ == "__main__":
    main()
