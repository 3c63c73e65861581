#!/usr/bin/env bash
# Starts the servers the tests need, on loopback ports of their own, runs the
# given command with their addresses in the environment, and stops them when
# the command ends, pass or fail.
#
#   scripts/servers.sh go test ./...
#
# Servers: one redis-server (SLUICE_REDIS_ADDR), a 3-master Redis Cluster
# (SLUICE_REDIS_CLUSTER_ADDRS), two memcached (SLUICE_MEMCACHE_ADDRS), and a
# Sentinel (SLUICE_REDIS_SENTINEL_ADDR) watching two masters: "sluice", a
# primary that stays one, and "sluice-failover", a primary with one replica
# that a test fails over (so that no other test sees the switch).
set -euo pipefail

REDIS_PORT=${REDIS_PORT:-16379}
CLUSTER_PORTS=${CLUSTER_PORTS:-"17001 17002 17003"}
MEMCACHE_PORTS=${MEMCACHE_PORTS:-"21211 21212"}
SENTINEL_REDIS_PORTS=${SENTINEL_REDIS_PORTS:-"16380 16381 16382"}
SENTINEL_PORT=${SENTINEL_PORT:-26380}

work=$(mktemp -d "${TMPDIR:-/tmp}/sluice-servers.XXXXXX")
pids=()

stop() {
	local rc=$?
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$work"
	exit "$rc"
}
trap stop EXIT INT TERM

for bin in redis-server redis-cli memcached; do
	command -v "$bin" >/dev/null || { echo "servers.sh: $bin is not installed (make deps installs it)" >&2; exit 1; }
done

wait_redis() { # port
	for _ in $(seq 1 100); do
		redis-cli -h 127.0.0.1 -p "$1" ping >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	echo "servers.sh: redis on port $1 did not start" >&2
	exit 1
}

start_redis() { # port [extra args...]
	local port=$1; shift
	mkdir -p "$work/$port"
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$work/$port" --daemonize no --logfile "$work/$port/log" "$@" &
	pids+=($!)
}

start_redis "$REDIS_PORT"
read -r sstable sprimary sreplica <<<"$SENTINEL_REDIS_PORTS"
start_redis "$sstable"
start_redis "$sprimary"
start_redis "$sreplica" --replicaof 127.0.0.1 "$sprimary"
for p in $CLUSTER_PORTS; do
	start_redis "$p" --cluster-enabled yes --cluster-config-file "$work/$p/nodes.conf" --cluster-node-timeout 2000
done
for p in $MEMCACHE_PORTS; do
	memcached -l 127.0.0.1 -p "$p" -U 0 -m 64 -u nobody &
	pids+=($!)
done

wait_redis "$REDIS_PORT"
nodes=()
for p in $CLUSTER_PORTS; do wait_redis "$p"; nodes+=("127.0.0.1:$p"); done
redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$work/cluster-create.log" 2>&1 ||
	{ cat "$work/cluster-create.log" >&2; exit 1; }
first=${nodes[0]#*:}
for _ in $(seq 1 200); do
	redis-cli -p "$first" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
	sleep 0.05
done
redis-cli -p "$first" cluster info | grep -q 'cluster_state:ok' || { echo "servers.sh: cluster not ok" >&2; exit 1; }
for p in $MEMCACHE_PORTS; do
	for _ in $(seq 1 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && break
		sleep 0.05
	done
done

# Sentinel: started once its primary answers; ready once it knows the
# replica, and the replica is in sync (a failover needs one to promote).
wait_redis "$sstable"
wait_redis "$sprimary"
wait_redis "$sreplica"
mkdir -p "$work/sentinel"
printf '%s\n' "port $SENTINEL_PORT" "bind 127.0.0.1" "dir $work/sentinel" \
	"sentinel monitor sluice 127.0.0.1 $sstable 1" \
	"sentinel monitor sluice-failover 127.0.0.1 $sprimary 1" \
	"sentinel down-after-milliseconds sluice-failover 2000" \
	"sentinel failover-timeout sluice-failover 10000" >"$work/sentinel/sentinel.conf"
redis-server "$work/sentinel/sentinel.conf" --sentinel --logfile "$work/sentinel/log" &
pids+=($!)
wait_redis "$SENTINEL_PORT"
sentinel_ready() {
	redis-cli -p "$sreplica" info replication 2>/dev/null | grep -q 'master_link_status:up' &&
		redis-cli -p "$SENTINEL_PORT" sentinel replicas sluice-failover 2>/dev/null | grep -qx "$sreplica"
}
for _ in $(seq 1 200); do
	sentinel_ready && break
	sleep 0.05
done
sentinel_ready || { echo "servers.sh: the sentinel does not see an in-sync replica" >&2; cat "$work/sentinel/log" >&2; exit 1; }

export SLUICE_REDIS_ADDR="127.0.0.1:$REDIS_PORT"
export SLUICE_REDIS_SENTINEL_ADDR="127.0.0.1:$SENTINEL_PORT"
export SLUICE_REDIS_CLUSTER_ADDRS=$(IFS=,; echo "${nodes[*]}")
export SLUICE_MEMCACHE_ADDRS=$(for p in $MEMCACHE_PORTS; do printf '127.0.0.1:%s,' "$p"; done | sed 's/,$//')
export SLUICE_REQUIRE_SERVERS=1
echo "servers.sh: redis $SLUICE_REDIS_ADDR, cluster $SLUICE_REDIS_CLUSTER_ADDRS, memcached $SLUICE_MEMCACHE_ADDRS, sentinel $SLUICE_REDIS_SENTINEL_ADDR"
"$@"
