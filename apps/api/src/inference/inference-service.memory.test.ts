import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { ModelRepository } from "@ferry/model-repository";
import { describe, expect, it } from "vitest";
import { testInferenceClient } from "../../../../test/helpers/inference-client.js";
import { OPEN_TENANT } from "../http/tenant.js";
import { ApiMetrics } from "../metrics.js";
import { InferenceService } from "./inference-service.js";
import { TrafficRouter } from "./traffic-router.js";

// Real Redis, under a prefix of this file's own, and no worker: a predict sent here stays in
// flight until its deadline, as one waiting in a deep queue does.
const client = testInferenceClient();

/** V8's collector, called by hand (node:vm hands out `gc` once the flag is set). */
function collector(): () => void {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
}

describe("InferenceService with requests in flight", () => {
  it("a predict waiting for its answer holds its encoded row, not its parsed body", async () => {
    await client.ready();
    const repository = await ModelRepository.open("models");
    const service = new InferenceService(
      repository,
      client,
      new ApiMetrics(),
      new TrafficRouter(client.state),
    );
    const gc = collector();
    let features: number[] | undefined = Array.from({ length: 784 }, (_, i) => (i % 17) / 16);
    const body = new WeakRef(features);
    const answer = service
      .predict(
        "mnist",
        "1",
        { features },
        { requestId: "r", tenant: OPEN_TENANT, timeoutMs: 3_000 },
      )
      .catch((err: unknown) => err);
    features = undefined;
    // queued: the row went to Redis, and the call waits for a worker that never comes
    await new Promise((resolve) => setTimeout(resolve, 200));
    gc();
    await new Promise((resolve) => setTimeout(resolve, 0));
    gc();
    expect(body.deref()).toBeUndefined();
    // it was in flight all along: it ends at its deadline, not before
    expect(await answer).toMatchObject({ code: "DEADLINE_EXCEEDED" });
  });
});
