import { afterAll, beforeAll, describe } from "vitest";
import { type LocalCluster, startLocalCluster } from "../scripts/redis-cluster.js";
import { batchFaults } from "./helpers/openai-batch-faults.js";

// An OpenAI batch through a deployment's faults on a local Redis Cluster (3 primaries + 3
// replicas); the same on one Redis: openai-batch.fault.test.ts.
let cluster: LocalCluster | undefined;
describe("on a local Redis Cluster", () => {
  beforeAll(async () => {
    cluster = await startLocalCluster({ nodeTimeoutMs: 1_000 });
  }, 60_000);
  afterAll(() => cluster?.stop());
  batchFaults(
    "Redis Cluster",
    () => ({ url: "redis://127.0.0.1", clusterNodes: cluster?.nodes.split(",") ?? [] }),
    120,
  );
});
