#!/usr/bin/env bash
# Regenerates everything generated from sources and fails when the result differs from what is in
# the working tree: a developer who changed a source must regenerate (make generate manifests docs).
# Compares against a snapshot rather than git, so uncommitted but regenerated work passes.
set -euo pipefail
cd "$(dirname "$0")/.."

generated=(
  apis/metal/v1alpha1/zz_generated.deepcopy.go
  apis/infrastructure/v1alpha1/zz_generated.deepcopy.go
  config/capi/crd/bases
  config/crd/bases
  config/rbac/role.yaml
  config/boot-namespace/role.yaml
  config/capi/rbac/role.yaml
)
# Every lifecycle document internal/fsm generates, new ones included.
docs=$(go run ./hack/gendocs -list)
for doc in $docs; do generated+=("$doc"); done

snapshot=$(mktemp -d)
trap 'rm -rf "$snapshot"' EXIT
for p in "${generated[@]}"; do
  if [ -e "$p" ]; then cp -a --parents "$p" "$snapshot/"; fi
done

make --no-print-directory generate manifests docs >/dev/null

status=0
for p in "${generated[@]}"; do
  if [ ! -e "$snapshot/$p" ]; then
    if [ -e "$p" ]; then echo "generated file was missing: $p"; status=1; fi
    continue
  fi
  if ! diff -ruN "$snapshot/$p" "$p"; then status=1; fi
done
if [ $status -ne 0 ]; then
  echo
  echo "Generated files were out of date (now regenerated): review and commit them."
fi
exit $status
