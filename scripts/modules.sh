#!/usr/bin/env bash
# Runs a command in every Go module of the repository, one after another,
# and fails when any run fails.
#
#   scripts/modules.sh go test ./...
#
# A module that builds alone (its go.mod replaces the root with a relative
# path) runs with GOWORK=off, as a user's build sees it. cmd/sluice has no
# replace directives (so that `go install …/cmd/sluice@latest` works) and
# runs in the repository's go.work.
set -euo pipefail
cd "$(dirname "$0")/.."

MODULES=(. adapters/gin adapters/echo adapters/echov4 adapters/grpc adapters/internal/e2e bench faults observe/otel observe/prometheus cmd/sluice)

for m in "${MODULES[@]}"; do
	if [ "$m" = . ] || grep -q '^replace github.com/sluicehq/sluice ' "$m/go.mod"; then
		work=off
	else
		work=$PWD/go.work
	fi
	echo "== module ${m#./} (GOWORK=${work##*/})"
	(cd "$m" && GOWORK=$work "$@")
done
