import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Deployment, StatefulSet } from "kubernetes-models/apps/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { Job } from "kubernetes-models/batch/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { ConfigMap, Service } from "kubernetes-models/v1";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";

// `kubectl kustomize` renders the overlays; .ci/run installs kubectl where it is missing.
const hasKubectl = spawnSync("kubectl", ["version", "--client"]).status === 0;
const models: Record<string, new (data: never) => { validate(): void }> = {
  Deployment: Deployment as never,
  StatefulSet: StatefulSet as never,
  HorizontalPodAutoscaler: HorizontalPodAutoscaler as never,
  ConfigMap: ConfigMap as never,
  Service: Service as never,
  PodDisruptionBudget: PodDisruptionBudget as never,
  Job: Job as never,
};

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
}

function render(overlay: string): K8sObject[] {
  const text = execFileSync("kubectl", ["kustomize", `infra/k8s/overlays/${overlay}`], {
    encoding: "utf8",
  });
  return parseAllDocuments(text).map((d) => d.toJSON() as K8sObject);
}

const find = (objects: K8sObject[], kind: string, name: string) => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`${kind}/${name} missing`);
  // biome-ignore lint/suspicious/noExplicitAny: rendered YAML is untyped; the assertions walk into it
  return found as K8sObject & { spec: Record<string, any> };
};

describe.skipIf(!hasKubectl && !process.env.CI)("Kubernetes manifests", () => {
  for (const overlay of ["cpu", "gpu", "cpu-redis-cluster"]) {
    it(`${overlay}: every object renders and passes the Kubernetes schema`, () => {
      const objects = render(overlay);
      expect(objects.length).toBeGreaterThanOrEqual(10);
      for (const o of objects) {
        const Model = models[o.kind];
        if (Model)
          expect(
            () => new Model(o as never).validate(),
            `${o.kind}/${o.metadata.name}`,
          ).not.toThrow();
        else expect(o.kind).toBe("ScaledObject"); // KEDA's CRD: checked below
      }
    });
  }

  it("the API: two replicas at least, probes on the v2 health routes with timeouts above an overloaded turn, a disruption budget, an HPA with a deadband", () => {
    const objects = render("cpu");
    const api = find(objects, "Deployment", "ferry-api");
    expect(api.spec.replicas).toBeGreaterThanOrEqual(2);
    const container = api.spec.template.spec.containers[0];
    expect(container.readinessProbe.httpGet.path).toBe("/v2/health/ready");
    expect(container.livenessProbe.httpGet.path).toBe("/v2/health/live");
    // on the probe port (PROBE_PORT), not behind the clients' connections on the main one
    const probePort = container.ports.find((p: { name: string }) => p.name === "probe");
    const probeEnv = container.env.find((e: { name: string }) => e.name === "PROBE_PORT");
    expect(String(probePort?.containerPort)).toBe(probeEnv?.value);
    expect(container.readinessProbe.httpGet.port).toBe("probe");
    expect(container.livenessProbe.httpGet.port).toBe("probe");
    expect(api.spec.template.metadata.annotations["prometheus.io/port"]).toBe(probeEnv?.value);
    // above what a probe waits at 5x capacity (bench/classifier.ts, overload: up to 1.9 s)
    expect(container.readinessProbe.timeoutSeconds).toBeGreaterThanOrEqual(2);
    expect(container.livenessProbe.timeoutSeconds).toBeGreaterThan(
      container.readinessProbe.timeoutSeconds,
    );
    expect(container.resources.requests.cpu).toBeDefined();
    expect(find(objects, "PodDisruptionBudget", "ferry-api").spec.minAvailable).toBe(1);
    const hpa = find(objects, "HorizontalPodAutoscaler", "ferry-api");
    expect(hpa.spec.minReplicas).toBe(2);
    expect(hpa.spec.behavior.scaleDown.stabilizationWindowSeconds).toBeGreaterThan(
      hpa.spec.behavior.scaleUp.stabilizationWindowSeconds,
    );
  });

  it("workers: a grace period for a drain, their own probe port, KEDA on the full queue depth", () => {
    const objects = render("cpu");
    const worker = find(objects, "Deployment", "ferry-worker");
    expect(worker.spec.template.spec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(60);
    const container = worker.spec.template.spec.containers[0];
    expect(container.readinessProbe.httpGet.port).toBe("metrics");
    const scaled = find(objects, "ScaledObject", "ferry-worker");
    expect(scaled.apiVersion).toBe("keda.sh/v1alpha1");
    expect(scaled.spec.scaleTargetRef.name).toBe("ferry-worker");
    expect(scaled.spec.triggers[0].metadata.query).toContain("ferry_queue_waiting_jobs");
  });

  it("Redis: AOF on, noeviction, a volume", () => {
    const redis = find(render("cpu"), "StatefulSet", "ferry-redis");
    const args: string[] = redis.spec.template.spec.containers[0].args;
    expect(args.join(" ")).toContain("--appendonly yes");
    expect(args.join(" ")).toContain("--maxmemory-policy noeviction");
    expect(redis.spec.volumeClaimTemplates[0].metadata.name).toBe("data");
  });

  it("the redis-cluster component: six cluster nodes on stable names with AOF and noeviction, a create Job, every process pointed at the cluster, KEDA unchanged", () => {
    const objects = render("cpu-redis-cluster");
    expect(objects.some((o) => o.metadata.name === "ferry-redis")).toBe(false);
    const nodes = find(objects, "StatefulSet", "ferry-redis-cluster");
    expect(nodes.spec.replicas).toBe(6);
    const args = nodes.spec.template.spec.containers[0].args.join(" ");
    for (const flag of [
      "--cluster-enabled yes",
      "--cluster-announce-hostname",
      "--appendonly yes",
      "--maxmemory-policy noeviction",
    ])
      expect(args).toContain(flag);
    expect(find(objects, "Service", "ferry-redis-cluster").spec.clusterIP).toBe("None");
    const create = find(objects, "Job", "ferry-redis-cluster-create");
    expect(create.spec.template.spec.containers[0].args.join(" ")).toContain(
      "--cluster-replicas 1",
    );
    const config = find(objects, "ConfigMap", "ferry-config");
    const seeds = (config.data?.REDIS_CLUSTER_NODES ?? "").split(",");
    expect(seeds).toHaveLength(3);
    for (const seed of seeds)
      expect(seed).toMatch(/^ferry-redis-cluster-\d\.ferry-redis-cluster:6379$/);
    expect(config.data?.ACCEPT_REPLICAS).toBe("1");
    // both deployments read the ConfigMap whole, so the cluster reaches API and workers alike
    for (const name of ["ferry-api", "ferry-worker"]) {
      const container = find(objects, "Deployment", name).spec.template.spec.containers[0];
      expect(JSON.stringify(container.envFrom)).toContain("ferry-config");
    }
    expect(find(objects, "ScaledObject", "ferry-worker").spec.triggers[0].metadata.query).toContain(
      "ferry_queue_waiting_jobs",
    );
  });

  it("the gpu overlay: the cuda provider, a GPU each, tolerations for GPU nodes", () => {
    const worker = find(render("gpu"), "Deployment", "ferry-worker");
    const spec = worker.spec.template.spec;
    const container = spec.containers[0];
    expect(container.env.find((e: { name: string }) => e.name === "EXECUTION_PROVIDER").value).toBe(
      "cuda",
    );
    expect(container.resources.limits["nvidia.com/gpu"]).toBe("1");
    expect(spec.tolerations[0].key).toBe("nvidia.com/gpu");
    expect(
      find(render("cpu"), "Deployment", "ferry-worker").spec.template.spec.tolerations,
    ).toBeUndefined();
  });
});

describe("Grafana dashboard", () => {
  it("every metric a panel queries is one the API or a worker exports", () => {
    const dashboard = readFileSync("infra/grafana/ferry-dashboard.json", "utf8");
    const exported = ["apps/api/src/metrics.ts", "apps/worker/src/metrics.ts"]
      .map((f) => readFileSync(f, "utf8"))
      .join("\n");
    const queried = new Set(
      [...dashboard.matchAll(/(?:ferry|gen_ai)_[a-z_]+/g)].map((m) =>
        m[0].replace(/_(bucket|sum|count)$/, ""),
      ),
    );
    expect(queried.size).toBeGreaterThan(10);
    for (const name of queried) expect(exported, name).toContain(`"${name}"`);
  });
});
