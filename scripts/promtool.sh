#!/usr/bin/env bash
# Makes sure promtool is on PATH for make test: the tests of
# observe/prometheus run `promtool check rules`, `promtool test rules` and
# `promtool check metrics` on its alert rules, dashboard queries and a real
# scrape, and fail without it when SLUICE_REQUIRE_SERVERS or CI is set.
# Installs Debian's prometheus package (which has /usr/bin/promtool) when
# promtool is missing, as the Makefile's deps target does for the servers.
set -euo pipefail

if ! command -v promtool >/dev/null; then
	echo "installing prometheus (for promtool)"
	SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
promtool --version | head -1
