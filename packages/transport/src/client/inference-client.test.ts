import { FerryError } from "@ferry/protocol";
import { describe, expect, it } from "vitest";
import { testInferenceClient } from "../../../../test/helpers/inference-client.js";

// Real Redis, under a prefix of this file's own.
const client = testInferenceClient();

const refusal = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return err instanceof FerryError ? err.code : String(err);
  }
  return undefined;
};

describe("InferenceClient.admit", () => {
  it("holds a place per admitted request until it is released: a burst counts itself", async () => {
    await client.ready();
    const deadline = Date.now() + 30_000;
    const held = [1, 2, 3].map(() => client.admit("m", "1", 3, deadline));
    // three admitted and not yet queued (their bodies unread): the fourth finds the queue full
    expect(refusal(() => client.admit("m", "1", 3, deadline))).toBe("QUEUE_FULL");
    // another version's queue is another queue
    expect(refusal(() => client.admit("m", "2", 3, deadline))).toBeUndefined();
    held[0]?.();
    held[0]?.(); // releasing twice gives one place back, not two
    const next = client.admit("m", "1", 3, deadline);
    expect(refusal(() => client.admit("m", "1", 3, deadline))).toBe("QUEUE_FULL");
    for (const release of [...held, next]) release?.();
  });
});
