# tests/integration/netns_lib.sh - network namespaces as hosts, for the
# integration scripts (sourced after lib.sh, not run).
#
# netns_hosts ROLE... makes one namespace per role, named $PFX<role>, each
# with eth0 on a bridge in the namespace ${PFX}hub, addressed 10.200.X.<n>
# (X random per run, so runs can go in parallel; the root namespace is never
# touched): ADDR[role] holds each address. Skips (77) with the reason when
# namespaces, veth pairs or bridges cannot be made (not root, no kernel
# support). Everything is removed on exit. in_ns ROLE CMD... starts CMD in
# ROLE's namespace (output in $TMP/ROLE.log, pid in PID[ROLE]).
PFX=sps$$
NETS=() # namespaces created so far, hub first
declare -A ADDR
declare -A PID

netns_cleanup() {
    local ns
    for ns in "${NETS[@]:-}"; do
        [ -n "$ns" ] && ip netns del "$ns" 2>/dev/null
    done
    NETS=()
}
trap 'cleanup; netns_cleanup' EXIT

# Runs a set-up command; on failure skips with its error message.
netns_setup() {
    local out
    out=$("$@" 2>&1) || skip "cannot create network namespaces: $* : $(echo "$out" | head -1)"
}

netns_hosts() {
    [ "$(id -u)" -eq 0 ] || skip "cannot create network namespaces: not root"
    command -v ip >/dev/null || skip "cannot create network namespaces: no ip (iproute2)"
    local hub=${PFX}hub role ns n=10
    netns_setup ip netns add "$hub"
    NETS+=("$hub")
    netns_setup ip -n "$hub" link set lo up
    netns_setup ip -n "$hub" link add br0 type bridge
    netns_setup ip -n "$hub" link set br0 up
    NET=10.200.$((RANDOM % 250 + 1))
    for role in "$@"; do
        ns=$PFX$role
        ADDR[$role]=$NET.$n
        n=$((n + 1))
        netns_setup ip netns add "$ns"
        NETS+=("$ns")
        netns_setup ip -n "$hub" link add "v$role" type veth peer name eth0 netns "$ns"
        netns_setup ip -n "$hub" link set "v$role" master br0 up
        netns_setup ip -n "$ns" addr add "${ADDR[$role]}/24" dev eth0
        netns_setup ip -n "$ns" link set eth0 up
        netns_setup ip -n "$ns" link set lo up
    done
}

in_ns() {
    local role=$1
    shift
    start "$role" ip netns exec "$PFX$role" "$@"
    PID[$role]=$LAST_PID
}

# Prints the namespaces of this run still present (none after netns_cleanup).
netns_left() {
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$PFX" || true
}
