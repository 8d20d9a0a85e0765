// Validates Kubernetes manifests against the API schema of the npm package
// kubernetes-models, for tests/e2e/kubernetes_manifests_test.sh.
//
//   NODE_PATH=DIR/node_modules node kubernetes_manifests_validate.cjs FILE... [--stdin LABEL]
//
// Every YAML document must be one of:
//   - a Kubernetes object with a kubernetes-models class: its validate(),
//     then a check for fields the schema does not know (see strictCheck);
//   - a kubeflow.org/v1 TFJob: no schema package exists for it, so its
//     fields are checked against the TFJob v1 API here and every replica's
//     template as a core PodTemplateSpec;
//   - a kustomize Kustomization or Component, or a JSON patch (a list of
//     operations): not API objects, only parsed here; the shell script
//     checks what kustomize makes of them.
// Prints one line per document; exits 1 if any is wrong, 2 on bad usage.
"use strict";

const fs = require("fs");
const YAML = require("yaml");

const failures = [];
let checked = 0;

function fail(where, message) {
  failures.push(`${where}: ${message}`);
}

// The API server reads YAML 1.1 (yes/no/on/off are booleans, 0440 is octal);
// parse it the same way so that an unquoted `value: yes` shows up as the
// boolean the server would see.
function parseDocuments(text, label) {
  const docs = YAML.parseAllDocuments(text, { version: "1.1", uniqueKeys: true });
  const result = [];
  docs.forEach((doc, i) => {
    const where = `${label}[${i}]`;
    if (doc.errors.length > 0) {
      for (const e of doc.errors) fail(where, `YAML: ${e.message}`);
      return;
    }
    const value = doc.toJS({ maxAliasCount: 100 });
    if (value !== null && value !== undefined) result.push({ where, value });
  });
  return result;
}

function errorText(e) {
  if (e && Array.isArray(e.errors)) {
    return e.errors
      .map((x) => `${x.instancePath || "/"} ${x.message || x.keyword}`)
      .join("; ");
  }
  return String(e && e.message ? e.message : e);
}

function accepts(Model, doc) {
  try {
    new Model(doc).validate();
    return true;
  } catch (e) {
    return false;
  }
}

// The schemas allow any extra field, as the API server's non-strict mode
// does, so a misspelt field (livenesProbe) would pass validate() and be
// dropped by the server. Each field is tested by putting a value of no JSON
// type in its place: a field the schema knows is then rejected; one it
// does not know still validates, and is reported. Keys of maps (labels,
// data, limits) have typed values and so count as known.
const NOT_JSON = Symbol("not-json");

function strictCheck(Model, root, where) {
  const unknown = [];
  const walk = (node, path) => {
    if (Array.isArray(node)) {
      node.forEach((item, i) => walk(item, `${path}/${i}`));
      return;
    }
    if (node === null || typeof node !== "object") return;
    for (const key of Object.keys(node)) {
      const saved = node[key];
      node[key] = NOT_JSON;
      const known = !accepts(Model, root);
      node[key] = saved;
      if (known) {
        walk(saved, `${path}/${key}`);
      } else {
        unknown.push(`${path}/${key}`);
      }
    }
  };
  walk(root, "");
  for (const path of unknown) fail(where, `unknown field ${path}`);
  return unknown.length === 0;
}

function modelFor(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string") return null;
  if (!/^[A-Za-z0-9]+$/.test(kind)) return null;
  // Core objects live under "v1", the others under "<group>/<version>".
  const parts = apiVersion.split("/");
  if (parts.length > 2 || parts.some((p) => !/^[a-z0-9.-]+$/.test(p))) return null;
  try {
    const module = require(`kubernetes-models/${apiVersion}/${kind}`);
    return module[kind] || null;
  } catch (e) {
    if (e && e.code === "MODULE_NOT_FOUND") return null;
    throw e;
  }
}

function validateObject(Model, doc, where) {
  try {
    new Model(doc).validate();
  } catch (e) {
    fail(where, errorText(e));
    return false;
  }
  return strictCheck(Model, doc, where);
}

// kubeflow.org/v1 TFJob, as the training operator's API defines it.
const TFJOB_REPLICA_TYPES = ["Chief", "Master", "Worker", "PS", "Evaluator"];
const TFJOB_RESTART_POLICIES = ["Always", "OnFailure", "Never", "ExitCode"];
const TFJOB_RUN_POLICY = [
  "cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds",
  "backoffLimit", "schedulingPolicy", "suspend", "managedBy",
];

function isObject(x) {
  return x !== null && typeof x === "object" && !Array.isArray(x);
}

function onlyKeys(obj, allowed, where, path) {
  for (const key of Object.keys(obj)) {
    if (!allowed.includes(key)) fail(where, `unknown field ${path}/${key}`);
  }
}

function validateTFJob(doc, where) {
  const before = failures.length;
  onlyKeys(doc, ["apiVersion", "kind", "metadata", "spec", "status"], where, "");
  const ObjectMeta = require("@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta").ObjectMeta;
  if (!isObject(doc.metadata)) {
    fail(where, "/metadata: missing");
  } else {
    validateObject(ObjectMeta, doc.metadata, `${where} /metadata`);
    // The operator names pods and Services <name>-<type>-<index>.
    if (typeof doc.metadata.name !== "string" ||
        !/^[a-z]([-a-z0-9]*[a-z0-9])?$/.test(doc.metadata.name)) {
      fail(where, "/metadata/name: must be a DNS-1035 label");
    }
  }
  const spec = doc.spec;
  if (!isObject(spec)) {
    fail(where, "/spec: missing");
    return failures.length === before;
  }
  onlyKeys(spec, ["tfReplicaSpecs", "runPolicy", "successPolicy", "enableDynamicWorker"], where, "/spec");
  if (spec.successPolicy !== undefined && !["", "AllWorkers"].includes(spec.successPolicy)) {
    fail(where, `/spec/successPolicy: "${spec.successPolicy}" is not "" or "AllWorkers"`);
  }
  if (spec.enableDynamicWorker !== undefined && typeof spec.enableDynamicWorker !== "boolean") {
    fail(where, "/spec/enableDynamicWorker: must be a boolean");
  }
  if (spec.runPolicy !== undefined) {
    if (!isObject(spec.runPolicy)) {
      fail(where, "/spec/runPolicy: must be an object");
    } else {
      onlyKeys(spec.runPolicy, TFJOB_RUN_POLICY, where, "/spec/runPolicy");
      const clean = spec.runPolicy.cleanPodPolicy;
      if (clean !== undefined && !["All", "Running", "None"].includes(clean)) {
        fail(where, `/spec/runPolicy/cleanPodPolicy: "${clean}" is not All, Running or None`);
      }
    }
  }
  const replicaSpecs = spec.tfReplicaSpecs;
  if (!isObject(replicaSpecs) || Object.keys(replicaSpecs).length === 0) {
    fail(where, "/spec/tfReplicaSpecs: must name at least one replica type");
    return failures.length === before;
  }
  const PodTemplateSpec = require("kubernetes-models/v1/PodTemplateSpec").PodTemplateSpec;
  for (const [type, rs] of Object.entries(replicaSpecs)) {
    const path = `/spec/tfReplicaSpecs/${type}`;
    if (!TFJOB_REPLICA_TYPES.includes(type)) {
      fail(where, `${path}: unknown replica type (${TFJOB_REPLICA_TYPES.join(", ")})`);
      continue;
    }
    if (!isObject(rs)) {
      fail(where, `${path}: must be an object`);
      continue;
    }
    onlyKeys(rs, ["replicas", "template", "restartPolicy"], where, path);
    if (rs.replicas !== undefined && !(Number.isInteger(rs.replicas) && rs.replicas >= 0)) {
      fail(where, `${path}/replicas: must be a non-negative integer`);
    }
    if ((type === "Chief" || type === "Master") && rs.replicas > 1) {
      fail(where, `${path}/replicas: at most 1`);
    }
    if (rs.restartPolicy !== undefined && !TFJOB_RESTART_POLICIES.includes(rs.restartPolicy)) {
      fail(where, `${path}/restartPolicy: "${rs.restartPolicy}" is not ${TFJOB_RESTART_POLICIES.join(", ")}`);
    }
    if (!isObject(rs.template)) {
      fail(where, `${path}/template: missing`);
      continue;
    }
    validateObject(PodTemplateSpec, rs.template, `${where} ${path}/template`);
    // The operator sets TF_CONFIG and finds the port in this container.
    const containers = (rs.template.spec && rs.template.spec.containers) || [];
    if (!containers.some((c) => c && c.name === "tensorflow")) {
      fail(where, `${path}/template: no container named "tensorflow"`);
    }
  }
  return failures.length === before;
}

function describe(doc) {
  const name = isObject(doc.metadata) ? doc.metadata.name : undefined;
  return `${doc.kind}/${name === undefined ? "?" : name}`;
}

function checkDocument({ where, value }) {
  checked++;
  if (Array.isArray(value)) {
    const ops = ["add", "remove", "replace", "move", "copy", "test"];
    value.forEach((op, i) => {
      if (!isObject(op) || !ops.includes(op.op) || typeof op.path !== "string" ||
          !op.path.startsWith("/")) {
        fail(where, `[${i}]: not a JSON patch operation`);
      }
    });
    console.log(`${where}: JSON patch of ${value.length} operations (applied by kustomize)`);
    return;
  }
  if (!isObject(value)) {
    fail(where, "not a Kubernetes object");
    return;
  }
  if (typeof value.apiVersion === "string" &&
      value.apiVersion.startsWith("kustomize.config.k8s.io/")) {
    console.log(`${where}: ${value.kind} (kustomize input, rendered separately)`);
    return;
  }
  const at = `${where} ${describe(value)}`;
  if (value.apiVersion === "kubeflow.org/v1" && value.kind === "TFJob") {
    if (validateTFJob(value, at)) {
      console.log(`${at}: ok (TFJob fields; templates as core/v1 PodTemplateSpec)`);
    }
    return;
  }
  const Model = modelFor(value.apiVersion, value.kind);
  if (Model === null) {
    fail(at, `no schema for apiVersion "${value.apiVersion}"`);
    return;
  }
  if (validateObject(Model, value, at)) {
    console.log(`${at}: ${value.apiVersion} ok`);
  }
}

function main(argv) {
  const inputs = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--stdin") {
      if (i + 1 >= argv.length) {
        console.error("--stdin needs a LABEL");
        process.exit(2);
      }
      inputs.push({ label: argv[++i], text: fs.readFileSync(0, "utf8") });
    } else {
      inputs.push({ label: argv[i], text: fs.readFileSync(argv[i], "utf8") });
    }
  }
  if (inputs.length === 0) {
    console.error("usage: kubernetes_manifests_validate.cjs FILE... [--stdin LABEL]");
    process.exit(2);
  }
  for (const { label, text } of inputs) {
    const docs = parseDocuments(text, label);
    if (docs.length === 0) fail(label, "no YAML documents");
    docs.forEach(checkDocument);
  }
  if (failures.length > 0) {
    for (const f of failures) console.log(`INVALID ${f}`);
    console.log(`${failures.length} problem(s) in ${checked} document(s)`);
    process.exit(1);
  }
  console.log(`${checked} document(s) valid`);
}

main(process.argv.slice(2));
