import { ROOT_CONTEXT, SpanKind, TraceFlags, trace } from "@opentelemetry/api";
import { SamplingDecision } from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { tracesSampler } from "./sampler.js";

const TRACE = "0af7651916cd43dd8448eb211c80319c";
const link = (flags: number, spanId = "b7ad6b7169203331") => ({
  context: {
    traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
    spanId,
    traceFlags: flags,
    isRemote: true,
  },
});
const SAMPLED = TraceFlags.SAMPLED;
const NONE = TraceFlags.NONE;

function decide(env: NodeJS.ProcessEnv, links: ReturnType<typeof link>[], parent = false) {
  const warned: string[] = [];
  const sampler = tracesSampler(env, (m) => warned.push(m));
  const context = parent
    ? trace.setSpanContext(ROOT_CONTEXT, { ...link(SAMPLED).context, isRemote: false })
    : ROOT_CONTEXT;
  const { decision } = sampler.shouldSample(
    context,
    TRACE,
    "batch m",
    SpanKind.INTERNAL,
    {},
    links,
  );
  return { sampled: decision === SamplingDecision.RECORD_AND_SAMPLED, warned };
}

describe("LinksDecideRoots: a root span with links sampled as their child", () => {
  it("recorded when any linked span is sampled, whatever the root sampler says", () => {
    expect(decide({}, [link(NONE), link(SAMPLED)]).sampled).toBe(true);
    expect(decide({ OTEL_TRACES_SAMPLER: "parentbased_always_off" }, [link(SAMPLED)]).sampled).toBe(
      true,
    );
    expect(
      decide({ OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0" }, [
        link(SAMPLED),
      ]).sampled,
    ).toBe(true);
  });

  it("not recorded when none is, under a parent-based sampler (the default)", () => {
    expect(decide({}, [link(NONE), link(NONE, "00f067aa0ba902b7")]).sampled).toBe(false);
    expect(
      decide({ OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "1" }, [
        link(NONE),
      ]).sampled,
    ).toBe(false);
  });

  it("a sampler that ignores parents ignores links too: always_off records nothing", () => {
    expect(decide({ OTEL_TRACES_SAMPLER: "always_on" }, [link(NONE)]).sampled).toBe(true);
    expect(decide({ OTEL_TRACES_SAMPLER: "always_off" }, [link(SAMPLED)]).sampled).toBe(false);
    expect(decide({ OTEL_TRACES_SAMPLER: "always_off" }, [link(NONE)]).sampled).toBe(false);
    expect(
      decide({ OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "0" }, [link(SAMPLED)])
        .sampled,
    ).toBe(false);
  });

  it("spans without links, or with a parent, are the configured sampler's alone", () => {
    expect(decide({}, []).sampled).toBe(true);
    expect(decide({ OTEL_TRACES_SAMPLER: "parentbased_always_off" }, []).sampled).toBe(false);
    // a parent decides, not the links
    expect(decide({}, [link(NONE)], true).sampled).toBe(true);
  });
});

describe("samplerFromEnv", () => {
  it("reads the six standard names in any case, and says what it cannot read", () => {
    expect(decide({ OTEL_TRACES_SAMPLER: "ALWAYS_OFF" }, []).sampled).toBe(false);
    const unknown = decide({ OTEL_TRACES_SAMPLER: "foo" }, []);
    expect(unknown.sampled).toBe(true);
    expect(unknown.warned.join()).toMatch(/OTEL_TRACES_SAMPLER="foo"/);
    const ratio = decide(
      { OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "abc" },
      [],
    );
    expect(ratio.sampled).toBe(true);
    expect(ratio.warned.join()).toMatch(/OTEL_TRACES_SAMPLER_ARG="abc"/);
    expect(
      decide({ OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "0" }, []).sampled,
    ).toBe(false);
  });
});
