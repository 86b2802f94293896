import { FerryError } from "@ferry/protocol";
import { describe, expect, it } from "vitest";
import { JobAdmission } from "./job-admission.js";
import type { OwnerShare } from "./owner-share.js";
import { QueueDepth } from "./queue-depth.js";

describe("JobAdmission with keys held to shares", () => {
  it("a request its key's share refuses never fills the queue's depth: another key's still fits meanwhile", async () => {
    const counter = { waiting: async () => 0, counts: async () => ({ waiting: 0 }) };
    const depth = new QueueDepth(counter, { waitBudgetMs: 5_000 });
    let answer: () => void = () => {};
    const answered = new Promise<void>((resolve) => {
      answer = resolve;
    });
    // k1 is at its share: refused once Redis answers; k2's jobs are taken in
    const share = {
      takeAll: async (_queue: string, owner: string, ids: readonly string[]) => {
        if (owner !== "k1") return ids.map((_, k) => k);
        await answered;
        throw FerryError.refusal("QUEUE_FULL", "k1 is at its share", { retryAfterS: 1 });
      },
      release: async () => undefined,
    } as unknown as OwnerShare;
    const admission = new JobAdmission(depth, { share, of: 0.5 });
    const job = (owner: string) => ({ priority: 5, maxQueueSize: 4, owner, shared: true });
    const k1 = admission.admitAll("m.v1", ["a", "b", "c", "d"], job("k1"));
    k1.catch(() => undefined);
    await new Promise((r) => setImmediate(r));
    // k1's four choices wait on its share's answer: they had filled the depth (4 of 4) meanwhile
    await expect(admission.admitAll("m.v1", ["e"], job("k2"))).resolves.toHaveLength(1);
    answer();
    await expect(k1).rejects.toMatchObject({ code: "QUEUE_FULL", message: "k1 is at its share" });
    // three more fit: k2's one is the depth's only job
    await expect(admission.admitAll("m.v1", ["f", "g", "h"], job("k2"))).resolves.toHaveLength(3);
  });
});
