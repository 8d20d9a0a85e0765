#!/bin/sh
# Entrypoint of every Cohort pod: composes TF_CONFIG the way Kubeflow's
# tf-operator does, then runs the daemon given as arguments.
#
#   sh tf-config.sh DAEMON [FLAG...]
#
# The cluster comes from the counts in cluster.env: task I of type T is pod
# cohort-T-I of StatefulSet cohort-T, at cohort-T-I.cohort-T.NAMESPACE.svc:PORT
# through the headless Service cohort-T.
#
# With COHORT_TASK_TYPE set (chief, worker or ps), this pod is task
# COHORT_TASK_TYPE:I, I being the ordinal that ends HOSTNAME (cohort-worker-2
# is worker:2), and the daemon also gets --advertise_address=<that address>:
# the coordinator knows a task only by its address in the spec. Without it
# (the coordinator), TF_CONFIG holds the cluster alone.
#
# Environment: CHIEF_REPLICAS, WORKER_REPLICAS, PS_REPLICAS, TASK_PORT and
# CLUSTER_DOMAIN (cluster.env), POD_NAMESPACE (downward API), HOSTNAME.
# Exits 2, like the daemons, on a configuration error.
set -eu

die() {
  echo "tf-config.sh: $*" >&2
  exit 2
}

check_count() { # NAME VALUE
  case $2 in
    [0-9] | [1-9][0-9] | [1-9][0-9][0-9]) ;;
    *) die "$1=\"$2\" is not a replica count (0..999)" ;;
  esac
}

CHIEF=${CHIEF_REPLICAS-}
WORKER=${WORKER_REPLICAS-}
PS=${PS_REPLICAS-}
check_count CHIEF_REPLICAS "$CHIEF"
check_count WORKER_REPLICAS "$WORKER"
check_count PS_REPLICAS "$PS"
[ "$CHIEF" -le 1 ] || die "CHIEF_REPLICAS=$CHIEF: a cluster has at most one chief"
[ $((CHIEF + WORKER)) -gt 0 ] || die "the cluster has no chief and no worker"

PORT=${TASK_PORT-}
case $PORT in
  [1-9] | [1-9][0-9] | [1-9][0-9][0-9] | [1-9][0-9][0-9][0-9] | [1-9][0-9][0-9][0-9][0-9]) ;;
  *) die "TASK_PORT=\"$PORT\" is not a port number" ;;
esac
[ "$PORT" -le 65535 ] || die "TASK_PORT=$PORT is out of range 1..65535"

NAMESPACE=${POD_NAMESPACE-}
[ -n "$NAMESPACE" ] || die "POD_NAMESPACE is not set (the downward API's metadata.namespace)"
case ${CLUSTER_DOMAIN-} in
  *[!a-z0-9.-]*) die "CLUSTER_DOMAIN=\"$CLUSTER_DOMAIN\" is not a DNS domain" ;;
esac
DOMAIN=${CLUSTER_DOMAIN:+.$CLUSTER_DOMAIN}

replicas() { # TYPE
  case $1 in
    chief) echo "$CHIEF" ;;
    worker) echo "$WORKER" ;;
    ps) echo "$PS" ;;
    *) return 1 ;;
  esac
}

address() { # TYPE INDEX
  echo "cohort-$1-$2.cohort-$1.$NAMESPACE.svc$DOMAIN:$PORT"
}

cluster=
for type in chief worker ps; do
  n=$(replicas "$type")
  list=
  i=0
  while [ "$i" -lt "$n" ]; do
    list="$list${list:+,}\"$(address "$type" "$i")\""
    i=$((i + 1))
  done
  [ -z "$list" ] || cluster="$cluster${cluster:+,}\"$type\":[$list]"
done

task=
advertise=
if [ -n "${COHORT_TASK_TYPE-}" ]; then
  type=$COHORT_TASK_TYPE
  n=$(replicas "$type") || die "COHORT_TASK_TYPE=\"$type\": expected chief, worker or ps"
  # The runtime sets HOSTNAME; uname -n is the same name where it does not.
  # shellcheck disable=SC3028
  host=${HOSTNAME:-$(uname -n)}
  index=${host##*-}
  case $index in
    '' | *[!0-9]* | 0?*) die "HOSTNAME \"$host\" does not end in a StatefulSet ordinal" ;;
  esac
  [ "$host" = "cohort-$type-$index" ] ||
    die "HOSTNAME \"$host\" is not a pod of StatefulSet cohort-$type"
  upper=$(echo "$type" | tr '[:lower:]' '[:upper:]')
  [ "$index" -lt "$n" ] ||
    die "$host is $type:$index but ${upper}_REPLICAS is $n in cluster.env; make it the StatefulSet's replicas"
  task=",\"task\":{\"type\":\"$type\",\"index\":$index}"
  advertise="--advertise_address=$(address "$type" "$index")"
fi

[ $# -gt 0 ] || die "usage: tf-config.sh DAEMON [FLAG...]"
# shellcheck disable=SC2089,SC2090 # JSON: its quotes are data
export TF_CONFIG="{\"cluster\":{$cluster}$task}"
echo "tf-config.sh: TF_CONFIG=$TF_CONFIG" >&2
if [ -n "$advertise" ]; then
  exec "$@" "$advertise"
fi
exec "$@"
