#!/usr/bin/env bash
# Test hosts on one machine: each host is a network namespace with its own
# hostname (UTS namespace), its own IPC namespace and /dev/shm, joined to the
# others by a bridge, with an address in 198.18.0.0/15 (the range reserved
# for network benchmarking). Faults go on each host's link: down/up, a rate
# limit (tc tbf) and random loss (iptables' statistic match); a host can
# have a firewall.
#
# Needs root. Everything a set creates carries its name, and `down` removes
# all of it, killing only the holder processes it started (by pid).
#
#   testhosts.sh up NAME N [SUBNET]   N hosts NAME-1..NAME-N at 198.18.SUBNET.1..N;
#                                     the bridge (this namespace) is .254;
#                                     SUBNET defaults to the first one unused
#   testhosts.sh exec NAME I CMD...   run CMD on host I
#   testhosts.sh addr NAME I          print host I's address (I=0: the bridge)
#   testhosts.sh address NAME I CIDR  give host I another address (a data network)
#   testhosts.sh link NAME I up|down  cut or restore host I's link
#   testhosts.sh rate NAME I RATE     limit host I's link both ways (e.g. 100mbit)
#   testhosts.sh loss NAME I PERCENT  drop PERCENT% of host I's packets, both ways
#   testhosts.sh firewall NAME I PORTS
#                                     drop new TCP connections to host I except
#                                     to PORTS (e.g. 2222,20000:20099), as a
#                                     host firewall would
#   testhosts.sh clear NAME I         remove host I's rate limit, loss and firewall
#   testhosts.sh down NAME            remove the set, and end every process on it
#   testhosts.sh reap [REGEX]         remove the sets (named REGEX) whose owner is gone
#   testhosts.sh list                 the sets that exist, with their owner pids
#
# up, down and reap hold a lock on the state directory, so that sets made at
# the same time get different subnets and a reap never sees half a set.
# NAME: 1 to 6 letters or digits (it goes into interface names).
set -euo pipefail

state_root=/run/cohort-testhosts

die() { echo "testhosts: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

need_root() {
  [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, bridges, tc, iptables); run with sudo"
  for tool in ip unshare nsenter tc; do
    command -v "$tool" >/dev/null || die "needs '$tool' (Debian: iproute2, util-linux)"
  done
}

check_name() {
  [[ "$1" =~ ^[a-z0-9]{1,6}$ ]] || die "NAME must be 1 to 6 lowercase letters or digits, got '$1'"
}

set_dir() { echo "$state_root/$1"; }
netns() { echo "cohort-$1-$2"; }
# Host I's end of its link is eth0 inside its namespace; the bridge's end is
# "<NAME>b<I>" here.
bridge_port() { echo "${1}b${2}"; }

holder_pid() {
  local file
  file="$(set_dir "$1")/$2.pid"
  [ -f "$file" ] || die "no host $2 in set '$1'"
  cat "$file"
}

subnet_of() {
  local file
  file="$(set_dir "$1")/subnet"
  [ -f "$file" ] || die "no set named '$1' (see: testhosts.sh list)"
  cat "$file"
}

pick_subnet() {
  local used k
  used=$(ip -4 -o addr show 2>/dev/null | grep -oE '198\.18\.[0-9]+\.254' | cut -d. -f3 || true)
  for k in $(seq 0 255); do
    if ! grep -qx "$k" <<<"$used"; then echo "$k"; return; fi
  done
  die "every 198.18.K.0/24 subnet is taken"
}

cmd_up() {
  local name=$1 n=$2 subnet=${3:-}
  check_name "$name"
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 32 ] || die "N must be 1..32, got '$n'"
  [ -d "$(set_dir "$name")" ] && die "set '$name' exists; run: testhosts.sh down $name"
  [ -n "$subnet" ] || subnet=$(pick_subnet)
  local dir bridge
  dir=$(set_dir "$name")
  bridge="${name}br"
  mkdir -p "$dir"
  # Whose set this is: a later run may remove a set whose owner is gone.
  echo "${TESTHOSTS_OWNER:-$PPID}" >"$dir/owner"
  echo "$subnet" >"$dir/subnet"
  # On any failure from here on, take down what was made.
  trap 'cmd_down "$name" >/dev/null 2>&1 || true' ERR
  ip link add "$bridge" type bridge
  ip addr add "198.18.$subnet.254/24" dev "$bridge"
  ip link set "$bridge" up
  local i ns port
  for i in $(seq 1 "$n"); do
    ns=$(netns "$name" "$i")
    port=$(bridge_port "$name" "$i")
    ip netns add "$ns"
    ip link add "$port" type veth peer name "${name}h${i}"
    ip link set "${name}h${i}" netns "$ns"
    ip -n "$ns" link set "${name}h${i}" name eth0
    ip -n "$ns" addr add "198.18.$subnet.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip link set "$port" master "$bridge"
    ip link set "$port" up
    # The holder keeps the host's hostname, IPC namespace and private
    # /dev/shm alive; commands join its namespaces. The hostname is set
    # last: the wait below takes it for "set up". It must not hold the lock.
    ip netns exec "$ns" unshare --uts --ipc --mount --propagation private -- \
      sh -c "mount -t tmpfs -o mode=1777,size=512m tmpfs /dev/shm && hostname '$name-$i' && exec sleep infinity" \
      </dev/null >/dev/null 2>&1 9>&- &
    echo $! >"$dir/$i.pid"
  done
  # Wait (bounded) until every holder has its hostname.
  for i in $(seq 1 "$n"); do
    local tries=0
    until [ "$(nsenter -t "$(holder_pid "$name" "$i")" -u hostname 2>/dev/null)" = "$name-$i" ]; do
      tries=$((tries + 1))
      [ "$tries" -le 100 ] || die "host $i of '$name' did not come up"
      sleep 0.05
    done
  done
  echo "$n" >"$dir/count"
  trap - ERR
  echo "testhosts: set '$name': $n hosts at 198.18.$subnet.1-$n, bridge $bridge at 198.18.$subnet.254"
}

cmd_exec() {
  local name=$1 i=$2
  shift 2
  local pid
  pid=$(holder_pid "$name" "$i")
  # Keep the caller's working directory: relative paths mean the same.
  exec nsenter -t "$pid" --uts --ipc --mount --net --wd="$PWD" -- "$@"
}

cmd_addr() {
  local subnet
  subnet=$(subnet_of "$1")
  if [ "$2" = 0 ]; then echo "198.18.$subnet.254"; else echo "198.18.$subnet.$2"; fi
}

cmd_address() {
  holder_pid "$1" "$2" >/dev/null
  [[ "$3" =~ ^198\.(18|19)\.[0-9]+\.[0-9]+/[0-9]+$ ]] ||
    die "address: CIDR must be in 198.18.0.0/15, e.g. 198.19.0.2/24, got '$3'"
  ip -n "$(netns "$1" "$2")" addr add "$3" dev eth0
}

cmd_link() {
  holder_pid "$1" "$2" >/dev/null
  case "$3" in
    up|down) ip link set "$(bridge_port "$1" "$2")" "$3" ;;
    *) die "link: expected up or down, got '$3'" ;;
  esac
}

cmd_rate() {
  holder_pid "$1" "$2" >/dev/null
  local ns port
  ns=$(netns "$1" "$2")
  port=$(bridge_port "$1" "$2")
  # Outgoing on the host's eth0, incoming on the bridge's end of its link.
  tc -n "$ns" qdisc replace dev eth0 root tbf rate "$3" burst 64kb latency 500ms
  tc qdisc replace dev "$port" root tbf rate "$3" burst 64kb latency 500ms
}

cmd_loss() {
  holder_pid "$1" "$2" >/dev/null
  command -v iptables >/dev/null || die "loss needs iptables (Debian: iptables)"
  [[ "$3" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "loss: PERCENT must be a number, got '$3'"
  local ns probability chain
  ns=$(netns "$1" "$2")
  probability=$(awk -v p="$3" 'BEGIN { printf "%.4f", p / 100 }')
  # The link only: the host's own traffic over lo keeps flowing.
  ip netns exec "$ns" iptables -A INPUT -i eth0 -m statistic --mode random \
    --probability "$probability" -j DROP
  ip netns exec "$ns" iptables -A OUTPUT -o eth0 -m statistic --mode random \
    --probability "$probability" -j DROP
}

cmd_firewall() {
  holder_pid "$1" "$2" >/dev/null
  command -v iptables >/dev/null || die "firewall needs iptables (Debian: iptables)"
  [[ "$3" =~ ^[0-9]+(:[0-9]+)?(,[0-9]+(:[0-9]+)?)*$ ]] ||
    die "firewall: PORTS must be ports or FIRST:LAST ranges joined by commas, got '$3'"
  local ns
  ns=$(netns "$1" "$2")
  # The host's own traffic (to its own address too) goes over lo; a
  # connection's first packet is its only SYN, so no connection tracking.
  ip netns exec "$ns" iptables -A INPUT -i lo -j ACCEPT
  ip netns exec "$ns" iptables -A INPUT -p tcp --syn -m multiport ! --dports "$3" -j DROP
}

cmd_clear() {
  holder_pid "$1" "$2" >/dev/null
  local ns
  ns=$(netns "$1" "$2")
  tc -n "$ns" qdisc del dev eth0 root 2>/dev/null || true
  tc qdisc del dev "$(bridge_port "$1" "$2")" root 2>/dev/null || true
  if command -v iptables >/dev/null; then
    ip netns exec "$ns" iptables -F INPUT 2>/dev/null || true
    ip netns exec "$ns" iptables -F OUTPUT 2>/dev/null || true
  fi
}

cmd_down() {
  local name=$1
  check_name "$name"
  local dir
  dir=$(set_dir "$name")
  local file pid
  for file in "$dir"/*.pid; do
    [ -f "$file" ] || continue
    pid=$(cat "$file")
    # Only our holder: a sleep whose network namespace is the set's.
    if [ -d "/proc/$pid" ] && grep -q '^sleep' "/proc/$pid/comm" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
    fi
  done
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^cohort-$name-[0-9]+$" || true); do
    # What still runs on the host is the set's own (daemons a test started
    # there): left alive, it would keep the namespace, unnamed, forever.
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  local link
  for link in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 |
                grep -E "^${name}(br|b[0-9]+|h[0-9]+)$" || true); do
    ip link del "$link" 2>/dev/null || true
  done
  rm -rf "$dir"
  echo "testhosts: set '$name' removed"
}

cmd_reap() {
  local pattern=${1:-.} dir name owner
  [ -d "$state_root" ] || return 0
  for dir in "$state_root"/*/; do
    [ -d "$dir" ] || continue
    name=$(basename "$dir")
    [[ "$name" =~ ^[a-z0-9]{1,6}$ ]] || continue  # not a set's name
    grep -qE "$pattern" <<<"$name" || continue
    owner=$(cat "$dir/owner" 2>/dev/null || true)
    if [[ "$owner" =~ ^[0-9]+$ ]] && kill -0 "$owner" 2>/dev/null; then continue; fi
    cmd_down "$name"
  done
}

# Serializes up, down and reap (bounded: a holder stuck for 30 s is an
# error, not a wait forever).
lock_state() {
  mkdir -p "$state_root"
  exec 9>"$state_root/.lock"
  flock -w 30 9 || die "another testhosts.sh held $state_root/.lock for 30 s"
}

cmd_list() {
  [ -d "$state_root" ] || return 0
  local dir
  for dir in "$state_root"/*/; do
    [ -d "$dir" ] || continue
    echo "$(basename "$dir") $(cat "$dir/count" 2>/dev/null || echo '?') hosts 198.18.$(cat "$dir/subnet").0/24 owner $(cat "$dir/owner" 2>/dev/null || echo '?')"
  done
}

[ $# -ge 1 ] || { usage; exit 2; }
case "$1" in
  -h|--help|help) usage; exit 0 ;;
esac
need_root
command=$1
shift
case "$command" in
  up)    [ $# -ge 2 ] || die "usage: up NAME N [SUBNET]"; lock_state; cmd_up "$@" ;;
  exec)  [ $# -ge 3 ] || die "usage: exec NAME I CMD..."; cmd_exec "$@" ;;
  addr)  [ $# -eq 2 ] || die "usage: addr NAME I"; cmd_addr "$@" ;;
  address) [ $# -eq 3 ] || die "usage: address NAME I CIDR"; cmd_address "$@" ;;
  link)  [ $# -eq 3 ] || die "usage: link NAME I up|down"; cmd_link "$@" ;;
  rate)  [ $# -eq 3 ] || die "usage: rate NAME I RATE"; cmd_rate "$@" ;;
  loss)  [ $# -eq 3 ] || die "usage: loss NAME I PERCENT"; cmd_loss "$@" ;;
  firewall) [ $# -eq 3 ] || die "usage: firewall NAME I PORTS"; cmd_firewall "$@" ;;
  clear) [ $# -eq 2 ] || die "usage: clear NAME I"; cmd_clear "$@" ;;
  down)  [ $# -eq 1 ] || die "usage: down NAME"; lock_state; cmd_down "$@" ;;
  reap)  [ $# -le 1 ] || die "usage: reap [REGEX]"; lock_state; cmd_reap "$@" ;;
  list)  cmd_list ;;
  *) die "unknown command '$command' (see --help)" ;;
esac
