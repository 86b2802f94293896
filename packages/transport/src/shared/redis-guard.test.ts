import { FerryError } from "@ferry/protocol";
import { describe, expect, it } from "vitest";
import { guarded } from "./redis-guard.js";

describe("guarded", () => {
  it("a failure of Redis is a 503 to retry", async () => {
    const failed = guarded(() => Promise.reject(new Error("READONLY You can't write")));
    await expect(failed).rejects.toBeInstanceOf(FerryError);
    await expect(failed).rejects.toMatchObject({ code: "UNAVAILABLE", retryAfterS: 1 });
  });

  it("a failure of this process's own code is passed on as it is, not called Redis's", async () => {
    let deep: unknown = 1;
    for (let k = 0; k < 200_000; k++) deep = [deep];
    const overflow = guarded(async () => JSON.stringify(deep));
    await expect(overflow).rejects.toBeInstanceOf(RangeError);
    await expect(
      guarded(async () => (undefined as unknown as () => void)()),
    ).rejects.toBeInstanceOf(TypeError);
  });
});
