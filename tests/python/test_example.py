"""examples/python/check_before_training.py: it starts when the job fits and
stops with status 1 and the shortfall when it does not."""
import os
import subprocess
import sys
import unittest

SCRIPT = os.path.join(os.environ["MEMPLAN_SOURCE_DIR"], "examples", "python", "check_before_training.py")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


class CheckBeforeTraining(unittest.TestCase):
    def test_fits(self):
        # 39.4 GiB: the A100 40GB's capacity is the 39.39 GiB CUDA reports (gpus.toml cuda_total_gib).
        out = run()
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertRegex(out.stdout, r"lora-llama-2-7b fits: peak \d+\.\d\d GiB of 39\.4 GiB")
        self.assertIn("starting training", out.stdout)

    def test_does_not_fit(self):
        out = run("--micro-batch", "2")
        self.assertEqual(out.returncode, 1)
        self.assertRegex(out.stderr, r"does not fit: \d+\.\d\d GiB short")
        self.assertNotIn("starting training", out.stdout)

    def test_bad_gpu_is_located(self):
        out = run("--gpu", "no-such-gpu")
        self.assertEqual(out.returncode, 1)
        self.assertRegex(out.stderr, r"<scenario>:\d+:\d+: error: ")


if __name__ == "__main__":
    unittest.main()
