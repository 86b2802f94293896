import { randomBytes } from "node:crypto";
import { deletePrefix, InferenceClient } from "@ferry/transport";
import { afterAll } from "vitest";
import { REDIS_URL } from "./stack.js";

/**
 * An InferenceClient on the test run's Redis (never mocked) under a key prefix of the calling
 * file's own, closed and its keys deleted after the file. Call it at a file's top level.
 */
export function testInferenceClient(): InferenceClient {
  const prefix = `ferry-test-${randomBytes(4).toString("hex")}`;
  const client = new InferenceClient({ redisUrl: REDIS_URL, prefix });
  afterAll(async () => {
    await client.close();
    await deletePrefix(REDIS_URL, prefix);
  });
  return client;
}
