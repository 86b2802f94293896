import {
  type Attributes,
  type Context,
  type Link,
  type SpanKind,
  TraceFlags,
  trace,
} from "@opentelemetry/api";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  type Sampler,
  SamplingDecision,
  type SamplingResult,
  TraceIdRatioBasedSampler,
} from "@opentelemetry/sdk-trace-base";

/**
 * Under a parent-based sampler, a root span with links is sampled as a span whose parent they
 * are: when any linked span is sampled it is recorded, else the configured sampler decides as
 * if its first link were its parent. A batch run is such a span (a trace of its own, linked
 * to each request it carried): sampled by the root sampler alone, it was recorded for batches
 * of unsampled callers, and missing for some sampled ones under a ratio, their rows linking
 * to a span never exported. A sampler that ignores parents (always_off, traceidratio...)
 * ignores links too: `always_off` records nothing.
 */
export class LinksDecideRoots implements Sampler {
  constructor(
    private readonly configured: Sampler,
    private readonly parentBased: boolean,
  ) {}

  shouldSample(
    context: Context,
    traceId: string,
    name: string,
    kind: SpanKind,
    attributes: Attributes,
    links: Link[],
  ): SamplingResult {
    const first = links[0];
    if (!this.parentBased || first === undefined || trace.getSpanContext(context) !== undefined)
      return this.configured.shouldSample(context, traceId, name, kind, attributes, links);
    if (links.some((link) => (link.context.traceFlags & TraceFlags.SAMPLED) !== 0))
      return { decision: SamplingDecision.RECORD_AND_SAMPLED };
    return this.configured.shouldSample(
      trace.setSpanContext(context, first.context),
      traceId,
      name,
      kind,
      attributes,
      links,
    );
  }

  toString(): string {
    return `LinksDecideRoots{${this.configured.toString()}}`;
  }
}

/**
 * The sampler OTEL_TRACES_SAMPLER[_ARG] name, as the SDK reads them (parentbased_always_on
 * unset), with what it cannot read said through `warn` rather than lost.
 */
export function samplerFromEnv(env: NodeJS.ProcessEnv, warn: (message: string) => void): Sampler {
  const name = samplerName(env);
  const ratio = () => {
    const text = env.OTEL_TRACES_SAMPLER_ARG?.trim() ?? "";
    const value = Number(text);
    if (text !== "" && value >= 0 && value <= 1) return value;
    warn(`OTEL_TRACES_SAMPLER_ARG="${text}" is not a ratio from 0 to 1: sampling every trace`);
    return 1;
  };
  switch (name) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "traceidratio":
      return new TraceIdRatioBasedSampler(ratio());
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio()) });
    default:
      warn(
        `OTEL_TRACES_SAMPLER="${env.OTEL_TRACES_SAMPLER}" is not one of always_on, always_off, parentbased_always_on, parentbased_always_off, traceidratio, parentbased_traceidratio: using parentbased_always_on`,
      );
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** The sampler OTEL_TRACES_SAMPLER names, as `samplerFromEnv` reads it. */
function samplerName(env: NodeJS.ProcessEnv): string {
  return env.OTEL_TRACES_SAMPLER?.trim().toLowerCase() || "parentbased_always_on";
}

/**
 * The sampler the variables name, batch spans sampled by their links where it follows parents;
 * an unknown name is parentbased_always_on, as `samplerFromEnv` falls back.
 */
export function tracesSampler(env: NodeJS.ProcessEnv, warn: (message: string) => void): Sampler {
  const name = samplerName(env);
  const parentBased = name.startsWith("parentbased_") || !KNOWN.has(name);
  return new LinksDecideRoots(samplerFromEnv(env, warn), parentBased);
}

const KNOWN = new Set([
  "always_on",
  "always_off",
  "parentbased_always_on",
  "parentbased_always_off",
  "traceidratio",
  "parentbased_traceidratio",
]);
