"""`settle_heap`: a service's own process freezes what it built at start and collects its young
generation less often; any other process (a test run starting services in-process) is left as
it is, since frozen cyclic garbage is never collected."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import gc
from shared.runtime import YOUNG_GENERATION_THRESHOLD, service_process, settle_heap
from shared.settings import CommonSettings

default = gc.get_threshold()
settle_heap()
print("outside", gc.get_freeze_count(), gc.get_threshold() == default)
with service_process(CommonSettings(), "probe"):
    settle_heap()
    print("inside", gc.get_freeze_count(), gc.get_threshold()[0] == YOUNG_GENERATION_THRESHOLD)
"""


def test_only_a_service_process_settles_its_heap() -> None:
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    outside, inside = (line.split() for line in result.stdout.splitlines()[-2:])
    assert outside == ["outside", "0", "True"]
    assert inside[0] == "inside" and int(inside[1]) > 10_000 and inside[2] == "True"
