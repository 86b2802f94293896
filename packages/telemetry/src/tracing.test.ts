import { diag } from "@opentelemetry/api";
import { afterAll, describe, expect, it } from "vitest";
import { tracer } from "./index.js";
import { startTracing, type Tracing } from "./tracing.js";

// an endpoint nothing listens on, and a sampler name the SDK does not know
const env: NodeJS.ProcessEnv = {
  OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9",
  OTEL_TRACES_SAMPLER: "sometimes",
  OTEL_BSP_SCHEDULE_DELAY: "50",
  OTEL_EXPORTER_OTLP_TIMEOUT: "500",
};
const warned: string[] = [];
let tracing: Tracing | undefined;
afterAll(async () => {
  await tracing?.shutdown();
});

describe("OpenTelemetry's own warnings", () => {
  it("reach the process's log, each at most once a minute, rather than nowhere", async () => {
    Object.assign(process.env, env);
    tracing = startTracing("ferry-test", { warn: (m) => warned.push(m) }, process.env);
    expect(tracing.enabled).toBe(true);
    expect(warned.join("\n")).toMatch(/OTEL_TRACES_SAMPLER="sometimes"/);
    // an export refused: said
    tracer().startSpan("s").end();
    const until = Date.now() + 10_000;
    while (warned.length === 1 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    expect(warned[1]).toBe("OpenTelemetry: connect ECONNREFUSED 127.0.0.1:9");
    // the same again within the minute: counted, not said
    for (let i = 0; i < 3; i++) diag.error("BatchSpanProcessor: span export failed");
    for (let i = 0; i < 3; i++) diag.warn("another warning");
    expect(warned.slice(2)).toEqual([
      "OpenTelemetry: BatchSpanProcessor: span export failed",
      "OpenTelemetry: another warning",
    ]);
    // messages that differ each time are still at most ten lines a minute
    for (let i = 0; i < 40; i++) diag.error(`export failed: ${i} ${"x".repeat(100)}`);
    expect(warned.filter((m) => m.startsWith("OpenTelemetry:"))).toHaveLength(10);
  });
});
