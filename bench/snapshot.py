"""A refactoring check: every bundled scenario's outputs, hashed, to compare two versions.

Not a benchmark: run it on the code before a change and after, and compare the two files.
Each scenario (examples, lessons, assignments) is simulated with its own settings and, to
reach past the first steps, with more steps and other seeds; for each run it keeps the
``--json`` summary (as text, so every float compares bit for bit), the hash of every trace
list, the parameters and the values.

Usage::

    python bench/snapshot.py before.json          # on the old code
    python bench/snapshot.py after.json           # on the new code
    python bench/snapshot.py --compare before.json after.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: summary keys that measure this machine, not the simulation
UNSTABLE = ("wall_seconds",)
LISTS = ("ops", "transfers", "accesses", "reads", "steps", "updates", "resources")


def scenarios() -> list[Path]:
    found = [*ROOT.glob("examples/*.toml"), *ROOT.glob("lessons/*/*.toml")]
    found += ROOT.glob("assignments/*/scenario.toml")
    return sorted(p for p in found if p.name not in ("lesson.toml", "assignment.toml"))


def digest(value: object) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def record(path: Path, steps: int | None, seed: int | None) -> dict[str, object]:
    from simsync.errors import SimsyncError
    from simsync.scenario import load_scenario
    from simsync.simulation import simulate, summary

    scenario = load_scenario(path)
    if steps is not None or seed is not None:
        scenario = scenario.with_run(
            steps=steps or scenario.run.steps, seed=seed if seed is not None else scenario.run.seed
        )
    try:
        sim = simulate(scenario)
    except SimsyncError as error:
        return {"error": str(error)}
    trace = sim.trace
    facts = {k: v for k, v in summary(sim).items() if k not in UNSTABLE}
    # the file as the checkout names it: two checkouts of one version compare alike
    facts["source"] = str(Path(str(facts.get("source") or path)).resolve().relative_to(ROOT))
    out: dict[str, object] = {"summary": json.dumps(facts, sort_keys=True, default=str)}
    out |= {name: digest(getattr(trace, name)) for name in LISTS}
    out["params"] = digest({k: v.tolist() for k, v in sorted(trace.params.items())})
    out["values"] = digest({k: repr(v) for k, v in sorted(trace.values.items())})
    out["events"] = trace.events
    return out


def snapshot() -> dict[str, object]:
    result: dict[str, object] = {}
    for path in scenarios():
        name = str(path.relative_to(ROOT))
        for steps, seed in ((None, None), (40, 7)):
            result[f"{name} steps={steps} seed={seed}"] = record(path, steps, seed)
    return result


def compare(before: Path, after: Path) -> int:
    one, two = json.loads(before.read_text()), json.loads(after.read_text())
    differ = [k for k in sorted(set(one) | set(two)) if one.get(k) != two.get(k)]
    for key in differ:
        fields = sorted(set(one.get(key, {})) | set(two.get(key, {})))
        changed = [f for f in fields if one.get(key, {}).get(f) != two.get(key, {}).get(f)]
        print(f"{key}: {', '.join(changed)}")
    print(f"{len(one)} runs compared, {len(differ)} differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
    parser.add_argument("--compare", action="store_true", help="compare two snapshots")
    args = parser.parse_args()
    if args.compare:
        return compare(*args.files[:2])
    args.files[0].write_text(json.dumps(snapshot(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.files[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
