"""Run the whole test suite: pytest, the numeric op tests again compiled for vulkan (when a
Vulkan device is present: Mesa lavapipe on a machine without a GPU), then lit. Fails if any
fails or runs no test.

Prints one closing line `total: N passed, N failed` over every run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _junit_counts(path: str) -> tuple[int, int, int]:
    """(passed, failed, skipped) from a JUnit XML report; zeros if it is missing."""
    if not os.path.exists(path):
        return 0, 0, 0
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = failed = skipped = 0
    for s in suites:
        total += int(s.get("tests", 0))
        failed += int(s.get("failures", 0)) + int(s.get("errors", 0))
        skipped += int(s.get("skipped", 0))
    return total - failed - skipped, failed, skipped


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _target_aware_modules() -> list[str]:
    """The tests/frontend modules whose compiled side follows `FLOW_TEST_TARGET` (they use
    tests/frontend/checks.py); the others would only run again unchanged."""
    folder = os.path.join("tests", "frontend")
    return [os.path.join(folder, name) for name in sorted(os.listdir(folder))
            if name.startswith("test_") and name.endswith(".py")
            and re.search(r"^from checks import", _read(os.path.join(folder, name)), re.M)]


def _vulkan_op_tests(xml: str) -> int | None:
    """The numeric op tests (tests/frontend) with their compiled side on vulkan; None, with a
    note, when there is no Vulkan device (the rest of the suite still covers the cpu)."""
    probe = "import flow.targets as t; raise SystemExit('vulkan' not in t.available())"
    if subprocess.call([sys.executable, "-c", probe]) != 0:
        print("note: no Vulkan device here: the op tests did not run on vulkan "
              "(apt-get install mesa-vulkan-drivers libvulkan1 gives one)")  # fmt: skip
        return None
    env = {**os.environ, "FLOW_TEST_TARGET": "vulkan"}
    cmd = [sys.executable, "-m", "pytest", "-q", f"--junitxml={xml}", *_target_aware_modules()]
    return subprocess.call(cmd, env=env)


def main(argv: list[str]) -> int:
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        py_xml, lit_xml = os.path.join(tmp, "pytest.xml"), os.path.join(tmp, "lit.xml")
        vk_xml = os.path.join(tmp, "vulkan.xml")
        py_rc = subprocess.call(
            [sys.executable, "-m", "pytest", "-q", f"--junitxml={py_xml}", *argv]
        )
        vk_rc = _vulkan_op_tests(vk_xml) if not argv else None
        lit_rc = subprocess.call(
            [
                sys.executable,
                "-c",
                "from lit.main import main; main()",
                "-sv",
                f"--xunit-xml-output={lit_xml}",
                "tests/lit",
            ]
        )
        py, lit, vk = _junit_counts(py_xml), _junit_counts(lit_xml), _junit_counts(vk_xml)
    problems = []
    if py_rc == 5 or py[0] + py[1] == 0:
        problems.append("pytest ran no test")
    elif py_rc != 0:
        problems.append(f"pytest failed (exit {py_rc})")
    if vk_rc is not None and (vk_rc == 5 or vk[0] + vk[1] == 0):
        problems.append("the vulkan op tests ran no test")
    elif vk_rc:
        problems.append(f"the vulkan op tests failed (exit {vk_rc})")
    if lit[0] + lit[1] == 0:
        problems.append("lit ran no test")
    elif lit_rc != 0:
        problems.append(f"lit failed (exit {lit_rc})")
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    print(f"pytest: {py[0]} passed, {py[1]} failed, {py[2]} skipped")
    if vk_rc is not None:
        print(f"pytest on vulkan (tests/frontend's target-aware modules): {vk[0]} passed, "
              f"{vk[1]} failed, {vk[2]} skipped")  # fmt: skip
    print(f"lit: {lit[0]} passed, {lit[1]} failed, {lit[2]} skipped")
    print(f"total: {py[0] + vk[0] + lit[0]} passed, {py[1] + vk[1] + lit[1]} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
