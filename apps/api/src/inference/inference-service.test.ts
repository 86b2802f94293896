import type { ModelRepository } from "@ferry/model-repository";
import type { InferenceClient } from "@ferry/transport";
import { describe, expect, it } from "vitest";
import { OPEN_TENANT } from "../http/tenant.js";
import type { ApiMetrics } from "../metrics.js";
import { InferenceService } from "./inference-service.js";
import type { TrafficRouter } from "./traffic-router.js";

/** Fails the test if a call reaches it: nothing may be sent to a worker. */
const untouchable = <T>(name: string) =>
  new Proxy(
    {},
    {
      get: (_, key) => {
        throw new Error(`${name}.${String(key)} was used`);
      },
    },
  ) as T;

const repository = {
  get: () => ({ config: { default_timeout_ms: 100 } }),
} as unknown as ModelRepository;

const service = new InferenceService(
  repository,
  untouchable<InferenceClient>("client"),
  untouchable<ApiMetrics>("metrics"),
  untouchable<TrafficRouter>("router"),
);

describe("InferenceService deadlines", () => {
  const call = { requestId: "r", tenant: OPEN_TENANT };

  it("answers 504 without sending a row whose deadline passed while it waited in the API", async () => {
    // the model's default timeout (100 ms), all spent waiting
    await expect(
      service.predict("mnist", "1", { features: [0] }, { ...call, waitedMs: 100 }),
    ).rejects.toMatchObject({ code: "DEADLINE_EXCEEDED" });
    // the caller's own timeout
    await expect(
      service.predict("mnist", "1", { features: [0] }, { ...call, timeoutMs: 20, waitedMs: 25 }),
    ).rejects.toMatchObject({ code: "DEADLINE_EXCEEDED" });
    // another protocol's plan on the same path (v2 infer): never even planned
    const never = () => {
      throw new Error("planned after its deadline");
    };
    await expect(
      service.runWithin("mnist", "1", { ...call, timeoutMs: 20, waitedMs: 20 }, never, never),
    ).rejects.toMatchObject({ code: "DEADLINE_EXCEEDED" });
  });
});
