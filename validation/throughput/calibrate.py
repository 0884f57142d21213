#!/usr/bin/env python3
"""Finds each table's one efficiency and prints every row's error.

memplan's step time is A / efficiency + B (compute and bubble scale with
1/efficiency, exposed communication does not: docs/step-time.md, section 3),
so two runs of the anchor row at efficiencies 0.5 and 0.25 give A and B, and
the efficiency that reproduces the anchor's published figure is A / (T - B),
T the anchor's published step time (tokens per step / tokens/s; or memplan's
model FLOPs / (published MFU x peak)). Rounded to 4 decimals, it goes into
generate.py's EFFICIENCY.

    python3 validation/throughput/calibrate.py build/bin/memplan            # the efficiencies
    python3 validation/throughput/calibrate.py build/bin/memplan --rows     # every row at the file's efficiency
    python3 validation/throughput/calibrate.py build/bin/memplan --hidden   # what-if: all communication hidden

--hidden is not memplan's model: it drops B (every collective hidden behind
compute, as FSDP's prefetching and Megatron-LM's overlap options aim for),
solves the table's efficiency A / T on the same anchor, and prints each row's
error then (docs/step-time.md, "Published throughput").
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def header(text):
    keys = {}
    for line in text.splitlines():
        m = re.match(r"# (\w+) = (.*)", line)
        if m:
            keys[m.group(1)] = m.group(2)
    return keys


def run(memplan, text, efficiency=None):
    if efficiency is not None:
        text = re.sub(r"^efficiency = .*$", f"efficiency = {efficiency}", text, flags=re.M)
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(text)
    try:
        out = subprocess.run([memplan, "run", f.name, "--format", "json"], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if out.returncode not in (0, 1) or '"time"' not in out.stdout:
        sys.exit(f"memplan failed: {out.stderr}")
    return json.loads(out.stdout)["time"]


def measured(keys, t):
    return t["mfu"] if keys["metric"] == "mfu" else t["tokens_per_second"]


def main():
    memplan = sys.argv[1]
    files = sorted(glob.glob(os.path.join(HERE, "*.toml")))
    if "--rows" in sys.argv:
        for path in files:
            text = open(path).read()
            keys = header(text)
            t = run(memplan, text)
            got, pub = measured(keys, t), float(keys["published"])
            print(f"{keys['table']:14} {os.path.basename(path)[:-5]:20} published {pub:.10g} memplan {got:.10g} "
                  f"error {100 * (got / pub - 1):+6.1f} %  step {t['seconds_per_step']:.4g} s  mfu {t['mfu']:.4f} "
                  f"exposed comm {t['exposed_communication_seconds']:.4g} s bubble {t['bubble_seconds']:.4g} s")
        return
    if "--hidden" in sys.argv:
        rows, anchors = [], {}
        for path in files:
            text = open(path).read()
            keys = header(text)
            t1, t2 = run(memplan, text, 0.5), run(memplan, text, 0.25)
            a = (t2["seconds_per_step"] - t1["seconds_per_step"]) / (1 / 0.25 - 1 / 0.5)
            pub = float(keys["published"])
            target = t1["seconds_per_step"] * t1["mfu"] / pub if keys["metric"] == "mfu" else t1["tokens_per_step"] / pub
            rows.append((keys, os.path.basename(path)[:-5], a, target))
            if keys.get("anchor") == "true":
                anchors[keys["table"]] = a / target
        for keys, name, a, target in rows:
            e = anchors[keys["table"]]
            print(f"{keys['table']:14} {name:20} efficiency {e:.4f} error {100 * (target / (a / e) - 1):+6.1f} %")
        return
    for path in files:
        text = open(path).read()
        keys = header(text)
        if keys.get("anchor") != "true":
            continue
        t1, t2 = run(memplan, text, 0.5), run(memplan, text, 0.25)
        a = (t2["seconds_per_step"] - t1["seconds_per_step"]) / (1 / 0.25 - 1 / 0.5)
        b = t1["seconds_per_step"] - a / 0.5
        pub = float(keys["published"])
        if keys["metric"] == "mfu":
            target = t1["seconds_per_step"] * t1["mfu"] / pub
        else:
            target = t1["tokens_per_step"] / pub
        print(f"{keys['table']}: anchor {os.path.basename(path)[:-5]} efficiency {a / (target - b):.4f} "
              f"(A {a:.6g} s, B {b:.6g} s, T {target:.6g} s)")


main()
