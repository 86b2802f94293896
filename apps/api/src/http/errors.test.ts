import { FerryError } from "@ferry/protocol";
import { describe, expect, it } from "vitest";
import { httpStatus, toFerryError } from "./errors.js";

describe("toFerryError", () => {
  it("a Redis client's own failure raised outside `guarded` is a 503 to retry, not a 500", () => {
    for (const message of [
      "Command timed out",
      "Connection is closed.",
      "Stream isn't writeable and enableOfflineQueue options is false",
      'Reached the max retries per request limit (which is 1). Refer to "maxRetriesPerRequest" option for details.',
    ]) {
      const error = toFerryError(new Error(message));
      expect(error.code).toBe("UNAVAILABLE");
      expect(error.retryAfterS).toBe(1);
      expect(httpStatus(error.code)).toBe(503);
    }
  });

  it("anything else unknown is an internal error; a FerryError is itself", () => {
    expect(toFerryError(new Error("Command timed out: no")).code).toBe("INTERNAL");
    expect(toFerryError(new TypeError("x is undefined")).code).toBe("INTERNAL");
    const own = new FerryError("QUEUE_FULL", "full");
    expect(toFerryError(own)).toBe(own);
  });
});
