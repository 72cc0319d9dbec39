"""Checks the Kubernetes manifests of deploy/kubernetes.

usage: check_manifests.py MANIFEST_DIR DTF_RUN_HELP

Every object that Kubernetes itself defines (a PersistentVolumeClaim) is
validated as it is; a TFJob (Kubeflow's custom resource, which has no schema
here) has each replica's pod template validated as a Pod, strictly (no
unknown field). Beyond the schemas, what the training operator and dtf-run
need: the container named `tensorflow` with the port `tfjob-port` 2222,
`restartPolicy: ExitCode` on every replica, GPUs only on the workers, a chief,
ps and workers, and every dtf-run flag known to dtf-run --help (--tls-dir,
issue 16's flag, is checked to point at a mounted Secret instead). A template
broken on purpose must fail, so that the validator is known to validate.
"""
import copy
import glob
import re
import sys

import kubernetes_validate
import yaml

KUBERNETES = "1.33"
manifest_dir, help_path = sys.argv[1], sys.argv[2]
known_flags = set(re.findall(r"^\s+(--[a-z-]+)", open(help_path).read(), re.M))
failures = []


def check(cond, message):
    if not cond:
        failures.append(message)
    return cond


def validate(obj, where):
    try:
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)
        return True
    except kubernetes_validate.ValidationError as e:
        failures.append(f"{where}: {e.message} at {'/'.join(map(str, e.path))}")
    except Exception as e:  # noqa: BLE001 (a schema the library lacks)
        failures.append(f"{where}: {type(e).__name__}: {e}")
    return False


def check_template(where, rtype, template):
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"{where.split(':')[1].lower()}-0"},
           "spec": template["spec"]}
    validate(pod, where)
    containers = template["spec"].get("containers", [])
    tf = [c for c in containers if c.get("name") == "tensorflow"]
    if not check(len(tf) == 1, f"{where}: no container named 'tensorflow' (the operator sets TF_CONFIG only there)"):
        return
    c = tf[0]
    ports = [p for p in c.get("ports", []) if p.get("name") == "tfjob-port"]
    check(ports and ports[0].get("containerPort") == 2222, f"{where}: no port 'tfjob-port' 2222")
    command = c.get("command", []) + c.get("args", [])
    check(command[:1] == ["dtf-run"], f"{where}: the command is not dtf-run: {command}")
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    secrets = {v["name"] for v in template["spec"].get("volumes", []) if "secret" in v}
    for i, arg in enumerate(command):
        if not arg.startswith("--"):
            continue
        if arg == "--tls-dir":
            path = command[i + 1] if i + 1 < len(command) else ""
            check(mounts.get(path) in secrets, f"{where}: --tls-dir {path} is not a mounted Secret")
        else:
            check(arg in known_flags, f"{where}: dtf-run has no flag {arg}")
    check("--model-dir" in command, f"{where}: no --model-dir (the shared model directory)")
    gpus = any("nvidia.com/gpu" in (c.get("resources", {}).get(k) or {}) for k in ("limits", "requests"))
    check(gpus == (rtype == "Worker"), f"{where}: GPUs belong on the workers only (gpu: {gpus})")


documents = 0
for path in sorted(glob.glob(manifest_dir + "/*.yaml")):
    for n, obj in enumerate(yaml.safe_load_all(open(path))):
        if obj is None:
            continue
        documents += 1
        where = f"{path}#{n} {obj.get('kind')}"
        if obj.get("kind") != "TFJob":
            validate(obj, where)
            continue
        check(obj.get("apiVersion") == "kubeflow.org/v1", f"{where}: apiVersion {obj.get('apiVersion')}")
        specs = obj["spec"]["tfReplicaSpecs"]
        check({"Chief", "PS", "Worker"} <= set(specs) or {"Master", "PS", "Worker"} <= set(specs),
              f"{where}: needs a Chief (or Master), PS and Worker: {sorted(specs)}")
        check(set(specs) <= {"Chief", "Master", "PS", "Worker", "Evaluator"},
              f"{where}: unknown replica types {sorted(specs)}")
        for rtype, spec in specs.items():
            check(spec.get("restartPolicy") == "ExitCode",
                  f"{where}:{rtype}: restartPolicy {spec.get('restartPolicy')}, not ExitCode")
            check(isinstance(spec.get("replicas"), int) and spec["replicas"] >= 1,
                  f"{where}:{rtype}: replicas {spec.get('replicas')}")
            check_template(f"{where}:{rtype}", rtype, spec["template"])
        # The validator must see a broken template.
        broken = copy.deepcopy(specs["Worker"]["template"])
        broken["spec"]["containers"][0]["ports"][0]["containerPort"] = "2222"
        bad = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "broken"}, "spec": broken["spec"]}
        try:
            kubernetes_validate.validate(bad, KUBERNETES, strict=True)
            failures.append("kubernetes-validate accepted a containerPort given as a string")
        except kubernetes_validate.ValidationError:
            pass

check(documents >= 2, f"only {documents} objects in {manifest_dir}")
if failures:
    print("deploy manifests:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"deploy manifests: {documents} objects valid for Kubernetes {KUBERNETES}")
