import { OTLPExporterBase } from "@opentelemetry/otlp-exporter-base";
import {
  convertLegacyHttpOptions,
  createOtlpHttpExportDelegate,
} from "@opentelemetry/otlp-exporter-base/node-http";
import {
  ProtobufTraceSerializer,
  TraceExporterMetricsHelper,
} from "@opentelemetry/otlp-transformer";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace-base";
import { serializeSpans } from "./otlp-protobuf.js";

/**
 * OpenTelemetry's OTLP/HTTP protobuf span exporter, assembled as its own `OTLPTraceExporter`
 * is (the same delegate: endpoint, headers, timeout, compression and retries from the
 * standard variables), with `serializeSpans` writing the bytes in place of the library's
 * serializer, which cost a traced request more than its spans did.
 */
export class OtlpProtobufSpanExporter
  extends OTLPExporterBase<ReadableSpan[]>
  implements SpanExporter
{
  constructor() {
    super(
      createOtlpHttpExportDelegate(
        convertLegacyHttpOptions({}, "TRACES", "v1/traces", {
          "Content-Type": "application/x-protobuf",
        }),
        {
          serializeRequest: serializeSpans,
          deserializeResponse: ProtobufTraceSerializer.deserializeResponse,
        },
        "otlp_http_span_exporter",
        TraceExporterMetricsHelper,
        undefined,
      ),
    );
  }
}

/**
 * Whether the standard variables choose OTLP over HTTP with protobuf for traces (the SDK's
 * default): then `OtlpProtobufSpanExporter` exports them; any other choice is the SDK's own.
 */
export function exportsOtlpProtobuf(env: NodeJS.ProcessEnv): boolean {
  const exporters = (env.OTEL_TRACES_EXPORTER ?? "otlp").split(",").map((e) => e.trim());
  const protocol = (
    env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ??
    env.OTEL_EXPORTER_OTLP_PROTOCOL ??
    "http/protobuf"
  ).trim();
  return exporters.length === 1 && exporters[0] === "otlp" && protocol === "http/protobuf";
}
