#!/usr/bin/env bash
# Offline validation of the Kubernetes manifests in k8s/ (no cluster needed; see validate.py for what
# is checked): every overlay in k8s/overlays/ is rendered with `kubectl kustomize` (what `kubectl apply
# -k` would send) and the output validated; the settings of k8s/base/ are proven to reach every overlay
# (changed in a copy, rendered again); then the self-test: the broken-on-purpose manifests in
# tests/k8s/bad/ must fail.
#
# Needs kubectl (Debian: kubectl; its `kubectl kustomize`), python3 with the venv module and PyPI (once;
# the environment is reused while tests/k8s/requirements.txt and the Python version stay the same).
# Environment:
#   K8S_CRD_SCHEMA  the MPIJob CRD (default: ../shared/schemas/kubeflow.org_mpijobs.yaml beside the repo)
#   K8S_VERSIONS    Kubernetes versions to check against, comma-separated (default: 1.29,1.37)
#   K8S_VENV        where the virtual environment lives (default: target/k8s-venv)
#   PYTHON          the interpreter that makes it (default: python3)
#   KUBECTL         the kubectl that renders the overlays (default: kubectl)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
crd=${K8S_CRD_SCHEMA:-$repo/../shared/schemas/kubeflow.org_mpijobs.yaml}
versions=${K8S_VERSIONS:-1.29,1.37}
venv=${K8S_VENV:-$repo/target/k8s-venv}
python=${PYTHON:-python3}

if [[ ! -f $crd ]]; then
    echo "validate.sh: no MPIJob CRD at $crd (set K8S_CRD_SCHEMA to kubeflow.org_mpijobs.yaml)" >&2
    exit 2
fi

# The virtual environment, made again when the pins or the interpreter change.
stamp="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1) $("$python" -c 'import sys; print(sys.version.split()[0])')"
if [[ ! -x $venv/bin/python || "$(cat "$venv/.collbench-stamp" 2>/dev/null)" != "$stamp" ]]; then
    echo "validate.sh: making $venv ($("$python" --version))"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
        --only-binary=:all: -r "$here/requirements.txt"
    echo "$stamp" >"$venv/.collbench-stamp"
fi

kubectl=${KUBECTL:-kubectl}
command -v "$kubectl" >/dev/null || { echo "validate.sh: no $kubectl (Debian: apt-get install kubectl)" >&2; exit 2; }

# Overlays a user is told about in k8s/README.md; each must exist and render.
required=(host-network pod-network dual-network rdma gpu indexed-job preflight-gate preflight-baseline)
out=$repo/target/k8s-rendered
rm -rf "$out"
mkdir -p "$out"
shopt -s nullglob
overlays=("$repo"/k8s/overlays/*/)
for o in "${required[@]}"; do
    [[ -f $repo/k8s/overlays/$o/kustomization.yaml ]] || { echo "validate.sh: no overlay k8s/overlays/$o" >&2; exit 1; }
done
manifests=()
for o in "${overlays[@]}"; do
    name=$(basename "$o")
    "$kubectl" kustomize "$o" >"$out/$name.yaml" || { echo "validate.sh: kubectl kustomize k8s/overlays/$name failed" >&2; exit 1; }
    manifests+=("$out/$name.yaml")
done
bad=("$here"/bad/*.yaml)
if ((${#manifests[@]} == 0 || ${#bad[@]} == 0)); then
    echo "validate.sh: nothing to check (overlays: ${#manifests[@]}, tests/k8s/bad/*.yaml: ${#bad[@]})" >&2
    exit 1
fi

# The settings reach every overlay: a copy of k8s/ with other settings, rendered again, must show them.
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp -r "$repo/k8s" "$copy/k8s"
sed -i 's/^  nodes: .*/  nodes: 7/; s/^  gpusPerNode: .*/  gpusPerNode: 3/; s|^  results: .*|  results: /probe-results|;
        s/^  nodeInterface: .*/  nodeInterface: probe0/; s/^  rdmaDevice: .*/  rdmaDevice: probe_dev:2/' \
    "$copy/k8s/base/settings.yaml"
sed -i 's|^  newName: .*|  newName: registry.invalid/probe|; s|^  newTag: .*|  newTag: "9.9"|' \
    "$copy/k8s/base/kustomization.yaml"
for o in "${overlays[@]}"; do
    name=$(basename "$o")
    "$kubectl" kustomize "$copy/k8s/overlays/$name" >"$copy/$name.yaml"
done
cd "$repo"
start=$(date +%s%N)
rc=0
"$venv/bin/python" "$here/validate.py" --crd "$crd" --k8s-versions "$versions" \
    "${manifests[@]#"$repo"/}" || rc=1
echo "--- settings of k8s/base/ changed in a copy reach every overlay"
"$venv/bin/python" "$here/settings_reach.py" "$copy"/*.yaml || rc=1
echo "--- self-test: each manifest in tests/k8s/bad/ must fail, for the reasons it names"
"$venv/bin/python" "$here/validate.py" --crd "$crd" --k8s-versions "$versions" --expect-fail \
    "${bad[@]#"$repo"/}" || rc=1
took=$((($(date +%s%N) - start) / 1000000))
if ((rc == 0)); then
    echo "validate.sh: k8s manifests valid, self-test caught every broken one (${took} ms after setup)"
else
    echo "validate.sh: FAILED (${took} ms after setup)" >&2
fi
exit $rc
