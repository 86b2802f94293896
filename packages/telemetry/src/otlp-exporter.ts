import { diag } from "@opentelemetry/api";
import { ExportResultCode } from "@opentelemetry/core";
import { OTLPExporterBase } from "@opentelemetry/otlp-exporter-base";
import {
  convertLegacyHttpOptions,
  createOtlpHttpExportDelegate,
} from "@opentelemetry/otlp-exporter-base/node-http";
import {
  type IExportTraceServiceResponse,
  ProtobufTraceSerializer,
} from "@opentelemetry/otlp-transformer";

/** An ExportTraceServiceRequest already written, and the spans it holds. */
export interface WrittenRequest {
  bytes: Uint8Array;
  spans: number;
}

/**
 * OTLP/HTTP with protobuf for requests already written (`SpanBatch`): OpenTelemetry's own
 * delegate, as its `OTLPTraceExporter` builds it (endpoint, headers, timeout, compression
 * and retries from the standard variables), given the bytes rather than the spans.
 */
export class OtlpProtobufRequests extends OTLPExporterBase<WrittenRequest> {
  constructor() {
    super(
      createOtlpHttpExportDelegate<WrittenRequest, IExportTraceServiceResponse>(
        convertLegacyHttpOptions({}, "TRACES", "v1/traces", {
          "Content-Type": "application/x-protobuf",
        }),
        {
          serializeRequest: (request) => request.bytes,
          deserializeResponse: ProtobufTraceSerializer.deserializeResponse,
        },
        "otlp_http_span_exporter",
        { name: "span", countItems: (request) => request.spans },
        undefined,
      ),
    );
  }

  /** Sends one request; resolves once it is answered or given up on (a failure is logged). */
  send = (request: WrittenRequest): Promise<void> =>
    new Promise((resolve) =>
      this.export(request, (result) => {
        if (result.code !== ExportResultCode.SUCCESS)
          diag.error("OTLP export failed", result.error);
        resolve();
      }),
    );
}

/**
 * Whether the standard variables choose OTLP over HTTP with protobuf for traces (the SDK's
 * default): then Ferry writes and sends them (`EncodingSpanProcessor`); any other choice is
 * the SDK's own.
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
