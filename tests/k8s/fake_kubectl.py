#!/usr/bin/env python3
"""A stand-in for kubectl whose "cluster" is this machine: enough of kubectl for the preflight gate
(k8s/overlays/preflight-gate/gate.sh) and the workflow docs/kubernetes.md shows, run for real.

- `apply -k DIR` renders DIR with the real kubectl (`kubectl kustomize`) and runs each Indexed Job's pods
  as local processes, all at once, until they end: the container's command and args with its env, the
  completion index in JOB_COMPLETION_INDEX, every volume a folder (configMap and secret volumes hold what
  `apply -f` stored), rank 0's pod name reached at 127.0.0.1 on a free port, and the pod's eth0 this
  machine's lo. A non-optional configMap or secret that is missing fails the pod, as it would never start.
- `apply -f -` stores ConfigMaps and Secrets; `create ...` is the real kubectl's `--dry-run=client` output
  (stored unless the command asked for the dry run itself); `get KIND/NAME`, `get job NAME -o jsonpath=...`
  (the conditions gate.sh reads), `delete job NAME` and `logs -l` (index and instance labels) answer from
  what ran (a deleted Job's folder is kept under deleted/, numbered in order). Anything else fails,
  naming the call.

Environment: FAKE_K8S_STATE (a folder for the state), FAKE_K8S_KUBECTL (the real kubectl). Needs PyYAML.
"""
import base64
import os
import shutil
import socket
import subprocess
import sys

import yaml

STATE = os.environ["FAKE_K8S_STATE"]
REAL = os.environ.get("FAKE_K8S_KUBECTL", "kubectl")


def fail(msg, code=1):
    print(f"kubectl stand-in: {msg}", file=sys.stderr)
    sys.exit(code)


def stored(kind, name):
    return os.path.join(STATE, kind.lower(), name)


def store(doc):
    kind, name = doc["kind"], doc["metadata"]["name"]
    if kind not in ("ConfigMap", "Secret"):
        fail(f"apply -f: only ConfigMap and Secret are kept, not {kind}")
    d = stored(kind, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for key, value in (doc.get("data") or {}).items():
        raw = base64.b64decode(value) if kind == "Secret" else value.encode()
        with open(os.path.join(d, key), "wb") as f:
            f.write(raw)
    for key, value in (doc.get("stringData") or {}).items():
        with open(os.path.join(d, key), "w") as f:
            f.write(value)
    print(f"{kind.lower()}/{name} configured")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(job, services):
    name = job["metadata"]["name"]
    spec = job["spec"]
    if spec.get("completionMode") != "Indexed":
        fail(f"job/{name}: only Indexed Jobs run here")
    pod = spec["template"]["spec"]
    (c,) = pod["containers"]
    jdir = stored("job", name)
    shutil.rmtree(jdir, ignore_errors=True)
    os.makedirs(jdir)
    port = free_port()
    subdomain = pod.get("subdomain", "")
    rank0 = f"{name}-0.{subdomain}"
    for svc in services:
        if svc == subdomain:
            break
    else:
        fail(f"job/{name}: no Service {subdomain!r} for its pods' names")
    ranks = []
    for i in range(int(spec["completions"])):
        mounts = {}
        broken = None
        for v in pod.get("volumes", []):
            if "emptyDir" in v:
                path = os.path.join(jdir, f"pod{i}-{v['name']}")
                os.makedirs(path)
            else:
                kind, src = ("ConfigMap", v["configMap"]) if "configMap" in v else ("Secret", v["secret"])
                path = stored(kind, src.get("name") or src.get("secretName"))
                if not os.path.isdir(path):
                    if src.get("optional"):
                        path = os.path.join(jdir, f"pod{i}-{v['name']}")
                        os.makedirs(path)
                    else:
                        broken = f"{kind.lower()} {src.get('name') or src.get('secretName')!r} not found"
            for m in c.get("volumeMounts", []):
                if m["name"] == v["name"]:
                    mounts[m["mountPath"]] = path

        def local(s):
            s = s.replace(rank0, "127.0.0.1").replace(":29500", f":{port}").replace("eth0", "lo")
            for where in sorted(mounts, key=len, reverse=True):
                s = s.replace(where, mounts[where])
            return s

        env = dict(os.environ)
        env.pop("FAKE_K8S_STATE", None)
        for e in c.get("env", []):
            if "value" not in e:
                fail(f"job/{name}: env {e['name']} has no plain value")
            env[e["name"]] = local(str(e["value"]))
        env["JOB_COMPLETION_INDEX"] = str(i)
        argv = [local(a) for a in c.get("command", []) + c.get("args", [])]
        log = open(os.path.join(jdir, f"{i}.log"), "wb")
        if broken:
            log.write(f"pod {name}-{i}: {broken}\n".encode())
            ranks.append((i, None))
            continue
        ranks.append((i, subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)))
    deadline = int(spec.get("activeDeadlineSeconds", 3600))
    for i, p in ranks:
        try:
            rc = 1 if p is None else p.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = 137
        with open(os.path.join(jdir, f"{i}.rc"), "w") as f:
            f.write(str(rc))


def apply_kustomization(path):
    out = subprocess.run([REAL, "kustomize", path], check=True, capture_output=True, text=True).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    services = [d["metadata"]["name"] for d in docs if d["kind"] == "Service"]
    for d in docs:
        print(f"{d['kind'].lower()}/{d['metadata']['name']} created")
    for d in docs:
        if d["kind"] == "Job":
            run_job(d, services)


def job_conditions(name):
    jdir = stored("job", name)
    if not os.path.isdir(jdir):
        fail(f'Error from server (NotFound): jobs.batch "{name}" not found')
    rcs = [open(os.path.join(jdir, f)).read() for f in os.listdir(jdir) if f.endswith(".rc")]
    print("Complete " if all(rc == "0" for rc in rcs) else "Failed ", end="")


def logs(selector):
    labels = dict(kv.split("=", 1) for kv in selector.split(","))
    jdir = stored("job", labels["app.kubernetes.io/instance"])
    index = labels["batch.kubernetes.io/job-completion-index"]
    with open(os.path.join(jdir, f"{index}.log"), "rb") as f:
        sys.stdout.buffer.write(f.read())


def main(args):
    # `--namespace NS` is accepted and ignored: the stand-in has one namespace.
    if args[:1] == ["--namespace"]:
        args = args[2:]
    match args:
        case ["apply", "-k", path]:
            apply_kustomization(path)
        case ["apply", "-f", "-"]:
            for doc in yaml.safe_load_all(sys.stdin):
                if doc:
                    store(doc)
        case ["create", *rest]:
            if "--dry-run=client" in rest:
                os.execvp(REAL, [REAL, "create", *rest])
            out = subprocess.run([REAL, "create", *rest, "--dry-run=client", "-o", "yaml"], check=True,
                                 capture_output=True, text=True).stdout
            store(yaml.safe_load(out))
        case ["get", what] if "/" in what:
            kind, name = what.split("/", 1)
            if not os.path.isdir(stored(kind, name)):
                fail(f'Error from server (NotFound): {kind}s "{name}" not found')
            print(what)
        case ["get", "job", name, "-o", jsonpath] if jsonpath.startswith("jsonpath="):
            job_conditions(name)
        case ["delete", "job", name, *_]:
            # Kept aside, not removed, so a test can read a deleted Job's pods after the fact.
            if os.path.isdir(stored("job", name)):
                gone = os.path.join(STATE, "deleted")
                os.makedirs(gone, exist_ok=True)
                os.rename(stored("job", name), os.path.join(gone, f"{len(os.listdir(gone))}-{name}"))
        case ["logs", "-l", selector, "--tail=-1"]:
            logs(selector)
        case _:
            fail(f"unexpected: kubectl {' '.join(args)}", 9)


main(sys.argv[1:])
