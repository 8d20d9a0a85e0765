#!/usr/bin/env bash
# deploy/prometheus and deploy/grafana against the real tools: promtool
# checks the scrape config and the alert rules, and parses every query of
# the Grafana dashboard; every cohort_ metric they name must be one the
# daemons export. Exit 77 (skipped) without promtool.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
if ! command -v promtool >/dev/null; then
  echo "promtool not installed (tools/setup.sh installs prometheus)"
  exit 77
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

promtool check config "$root/deploy/prometheus/prometheus.yml"
promtool check rules "$root/deploy/prometheus/cohort-alerts.yml"

# The dashboard's queries, as recording rules, so that promtool parses them.
python3 - "$root/deploy/grafana/cohort-dashboard.json" > "$scratch/dashboard-rules.yml" <<'PY'
import json, sys
dashboard = json.load(open(sys.argv[1]))
print("groups:\n  - name: dashboard\n    rules:")
n = 0
for panel in dashboard["panels"]:
    for target in panel["targets"]:
        n += 1
        expr = target["expr"].replace("$job", ".*")
        print(f"      - record: cohort_dashboard_query_{n}")
        print(f"        expr: {json.dumps(expr)}")
if n == 0:
    sys.exit("the dashboard has no queries")
PY
promtool check rules "$scratch/dashboard-rules.yml"

# Names used there, less histogram suffixes, must appear in the sources.
names="$(cat "$root/deploy/grafana/cohort-dashboard.json" \
              "$root/deploy/prometheus/cohort-alerts.yml" |
         grep -o 'cohort_[a-z_]*' | grep -v '^cohort_dashboard' |
         sed -E 's/_(bucket|sum|count)$//' | sort -u)"
missing=0
for name in $names; do
  if ! grep -rqF "\"$name\"" "$root/coordinator" "$root/collective" \
        "$root/rpc" "$root/task" "$root/ps_server" "$root/worker_agent"; then
    echo "no daemon exports $name"
    missing=1
  fi
done
[ "$missing" -eq 0 ]
echo "dashboard and alerts name $(echo "$names" | wc -w) metrics, all exported"
