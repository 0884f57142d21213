"""Tests of the Python module memplan (core/python, docs/python.md).

Run by ctest (tests/python/CMakeLists.txt) with the Python the module was
built for, PYTHONPATH naming build/lib/python, MEMPLAN_CLI the memplan
binary and MEMPLAN_SOURCE_DIR the source tree.
"""
import json
import os
import subprocess
import unittest
import warnings

import memplan

CLI = os.environ["MEMPLAN_CLI"]
SOURCE = os.environ["MEMPLAN_SOURCE_DIR"]
EXAMPLE = os.path.join(SOURCE, "examples", "llama2-7b-single-gpu.toml")


def cli_json(path, *args):
    out = subprocess.run([CLI, "run", path, "--format", "json", *args], check=False, capture_output=True, text=True)
    return json.loads(out.stdout)


class EstimateText(unittest.TestCase):
    def test_toml_text_is_the_cli_report(self):
        with open(EXAMPLE, encoding="utf-8") as f:
            text = f.read()
        report = memplan.estimate(text, path=EXAMPLE)
        self.assertEqual(report, cli_json(EXAMPLE))
        self.assertEqual(report["schema"], "memplan.estimate/1")
        self.assertIs(report["fits"], False)

    def test_set_overrides_are_run_set(self):
        with open(EXAMPLE, encoding="utf-8") as f:
            text = f.read()
        sets = ["batch.micro_batch=2", "optimizer.use=sgd"]
        report = memplan.estimate(text, path=EXAMPLE, set=sets)
        self.assertEqual(report, cli_json(EXAMPLE, "--set", sets[0], "--set", sets[1]))
        self.assertEqual(report["batch"]["micro_batch"], 2)

    def test_other_formats_are_the_cli_text(self):
        with open(EXAMPLE, encoding="utf-8") as f:
            text = f.read()
        for fmt in ("table", "csv", "markdown"):
            cli = subprocess.run([CLI, "run", EXAMPLE, "--format", fmt], capture_output=True, text=True)
            self.assertEqual(memplan.estimate(text, path=EXAMPLE, format=fmt), cli.stdout, fmt)

    def test_unknown_format(self):
        with self.assertRaises(ValueError):
            memplan.estimate("", format="yaml")


SCENARIO = {
    "name": "from-a-dict",
    "mode": "train",
    "model": {"preset": "llama-2-7b"},
    "batch": {"micro_batch": 1, "seq_len": 4096, "grad_accum": 16},
    "precision": {"use": "mixed-bf16"},
    "optimizer": {"use": "adamw"},
    "activations": {"use": "megatron", "flash_attention": True, "dropout": False},
    "strategy": [{"use": "recompute", "policy": "full"}],
    "hardware": {"gpu": "h100-sxm-80gb", "count": 1},
}


class EstimateDict(unittest.TestCase):
    def test_dict_equals_the_same_toml(self):
        report = memplan.estimate(SCENARIO)
        cli = cli_json(EXAMPLE)
        self.assertEqual(report["scenario"], "from-a-dict")
        cli["scenario"] = "from-a-dict"
        self.assertEqual(report, cli)

    def test_array_of_tables_and_quoting(self):
        text = memplan.scenario_toml({"a": 1, "t": {"k": "x\"y", "odd key": 0.5}, "s": [{"u": 1}, {"u": 2}],
                                      "l": [1, 2], "b": True})
        self.assertEqual(text, 'a = 1\nl = [1, 2]\nb = true\n\n[t]\nk = "x\\"y"\n"odd key" = 0.5\n'
                               '\n[[s]]\nu = 1\n\n[[s]]\nu = 2\n')

    def test_bad_value_type(self):
        with self.assertRaises(TypeError):
            memplan.estimate({"name": object()})


class Errors(unittest.TestCase):
    def test_error_is_located(self):
        with self.assertRaises(memplan.Error) as caught:
            memplan.estimate('name = "x"\nmode = "train"\n\n[model]\npreset = "no-such-model"\n', path="job.toml")
        message = str(caught.exception)
        self.assertTrue(message.startswith("job.toml:5:10: error: in [model], 'preset' names no model"), message)

    def test_dict_error_points_into_its_toml(self):
        scenario = dict(SCENARIO, optimizer={"use": "adamw", "betas": "x"}, mode="sideways")
        with self.assertRaises(memplan.Error) as caught:
            memplan.estimate(scenario)
        self.assertRegex(str(caught.exception), r"^<scenario>:\d+:\d+: error: ")

    def test_bad_set(self):
        with self.assertRaises(memplan.Error):
            memplan.estimate(SCENARIO, set=["batch.micro_batch"])

    def test_error_is_an_exception(self):
        self.assertTrue(issubclass(memplan.Error, Exception))


class Plugins(unittest.TestCase):
    def test_lists_adamw(self):
        found = memplan.plugins()
        adamw = [p for p in found if p["name"] == "adamw"]
        self.assertEqual(len(adamw), 1)
        self.assertEqual(adamw[0]["kind"], "optimizer")
        self.assertTrue(os.path.isabs(adamw[0]["library"]), adamw[0])
        self.assertEqual(set(adamw[0]), {"kind", "name", "version", "library"})

    def test_same_as_cli(self):
        cli = subprocess.run([CLI, "plugins"], capture_output=True, text=True).stdout.splitlines()
        ours = ["\t".join([p["kind"], p["name"], p["version"], p["library"]]) for p in memplan.plugins()]
        self.assertEqual(ours, cli)


if __name__ == "__main__":
    unittest.main()
