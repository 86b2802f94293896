import { describe, expect, it } from "vitest";
import { ChunksInFlight } from "./batch-job-service.js";

/** A promise and its resolvers. */
function deferred() {
  let resolve: () => void = () => {};
  let reject: (err: unknown) => void = () => {};
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe("ChunksInFlight", () => {
  it("holds at most `size` chunks: the next waits until one is queued", async () => {
    const inFlight = new ChunksInFlight(2);
    const a = deferred();
    const b = deferred();
    await inFlight.add(a.promise);
    let admitted = false;
    const second = inFlight.add(b.promise).then(() => {
      admitted = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(admitted).toBe(false);
    a.resolve();
    await second;
    expect(admitted).toBe(true);
    b.resolve();
    await inFlight.drained();
  });

  it("throws the first failure, and waits for every chunk before saying so", async () => {
    const inFlight = new ChunksInFlight(4);
    const a = deferred();
    const b = deferred();
    await inFlight.add(a.promise);
    await inFlight.add(b.promise);
    a.reject(new Error("queue refused"));
    let settled = false;
    const drained = inFlight.drained().finally(() => {
      settled = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    b.resolve();
    await expect(drained).rejects.toThrow("queue refused");
  });
});
