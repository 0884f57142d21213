#!/usr/bin/env python3
"""Runs the shell blocks of one Markdown file, as a reader would (issue 13 item 7).

Every ```sh block of the file runs with bash (-e -o pipefail), in order, in a
scratch copy of the repository (4 MB without its build folders), where
`build` is a link to the build folder the tests run against. So a block
reads the examples and writes its own files (keys, bundles, an example
plugin's build folder, `> my-scenario.toml`) in the copy, never in the tree.
HOME, MEMPLAN_HOME and MEMPLAN_CACHE_DIR point into the scratch folder, and
build/bin is first on PATH, as README.md tells readers to arrange.

A block that cannot run in CI (it installs into /opt, runs the test suite
itself, fuzzes for hours, or shows a pattern with the reader's own files)
is preceded by a comment that says why, which this script prints:

    <!-- docs-test: skip: the reason -->

Usage: run_doc_blocks.py FILE.md SOURCE_DIR BUILD_DIR
Exit status 1 when a block fails; its output is printed with the file and line.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

SKIP = re.compile(r"<!--\s*docs-test:\s*skip:\s*(.+?)\s*-->")


def blocks(path):
    """(line, text, skip reason or None) of each ```sh block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    found = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            start = i + 1
            reason = None
            j = i - 1
            while j >= 0 and lines[j].strip() == "":
                j -= 1
            if j >= 0:
                match = SKIP.search(lines[j])
                if match:
                    reason = match.group(1)
            end = start
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            found.append((start, "\n".join(lines[start:end]) + "\n", reason))
            i = end + 1
        else:
            i += 1
    return found


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    doc, source, build = (os.path.abspath(arg) for arg in sys.argv[1:])
    shown = os.path.relpath(doc, source)
    failures = 0
    ran = skipped = 0
    with tempfile.TemporaryDirectory(prefix="memplan-docs-") as scratch:
        tree = os.path.join(scratch, "repo")
        shutil.copytree(source, tree, symlinks=True,
                        ignore=lambda folder, names: [n for n in names if folder == source and
                                                      (n == ".git" or n == "build" or n.startswith("build-"))])
        os.symlink(build, os.path.join(tree, "build"))
        home = os.path.join(scratch, "home")
        os.mkdir(home)
        env = dict(os.environ)
        env.update({
            "HOME": home,
            "MEMPLAN_HOME": os.path.join(home, "memplan"),
            "MEMPLAN_CACHE_DIR": os.path.join(home, "cache"),
            "PATH": os.path.join(build, "bin") + os.pathsep + env.get("PATH", ""),
        })
        env.pop("MEMPLAN_PLUGIN_PATH", None)
        for line, text, reason in blocks(doc):
            if reason is not None:
                print(f"{shown}:{line}: skipped: {reason}")
                skipped += 1
                continue
            # The build folder is the real one: a block that configures or rebuilds
            # it would pull it from under the tests running beside this one.
            # (What follows a `cd` runs in another folder.)
            before_cd = re.split(r"(^|&&\s*)cd\s", text, maxsplit=1, flags=re.M)[0]
            if re.search(r"(^|\s)tools/run-|-B\s+build(\s|$)", before_cd, re.M):
                failures += 1
                print(f"{shown}:{line}: the block configures or builds build/, which the tests use; mark it "
                      "<!-- docs-test: skip: why --> or build elsewhere")
                continue
            ran += 1
            # A session of its own, so that a block that times out is stopped with
            # everything it started (a server it runs in the background, a build).
            process = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", text], cwd=tree, env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                output, _ = process.communicate(timeout=300)
                status = process.returncode
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                output, _ = process.communicate()
                status = "timeout after 300 s"
            if status != 0:
                failures += 1
                output = output.decode("utf-8", "replace")
                print(f"{shown}:{line}: the block fails (exit status {status}):\n{text}--- output ---\n"
                      f"{output[-4000:]}")
            else:
                print(f"{shown}:{line}: ok")
    print(f"{shown}: {ran} blocks ran, {skipped} skipped, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
