#!/usr/bin/env bash
# Debian packages the tests need, installed when missing (apt-get, retried; sudo when not root).
# One line per package: the command that proves it is there, then the Debian package name.
set -euo pipefail
PACKAGES=(
  "/usr/bin/chromium chromium"   # the report is tested in Debian's own Chromium (Playwright drives it)
  "/usr/bin/prometheus prometheus"   # the nightly's metrics scraped by a real Prometheus
  "/usr/bin/prometheus-node-exporter prometheus-node-exporter"   # its textfile collector serves them
  "/usr/bin/clang clang"   # the C decoders built with ASan + UBSan for fuzzing
  "/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer_no_main-x86_64.a libclang-rt-14-dev"   # sanitizer runtimes
)
missing=()
for entry in "${PACKAGES[@]}"; do
  read -r probe pkg <<<"$entry"
  [ -e "$probe" ] || missing+=("$pkg")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
SUDO=()
[ "$(id -u)" = 0 ] || SUDO=(sudo)
"${SUDO[@]}" apt-get -o Acquire::Retries=5 update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=5 install -y -qq "${missing[@]}" >/dev/null
