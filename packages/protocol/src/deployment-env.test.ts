import { describe, expect, it } from "vitest";
import { z } from "zod";
import { deploymentEnvSchema, parseEnv } from "./deployment-env.js";

describe("parseEnv", () => {
  const schema = deploymentEnvSchema.extend({ PORT: z.coerce.number().int().default(8000) });

  it("fills the deployment's shared defaults and coerces numbers", () => {
    expect(parseEnv(schema, { PORT: "9000" })).toEqual({
      REDIS_URL: "redis://127.0.0.1:6379",
      REDIS_CLUSTER_NODES: [],
      FERRY_PREFIX: "ferry",
      MODEL_REPOSITORY: "./models",
      LOG_LEVEL: "info",
      JOB_TTL_S: 86_400,
      DRAIN_TIMEOUT_MS: 100_000,
      PORT: 9000,
    });
  });

  it("names the variable that is wrong", () => {
    expect(() => parseEnv(schema, { JOB_TTL_S: "-5" })).toThrow(/invalid environment: JOB_TTL_S/);
  });

  it("takes pino's log levels in any case and refuses any other, before a logger is built", () => {
    expect(parseEnv(schema, { LOG_LEVEL: "DEBUG" }).LOG_LEVEL).toBe("debug");
    expect(parseEnv(schema, { LOG_LEVEL: "silent" }).LOG_LEVEL).toBe("silent");
    expect(() => parseEnv(schema, { LOG_LEVEL: "verbose" })).toThrow(
      /invalid environment: LOG_LEVEL/,
    );
  });
});
