export {
  type Context,
  context,
  type Link,
  propagation,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
export * from "./carrier.js";
export * from "./genai.js";
export * from "./log-destination.js";
export * from "./tracing.js";

import { trace } from "@opentelemetry/api";

let ferry: ReturnType<typeof trace.getTracer> | undefined;
/**
 * Ferry's tracer: a no-op until `startTracing` has registered the SDK (the API's tracer is a
 * proxy that follows the provider registered later), looked up once rather than per span.
 */
export const tracer = () => {
  ferry ??= trace.getTracer("ferry");
  return ferry;
};
