import { batchFaults } from "./helpers/openai-batch-faults.js";

// An OpenAI batch through a deployment's faults on one Redis (the cases: the helper's file;
// the same on a Redis Cluster: openai-batch.cluster.fault.test.ts).
batchFaults("one Redis", () => undefined, 250);
