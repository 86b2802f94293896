import { describe, expect, it } from "vitest";
import { exportsOtlpProtobuf } from "./otlp-exporter.js";

describe("which exporter the standard variables choose", () => {
  it("OTLP over HTTP with protobuf, the SDK's default, is Ferry's serializer's", () => {
    expect(exportsOtlpProtobuf({})).toBe(true);
    expect(exportsOtlpProtobuf({ OTEL_TRACES_EXPORTER: "otlp" })).toBe(true);
    expect(exportsOtlpProtobuf({ OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" })).toBe(true);
    expect(
      exportsOtlpProtobuf({
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf",
      }),
    ).toBe(true);
  });

  it("any other protocol or exporter is left to the SDK", () => {
    expect(exportsOtlpProtobuf({ OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" })).toBe(false);
    expect(exportsOtlpProtobuf({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toBe(false);
    expect(exportsOtlpProtobuf({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json" })).toBe(false);
    expect(exportsOtlpProtobuf({ OTEL_TRACES_EXPORTER: "console" })).toBe(false);
    expect(exportsOtlpProtobuf({ OTEL_TRACES_EXPORTER: "otlp,console" })).toBe(false);
    expect(exportsOtlpProtobuf({ OTEL_TRACES_EXPORTER: "zipkin" })).toBe(false);
  });
});
