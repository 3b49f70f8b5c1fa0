#!/usr/bin/env python3
"""Checks overlays rendered from a copy of k8s/ whose base settings validate.sh changed to probe values:
every setting must reach every place that uses it (image, nodes, gpusPerNode, nodeInterface, rdmaDevice,
results), the Settings object itself must not be in the output (local-config), and no Secret may be.

Usage: settings_reach.py RENDERED.yaml...   Exit status: 0 all reached, 1 not so.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

IMAGE = "registry.invalid/probe:9.9"
NODES = 7
GPUS = 3
ENV = {"IFACE": "probe0", "RDMA_DEVICE": "probe_dev:2", "RESULTS": "/probe-results"}


def pods(doc: dict):
    """(where, pod spec) of every pod template in a Job or an MPIJob."""
    if doc.get("kind") == "Job":
        yield "", doc["spec"]["template"]["spec"]
    elif doc.get("kind") == "MPIJob":
        for rtype, rs in doc["spec"]["mpiReplicaSpecs"].items():
            yield rtype, rs["template"]["spec"]


def check(path: str) -> list[str]:
    errs: list[str] = []
    docs = [d for d in yaml.safe_load_all(Path(path).read_text()) if isinstance(d, dict)]
    name = Path(path).stem
    results_env = 0
    for d in docs:
        kind, what = d.get("kind"), f"{name}: {d.get('kind')}/{d.get('metadata', {}).get('name')}"
        if kind in ("Settings", "Secret"):
            errs.append(f"{what}: must not be in the rendered output")
        if kind == "MPIJob":
            if d["spec"]["mpiReplicaSpecs"]["Worker"].get("replicas") != NODES:
                errs.append(f"{what}: Worker replicas are not the nodes setting ({NODES})")
        if kind == "Job":
            for f in ("completions", "parallelism"):
                if d["spec"].get(f) != NODES:
                    errs.append(f"{what}: {f} is not the nodes setting ({NODES})")
        gpu_job = kind == "MPIJob" and name == "gpu"
        if gpu_job and d["spec"].get("slotsPerWorker") != GPUS:
            errs.append(f"{what}: slotsPerWorker is not gpusPerNode ({GPUS})")
        for where, pod in pods(d):
            for c in pod.get("containers", []):
                at = f"{what} {where} container {c.get('name')}"
                if c.get("image") != IMAGE:
                    errs.append(f"{at}: image {c.get('image')!r} is not the images setting {IMAGE!r}")
                env = {e["name"]: e.get("value") for e in c.get("env", [])}
                if env.get("COLLBENCH_WORLD_SIZE", str(NODES)) != str(NODES):
                    errs.append(f"{at}: COLLBENCH_WORLD_SIZE is not the nodes setting")
                for k, v in ENV.items():
                    if k in env and env[k] != v:
                        errs.append(f"{at}: {k}={env[k]!r}, not the setting {v!r}")
                results_env += "RESULTS" in env
                for m in c.get("volumeMounts", []):
                    if m.get("name") == "results" and m.get("mountPath") != ENV["RESULTS"]:
                        errs.append(f"{at}: the results mount is not the results setting")
                if gpu_job and where == "Worker":
                    for r in ("limits", "requests"):
                        if c.get("resources", {}).get(r, {}).get("nvidia.com/gpu") != GPUS:
                            errs.append(f"{at}: resources.{r} nvidia.com/gpu is not gpusPerNode ({GPUS})")
    if not results_env:
        errs.append(f"{name}: no container takes the results setting (RESULTS)")
    return errs


def main() -> int:
    errs = [e for p in sys.argv[1:] for e in check(p)]
    for e in errs:
        print(f"FAIL {e}")
    print(f"{'FAILED' if errs else 'passed'}: settings reach {len(sys.argv) - 1} rendered overlays")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
