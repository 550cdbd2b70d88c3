#!/usr/bin/env bash
# Regenerates the OLM bundle from config/ and fails when it differs from the working tree, then
# validates it with the operatorframework suite. Compares against a snapshot, like
# verify-generated.sh, so regenerated-but-uncommitted work passes.
set -euo pipefail
cd "$(dirname "$0")/.."

generated=(bundle config/manifests/bases config/manager/kustomization.yaml)
snapshot=$(mktemp -d)
trap 'rm -rf "$snapshot"' EXIT
for p in "${generated[@]}"; do
  if [ -e "$p" ]; then cp -a --parents "$p" "$snapshot/"; fi
done

make --no-print-directory bundle >/dev/null

status=0
for p in "${generated[@]}"; do
  if [ ! -e "$snapshot/$p" ]; then
    echo "generated file was missing: $p"; status=1; continue
  fi
  if ! diff -ruN "$snapshot/$p" "$p"; then status=1; fi
done
if [ $status -ne 0 ]; then
  echo
  echo "The bundle was out of date with config/ (now regenerated): review and commit it."
fi
exit $status
