#!/usr/bin/env python3
"""Runs every pod's entrypoint from deploy/kubernetes and checks its TF_CONFIG.

    kubernetes_tf_config_check.py [--rendered=FILE] MANIFEST_DIR WORK_DIR [BIN_DIR]

For tests/e2e/kubernetes_tf_config_test.sh. Each pod of each StatefulSet
(ordinals 0..replicas-1) and each coordinator is run as the kubelet would
start its container: the command and args of the manifest, $(VAR) expanded
from its env, envFrom and downward-API values, HOSTNAME set to the pod name,
its ConfigMap and Secret volumes laid out as files. The daemon it executes is
a stand-in first on PATH that records its arguments and environment. Then:

  - TF_CONFIG parses, names this pod's task (worker:2 for cohort-worker-2),
    and lists, for every type, as many tasks as that StatefulSet has
    replicas, each at <pod>.<headless Service>.<namespace>.svc:<gRPC port>;
  - --advertise_address is this task's address in that list, --listen and
    the probes use the containerPort, --coordinator names the coordinator's
    Service and port;
  - the coordinator's TF_CONFIG is the same cluster, without a task;
  - ordinal N (one past the replicas) and a foreign hostname are refused.

This is done for cluster.env as it is and for other counts (kustomize's
replacements, emulated: each count becomes its StatefulSet's replicas; with
--rendered, the output of `kubectl kustomize MANIFEST_DIR`, the emulation is
compared with kustomize's own ConfigMap and replicas); and
for the TFJob example, with TF_CONFIG composed as the training operator
composes it. With BIN_DIR, every recorded command line is then run with the
real daemon, plus one flag of an invalid value that is checked last
(--heartbeat_interval=0s, --heartbeat_timeout=0s): the daemon must get as far
as refusing that flag, so TF_CONFIG and every other flag were accepted.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import yaml

NAMESPACE = "cohort-e2e"
TOKEN = "e2e-token"
DAEMON_OF = {"chief": "cohort-agent", "worker": "cohort-agent", "ps": "cohort-ps"}
TYPES = ["chief", "worker", "ps"]

failures = []
checks = 0


def check(condition, what):
    global checks
    checks += 1
    if not condition:
        failures.append(what)
    return condition


def load_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def find(docs, kind, name):
    for d in docs:
        if d.get("kind") == kind and d.get("metadata", {}).get("name") == name:
            return d
    return None


def read_env_file(path):
    """kustomize's envs: KEY=VALUE lines, '#' comments."""
    data = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise ValueError(f"{path}: not KEY=VALUE: {line!r}")
            data[key] = value
    return data


def expand(text, env):
    """The kubelet's $(VAR) expansion; $$ escapes, unknown names stay."""
    def sub(m):
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", sub, text)


class Runner:
    def __init__(self, work, configmaps):
        self.work = work
        self.configmaps = configmaps
        self.fakebin = os.path.join(work, "fakebin")
        os.makedirs(self.fakebin, exist_ok=True)
        for daemon in ("cohort-agent", "cohort-ps", "cohort-coordinator"):
            path = os.path.join(self.fakebin, daemon)
            with open(path, "w") as f:
                f.write(f"#!{sys.executable}\n"
                        "import json, os, sys\n"
                        "with open(os.environ['COHORT_E2E_RECORD'], 'w') as f:\n"
                        "    json.dump({'daemon': os.path.basename(sys.argv[0]),\n"
                        "               'args': sys.argv[1:],\n"
                        "               'env': dict(os.environ)}, f)\n")
            os.chmod(path, 0o755)
        self.runs = 0

    def volumes(self, pod_spec, container, root):
        """Lays out the container's volumes under root: {mountPath: dir}."""
        by_name = {v["name"]: v for v in pod_spec.get("volumes", [])}
        mounts = {}
        for m in container.get("volumeMounts", []):
            volume = by_name.get(m["name"], {})
            d = os.path.join(root, m["name"])
            os.makedirs(d, exist_ok=True)
            if "configMap" in volume:
                for key, value in self.configmaps[volume["configMap"]["name"]].items():
                    with open(os.path.join(d, key), "w") as f:
                        f.write(value)
            elif "secret" in volume:
                with open(os.path.join(d, "token"), "w") as f:
                    f.write(TOKEN + "\n")
            mounts[m["mountPath"]] = d
        return mounts

    def run(self, pod_name, pod_spec, container, extra_env=(), shell=None):
        """Starts the container as the kubelet would; returns (rc, stderr, record)."""
        self.runs += 1
        root = os.path.join(self.work, f"pod{self.runs}")
        os.makedirs(root)
        record = os.path.join(root, "record.json")
        env = {"HOSTNAME": pod_name,
               "PATH": f"{self.fakebin}:/usr/bin:/bin",
               "COHORT_E2E_RECORD": record}
        for source in container.get("envFrom", []):
            env.update(self.configmaps[source["configMapRef"]["name"]])
        for var in list(container.get("env", [])) + list(extra_env):
            if "value" in var:
                env[var["name"]] = expand(var["value"], env)
            else:
                field = var["valueFrom"]["fieldRef"]["fieldPath"]
                env[var["name"]] = {"metadata.namespace": NAMESPACE,
                                    "metadata.name": pod_name}[field]
        argv = [expand(a, env) for a in
                list(container.get("command", [])) + list(container.get("args", []))]
        mounts = self.volumes(pod_spec, container, root)
        # Mount paths in arguments become the directories standing in for
        # them, in one pass: those directories are themselves under /tmp.
        if mounts:
            pattern = re.compile("|".join(
                r"(?:^|(?<==))" + re.escape(p) + r"(?=/|$)"
                for p in sorted(mounts, key=len, reverse=True)))
            argv = [pattern.sub(lambda m: mounts[m.group(0)], a) for a in argv]
        if shell is not None and argv and argv[0] == "/bin/sh":
            argv = list(shell) + argv[1:]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True,
                              timeout=20, cwd=root)
        rec = None
        if os.path.exists(record):
            with open(record) as f:
                rec = json.load(f)
        return proc.returncode, proc.stderr, rec


def flag(args, name):
    """The last --name=VALUE in args (abseil: the last one wins)."""
    value = None
    for a in args:
        if a.startswith(f"--{name}="):
            value = a.split("=", 1)[1]
    return value


def container_port(container, name):
    for p in container.get("ports", []):
        if p.get("name") == name:
            return p["containerPort"]
    return None


def check_probes(where, container, port):
    for probe in ("readinessProbe", "livenessProbe"):
        grpc = container.get(probe, {}).get("grpc")
        check(grpc is not None and grpc.get("port") == port,
              f"{where}: {probe} is not a gRPC probe of port {port}")


def check_stateful_cluster(label, docs, configmaps, runner, shells, recorded):
    """Runs every pod of the chief/worker/ps StatefulSets and the coordinator."""
    data = configmaps["cohort-cluster"]
    coordinator_svc = find(docs, "Service", "cohort-coordinator")
    coordinator_port = next(p["port"] for p in coordinator_svc["spec"]["ports"]
                            if p["name"] == "grpc")
    sets = {t: find(docs, "StatefulSet", f"cohort-{t}") for t in TYPES}
    expected = {}
    for t, sts in sets.items():
        if not check(sts is not None, f"{label}: no StatefulSet cohort-{t}"):
            return
        spec = sts["spec"]
        n = spec["replicas"]
        svc_name = spec["serviceName"]
        svc = find(docs, "Service", svc_name)
        pod = spec["template"]
        c = pod["spec"]["containers"][0]
        port = container_port(c, "grpc")
        where = f"{label}: StatefulSet cohort-{t}"
        check(port == int(data["TASK_PORT"]),
              f"{where}: containerPort grpc {port} is not TASK_PORT {data['TASK_PORT']}")
        check_probes(where, c, port)
        if check(svc is not None, f"{where}: no Service {svc_name}"):
            s = svc["spec"]
            check(s.get("clusterIP") == "None", f"{where}: Service {svc_name} is not headless")
            check(s.get("publishNotReadyAddresses") is True,
                  f"{where}: Service {svc_name} does not publish pods before they are ready")
            labels = pod["metadata"]["labels"]
            check(all(labels.get(k) == v for k, v in s["selector"].items()),
                  f"{where}: Service {svc_name} does not select its pods")
            check(any(p.get("port") == port for p in s["ports"]),
                  f"{where}: Service {svc_name} does not serve port {port}")
        domain = "." + data["CLUSTER_DOMAIN"] if data.get("CLUSTER_DOMAIN") else ""
        expected[t] = [f"cohort-{t}-{i}.{svc_name}.{NAMESPACE}.svc{domain}:{port}"
                       for i in range(n)]
    cluster = {t: a for t, a in expected.items() if a}

    for t, sts in sets.items():
        n = sts["spec"]["replicas"]
        pod_spec = sts["spec"]["template"]["spec"]
        c = pod_spec["containers"][0]
        for i in range(n + 1):
            name = f"cohort-{t}-{i}"
            where = f"{label}: pod {name}"
            for shell in shells if i == 0 else shells[:1]:
                rc, err, rec = runner.run(name, pod_spec, c, shell=shell)
                w = where if shell == shells[0] else f"{where} ({' '.join(shell)})"
                if i == n:
                    check(rc == 2 and rec is None and f"{t.upper()}_REPLICAS" in err,
                          f"{w}: ordinal {n} of {n} replicas was not refused: rc={rc} {err.strip()}")
                    continue
                if not check(rc == 0 and rec is not None, f"{w}: did not start: rc={rc} {err.strip()}"):
                    continue
                check(rec["daemon"] == DAEMON_OF[t], f"{w}: runs {rec['daemon']}, not {DAEMON_OF[t]}")
                try:
                    tf_config = json.loads(rec["env"].get("TF_CONFIG", ""))
                except ValueError as e:
                    check(False, f"{w}: TF_CONFIG is not JSON ({e}): {rec['env'].get('TF_CONFIG')!r}")
                    continue
                check(tf_config.get("task") == {"type": t, "index": i},
                      f"{w}: TF_CONFIG task is {tf_config.get('task')}, not {t}:{i}")
                check(tf_config.get("cluster") == cluster,
                      f"{w}: TF_CONFIG cluster is {tf_config.get('cluster')}, not {cluster}")
                args = rec["args"]
                check(flag(args, "advertise_address") == expected[t][i],
                      f"{w}: --advertise_address={flag(args, 'advertise_address')}, not {expected[t][i]}")
                port = container_port(c, "grpc")
                check(flag(args, "listen") == f"0.0.0.0:{port}",
                      f"{w}: --listen={flag(args, 'listen')}, not 0.0.0.0:{port}")
                check(flag(args, "coordinator") == f"cohort-coordinator:{coordinator_port}",
                      f"{w}: --coordinator={flag(args, 'coordinator')}")
                if shell == shells[0]:
                    recorded.append((where, rec))
                if label == "cluster.env" and t == "worker" and i == n - 1 and shell == shells[0]:
                    print(f"  {name}: TF_CONFIG={rec['env']['TF_CONFIG']}")
                    print(f"  {name}: {rec['daemon']} {' '.join(args)}")
        # A pod of another StatefulSet must not pass for this one.
        rc, err, rec = runner.run(f"cohort-other-0", pod_spec, c)
        check(rc == 2 and rec is None, f"{label}: cohort-{t} ran as pod cohort-other-0: rc={rc}")

    deploy = find(docs, "Deployment", "cohort-coordinator")
    pod_spec = deploy["spec"]["template"]["spec"]
    c = pod_spec["containers"][0]
    check_probes(f"{label}: coordinator", c, coordinator_port)
    rc, err, rec = runner.run("cohort-coordinator-5d8f7c9b4-x2x7q", pod_spec, c)
    if check(rc == 0 and rec is not None, f"{label}: coordinator did not start: rc={rc} {err.strip()}"):
        tf_config = json.loads(rec["env"]["TF_CONFIG"])
        check(tf_config == {"cluster": cluster},
              f"{label}: coordinator TF_CONFIG is {tf_config}, not the cluster {cluster}")
        check(flag(rec["args"], "listen") == f"0.0.0.0:{coordinator_port}",
              f"{label}: coordinator --listen={flag(rec['args'], 'listen')}")
        check(flag(rec["args"], "launch") == "none", f"{label}: coordinator does not run --launch=none")
        recorded.append((f"{label}: coordinator", rec))
    print(f"{label}: " + ", ".join(f"{t} x{len(a)}" for t, a in expected.items()) + " checked")


def check_tfjob(path, runner, recorded):
    """The TFJob example: TF_CONFIG as the training operator composes it."""
    docs = load_docs(path)
    job = next(d for d in docs if d.get("kind") == "TFJob")
    name = job["metadata"]["name"]
    cluster = {}
    for rtype, spec in job["spec"]["tfReplicaSpecs"].items():
        if rtype == "Evaluator":
            continue  # the operator leaves it out of the cluster
        c = next(c for c in spec["template"]["spec"]["containers"] if c["name"] == "tensorflow")
        port = container_port(c, "tfjob-port") or 2222
        rt = rtype.lower()
        cluster[rt] = [f"{name}-{rt}-{i}.{NAMESPACE}.svc:{port}" for i in range(spec["replicas"])]
    deploy = next(d for d in docs if d.get("kind") == "Deployment")
    svc = next(d for d in docs if d.get("kind") == "Service")
    check(svc["spec"]["selector"].items() <= deploy["spec"]["template"]["metadata"]["labels"].items(),
          "tfjob: the coordinator Service does not select the coordinator")
    coordinator = f"{svc['metadata']['name']}:" + str(
        next(p["port"] for p in svc["spec"]["ports"] if p["name"] == "grpc"))
    pod_spec = deploy["spec"]["template"]["spec"]
    rc, err, rec = runner.run(f"{deploy['metadata']['name']}-5d8f7c9b4-x2x7q", pod_spec,
                              pod_spec["containers"][0])
    if check(rc == 0 and rec is not None, f"tfjob: coordinator did not start: rc={rc} {err.strip()}"):
        try:
            tf_config = json.loads(rec["env"]["TF_CONFIG"])
        except ValueError as e:
            tf_config = None
            check(False, f"tfjob: coordinator TF_CONFIG is not JSON ({e})")
        if tf_config is not None:
            check(tf_config == {"cluster": cluster},
                  f"tfjob: coordinator TF_CONFIG {tf_config} is not the operator's cluster {cluster}")
        recorded.append(("tfjob: coordinator", rec))
    for rtype, spec in job["spec"]["tfReplicaSpecs"].items():
        rt = rtype.lower()
        pod_spec = spec["template"]["spec"]
        c = next(c for c in pod_spec["containers"] if c["name"] == "tensorflow")
        port = container_port(c, "tfjob-port") or 2222
        check_probes(f"tfjob: {rtype}", c, port)
        for i in range(spec["replicas"]):
            pod = f"{name}-{rt}-{i}"
            tf_config = {"cluster": cluster, "task": {"type": rt, "index": i},
                         "environment": "cloud"}
            rc, err, rec = runner.run(pod, pod_spec, c, extra_env=[
                {"name": "TF_CONFIG", "value": json.dumps(tf_config, separators=(",", ":"))}])
            if not check(rc == 0 and rec is not None, f"tfjob: pod {pod} did not start: rc={rc} {err.strip()}"):
                continue
            check(rec["daemon"] == DAEMON_OF.get(rt), f"tfjob: pod {pod} runs {rec['daemon']}")
            args = rec["args"]
            check(flag(args, "advertise_address") == cluster[rt][i],
                  f"tfjob: pod {pod}: --advertise_address={flag(args, 'advertise_address')}, not {cluster[rt][i]}")
            check(flag(args, "listen") == f"0.0.0.0:{port}", f"tfjob: pod {pod}: --listen={flag(args, 'listen')}")
            check(flag(args, "coordinator") == coordinator,
                  f"tfjob: pod {pod}: --coordinator={flag(args, 'coordinator')}, not {coordinator}")
            recorded.append((f"tfjob: pod {pod}", rec))
    print("tfjob: " + ", ".join(f"{t} x{len(a)}" for t, a in cluster.items()) + " checked")


def check_real_daemons(bin_dir, recorded, work):
    """Each recorded command line, run by the real daemon up to its last check."""
    home = os.path.join(work, "home")
    os.makedirs(home, exist_ok=True)
    for where, rec in recorded:
        daemon = rec["daemon"]
        coordinator = daemon == "cohort-coordinator"
        last = "--heartbeat_timeout=0s" if coordinator else "--heartbeat_interval=0s"
        expect = "must be positive"
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home,
               "TF_CONFIG": rec["env"]["TF_CONFIG"]}
        if "COHORT_COORDINATOR" in rec["env"]:
            env["COHORT_COORDINATOR"] = rec["env"]["COHORT_COORDINATOR"]
        proc = subprocess.run([os.path.join(bin_dir, daemon)] + rec["args"] + [last],
                              env=env, capture_output=True, text=True, timeout=20, cwd=home)
        err = proc.stderr.strip()
        check(proc.returncode == 2 and expect in err and last.split("=")[0] in err,
              f"{where}: {daemon} did not accept TF_CONFIG and its flags: rc={proc.returncode} {err}")
    print(f"real daemons in {bin_dir}: {len(recorded)} command lines checked")


def check_rendered(path, configmaps, docs):
    """kustomize's output must match the emulation of it."""
    rendered = load_docs(path)
    cms = [d for d in rendered if d.get("kind") == "ConfigMap"
           and d["metadata"]["name"].startswith("cohort-cluster-")]
    if not check(len(cms) == 1, f"{path}: not one generated ConfigMap cohort-cluster-<hash>"):
        return
    cm = cms[0]
    check(cm.get("data") == configmaps["cohort-cluster"],
          f"{path}: kustomize's ConfigMap data differ from cluster.env and tf-config.sh")
    for d in rendered:
        if d.get("kind") == "StatefulSet":
            original = find(docs, "StatefulSet", d["metadata"]["name"])
            check(original is not None and d["spec"]["replicas"] == original["spec"]["replicas"],
                  f"{path}: kustomize gives {d['metadata']['name']} {d['spec']['replicas']} replicas")
        if d.get("kind") in ("StatefulSet", "Deployment"):
            text = json.dumps(d["spec"]["template"])
            check(cm["metadata"]["name"] in text and '"cohort-cluster"' not in text,
                  f"{path}: {d['metadata']['name']} does not use {cm['metadata']['name']}")
    print(f"kustomize output: {cm['metadata']['name']} and replicas as emulated")


def main(argv):
    rendered = None
    if len(argv) > 1 and argv[1].startswith("--rendered="):
        rendered = argv[1].split("=", 1)[1]
        argv = argv[:1] + argv[2:]
    if len(argv) not in (3, 4):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    manifests, work = argv[1], argv[2]
    bin_dir = argv[3] if len(argv) == 4 else None

    kustomization = load_docs(os.path.join(manifests, "kustomization.yaml"))[0]
    docs = []
    for resource in kustomization["resources"]:
        docs += load_docs(os.path.join(manifests, resource))
    configmaps = {}
    for gen in kustomization.get("configMapGenerator", []):
        data = {}
        for env_file in gen.get("envs", []):
            data.update(read_env_file(os.path.join(manifests, env_file)))
        for f in gen.get("files", []):
            key, _, src = f.rpartition("=")
            with open(os.path.join(manifests, src)) as fh:
                data[key or os.path.basename(src)] = fh.read()
        configmaps[gen["name"]] = data
    replicas_from = {}
    for r in kustomization.get("replacements", []):
        src = r["source"]
        for target in r["targets"]:
            if target["fieldPaths"] == ["spec.replicas"]:
                key = src["fieldPath"].split(".", 1)[1]
                replicas_from[target["select"]["name"]] = (src["name"], key)
    for t in TYPES:
        check(replicas_from.get(f"cohort-{t}") == ("cohort-cluster", f"{t.upper()}_REPLICAS"),
              f"kustomization.yaml: StatefulSet cohort-{t}'s replicas do not come from "
              f"cohort-cluster's {t.upper()}_REPLICAS")
    data = configmaps["cohort-cluster"]
    for t in TYPES:
        sts = find(docs, "StatefulSet", f"cohort-{t}")
        check(sts is not None and sts["spec"]["replicas"] == int(data[f"{t.upper()}_REPLICAS"]),
              f"{t}.yaml: replicas differ from {t.upper()}_REPLICAS in cluster.env")

    if rendered:
        check_rendered(rendered, configmaps, docs)

    runner = Runner(work, configmaps)
    # The manifests' /bin/sh, then every other POSIX shell here: images
    # differ in which one /bin/sh is.
    shells = [("/bin/sh",)]
    seen = {os.path.realpath("/bin/sh")}
    for shell in (("dash",), ("bash", "--posix"), ("busybox", "sh"), ("mksh",)):
        path = shutil.which(shell[0])
        if path and os.path.realpath(path) not in seen:
            seen.add(os.path.realpath(path))
            shells.append((path,) + shell[1:])
    recorded = []
    env_counts = tuple(int(data[f"{t.upper()}_REPLICAS"]) for t in TYPES)
    for counts, domain in [(env_counts, None), ((1, 4, 2), "cluster.local"),
                           ((1, 5, 0), None), ((0, 3, 1), None)]:
        cm = dict(configmaps)
        cm["cohort-cluster"] = dict(data)
        if domain is not None:
            cm["cohort-cluster"]["CLUSTER_DOMAIN"] = domain
        variant = []
        for t, n in zip(TYPES, counts):
            cm["cohort-cluster"][f"{t.upper()}_REPLICAS"] = str(n)
        for d in docs:
            d = json.loads(json.dumps(d))
            if d.get("kind") == "StatefulSet" and d["metadata"]["name"] in replicas_from:
                _, key = replicas_from[d["metadata"]["name"]]
                d["spec"]["replicas"] = int(cm["cohort-cluster"][key])
            variant.append(d)
        runner.configmaps = cm
        label = "cluster.env" if counts == env_counts else \
            "counts " + "/".join(f"{t}={n}" for t, n in zip(TYPES, counts)) + \
            (f" CLUSTER_DOMAIN={domain}" if domain else "")
        check_stateful_cluster(label, variant, cm, runner,
                               shells if counts == env_counts else shells[:1], recorded)

    tfjob = os.path.join(manifests, "tfjob", "tfjob.yaml")
    if os.path.exists(tfjob):
        runner.configmaps = configmaps
        check_tfjob(tfjob, runner, recorded)

    if bin_dir:
        check_real_daemons(bin_dir, recorded, work)

    if failures:
        for f in failures:
            print(f"FAIL {f}")
        print(f"{len(failures)} of {checks} checks failed")
        return 1
    print(f"{checks} checks passed ({runner.runs} pods started; shells: "
          + ", ".join(" ".join(s) for s in shells) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
