# Guest command list for scripts/rxe-vm (run with bash inside the VM):
#   scripts/rxe-vm -t 180 tests/vm/rc_pingpong.sh
# rdma-core's ibv_rc_pingpong between rxe0 (server, veth0) and rxe1 (client,
# veth1), checking that the traffic crossed the veth pair: rxe1 sent_pkts,
# rxe0 rcvd_pkts and veth1 tx_packets must all rise by at least the number of
# iterations.
set -euo pipefail

readonly kIters=200
readonly kSizeBytes=4096
readonly kPort=18515
readonly kListenWaitTicks=200 # x 0.05 s

counter() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2"; }
netcount() { cat "/sys/class/net/$1/statistics/$2"; }

echo "== rdma statistic show link rxe1/1 (before)"
rdma statistic show link rxe1/1
sent_before=$(counter rxe1 sent_pkts)
rcvd_before=$(counter rxe0 rcvd_pkts)
veth_before=$(netcount veth1 tx_packets)

ibv_rc_pingpong -d rxe0 -g "$RXE_GID_INDEX" -p "$kPort" -n "$kIters" -s "$kSizeBytes" > /tmp/server.log 2>&1 &
server=$!
# Wait until the server listens instead of sleeping a fixed time.
for ((tick = 0; tick < kListenWaitTicks; tick++)); do
	ss -ltn "sport = :$kPort" | grep -q ":$kPort" && break
	sleep 0.05
done
echo "== client: ibv_rc_pingpong -d rxe1 -g $RXE_GID_INDEX $RXE_IP0"
client_rc=0
timeout 60 ibv_rc_pingpong -d rxe1 -g "$RXE_GID_INDEX" -p "$kPort" -n "$kIters" -s "$kSizeBytes" "$RXE_IP0" || client_rc=$?
server_rc=0
for ((tick = 0; tick < kListenWaitTicks; tick++)); do
	kill -0 "$server" 2>/dev/null || break
	sleep 0.05
done
kill "$server" 2>/dev/null || true
wait "$server" || server_rc=$?
echo "== server (rc $server_rc)"
cat /tmp/server.log

echo "== rdma statistic show link rxe1/1 (after)"
rdma statistic show link rxe1/1
sent_after=$(counter rxe1 sent_pkts)
rcvd_after=$(counter rxe0 rcvd_pkts)
veth_after=$(netcount veth1 tx_packets)
echo "rxe1 sent_pkts:   $sent_before -> $sent_after"
echo "rxe0 rcvd_pkts:   $rcvd_before -> $rcvd_after"
echo "veth1 tx_packets: $veth_before -> $veth_after"

fail=0
[[ $client_rc -eq 0 ]] || { echo "FAIL: client exited $client_rc"; fail=1; }
[[ $server_rc -eq 0 ]] || { echo "FAIL: server exited $server_rc"; fail=1; }
for pair in "rxe1 sent_pkts:$sent_before:$sent_after" "rxe0 rcvd_pkts:$rcvd_before:$rcvd_after" \
	"veth1 tx_packets:$veth_before:$veth_after"; do
	IFS=: read -r name before after <<<"$pair"
	if ((after - before < kIters)); then
		echo "FAIL: $name rose by $((after - before)), expected at least $kIters"
		fail=1
	fi
done
[[ $fail -eq 0 ]] && echo "PASS: ibv_rc_pingpong rxe1 -> rxe0 over veth1/veth0"
exit "$fail"
