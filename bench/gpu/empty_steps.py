"""Steps without compute on 1, 2 and 4 towers (every tower at the fastest speed: next to no
work), measured on TensorFlow and predicted with a profile: what the towers cost beyond their
compute. Usage: python bench/gpu/empty_steps.py PROFILE.json"""

from __future__ import annotations

import dataclasses
import statistics
import sys

from simsync.scenario import load_scenario
from simsync.scenario.profile import apply_profile, load_profile
from simsync.scenario.schema import MAX_SPEED
from simsync.simulation import median_step_time
from simsync.tf_backend import run_on_tensorflow

profile = load_profile(sys.argv[1])
base = load_scenario("examples/four_towers.toml")
for towers in (1, 2, 4):
    for speed in (MAX_SPEED, 1.0):
        cluster = dataclasses.replace(base.cluster, devices=towers, speeds=(speed,) * towers)
        scenario = dataclasses.replace(base, cluster=cluster).with_run(steps=2)
        real = run_on_tensorflow(scenario, warmup=5, timing_steps=40)
        measured = statistics.median(seconds for _, seconds in real.timed)
        predicted = median_step_time(apply_profile(scenario, profile), 40)
        work = "no work" if speed == MAX_SPEED else "10 ms each"
        print(
            f"{towers} towers, {work}: measured {measured * 1e3:.2f} ms, predicted "
            f"{predicted * 1e3:.2f} ms ({(predicted - measured) / measured:+.1%}); "
            f"{real.devices.describe()}"
        )
