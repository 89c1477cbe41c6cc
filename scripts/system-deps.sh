#!/usr/bin/env bash
# Installs the system packages that agentrepro and its tests use: the libraries WeasyPrint loads (Pango,
# HarfBuzz) and the report's font (the PDF without a browser), Chromium (the browser-printed PDF and the
# report test), a local SLURM (the workflow test), poppler-utils (PDF text), podman, runc, docker.io and
# docker-registry (the container tests), uidmap and Debian's psutil and PyYAML (rootless podman run by a cluster
# user's job, with agentrepro's source under Debian's Python), OpenSSH's ssh-keygen (signed bundles).
# `system-deps.sh report`: only what the report's PDF needs (`make demo`). Needs root and apt; otherwise it only
# says what is missing.
set -euo pipefail
# Debian package:shared library, for the packages named in agentrepro/report/pdf.py (WEASYPRINT_LIBS).
WEASYPRINT_LIBS="libpango-1.0-0:libpango-1.0.so.0 libpangoft2-1.0-0:libpangoft2-1.0.so.0 libharfbuzz-subset0:libharfbuzz-subset.so.0"
LDCONFIG=$(command -v ldconfig || echo /sbin/ldconfig)
missing=()
for pair in $WEASYPRINT_LIBS; do
  "$LDCONFIG" -p 2>/dev/null | grep -F "${pair#*:} " >/dev/null || missing+=("${pair%%:*}")  # no -q: pipefail
done
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)  # the report's font
if [ "${1:-all}" != report ]; then
  command -v chromium >/dev/null || missing+=(chromium)
  command -v pdftotext >/dev/null || missing+=(poppler-utils)
  command -v ssh-keygen >/dev/null || missing+=(openssh-client)
  command -v slurmctld >/dev/null || missing+=(munge slurmctld slurmd slurm-client)
  command -v podman >/dev/null || missing+=(podman)   # the container tests run jobs in real podman images
  command -v runc >/dev/null || missing+=(runc)       # the OCI runtime those tests select (crun refuses some cgroup layouts)
  command -v newuidmap >/dev/null || missing+=(uidmap)  # rootless podman, run by a cluster user's job
  command -v docker-registry >/dev/null || missing+=(docker-registry)  # the tests' own registry (test_registry.py)
  # agentrepro run as that user, by Debian's Python
  /usr/bin/python3 -c 'import psutil, yaml' 2>/dev/null || missing+=(python3-psutil python3-yaml)
  command -v dockerd >/dev/null || missing+=(docker.io)  # the docker tests start a private daemon (tests/docker_kit.py)
  command -v ip >/dev/null || missing+=(iproute2)     # network namespaces: the two-node Ray cluster test
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "system-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # the tests start their own registry on loopback; the package's service would listen on every address
  if [[ " ${missing[*]} " == *" docker-registry "* ]] && command -v systemctl >/dev/null; then
    systemctl disable --now docker-registry >/dev/null 2>&1 || true
  fi
else
  echo "system-deps: missing ${missing[*]} (not root or no apt): without Pango, HarfBuzz and DejaVu fonts" \
       "there is no PDF when Chromium is absent; tests that need the others are skipped" >&2
fi
