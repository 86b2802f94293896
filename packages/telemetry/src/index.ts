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
export * from "./tracing.js";

import { trace } from "@opentelemetry/api";

/** Ferry's tracer: a no-op until `startTracing` has registered the SDK. */
export const tracer = () => trace.getTracer("ferry");
