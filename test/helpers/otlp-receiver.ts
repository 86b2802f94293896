import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One span as it arrived, in the OTLP data model (ids in hex, times in ms). */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, unknown>;
  links: Array<{ traceId: string; spanId: string }>;
  statusCode: number;
  /** The encoding it came in: what the exporter's OTEL_EXPORTER_OTLP_PROTOCOL chose. */
  encoding: "json" | "protobuf";
}

/**
 * An OTLP/HTTP trace receiver (POST /v1/traces), as a collector or Jaeger's OTLP port takes
 * spans: it decodes both encodings the exporters send, http/json and http/protobuf (the
 * default), and keeps every span.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Export requests and their bytes, decoded or not. */
  exports = 0;
  bytes = 0;
  private server?: Server;
  url = "";

  /** `decode` false: only counts what arrives (a bench's receiver, kept off the CPU it measures). */
  constructor(private readonly decode = true) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks);
        const type = req.headers["content-type"] ?? "";
        this.exports++;
        this.bytes += body.length;
        try {
          if (req.url !== "/v1/traces") throw new Error(`unexpected path ${req.url}`);
          if (this.decode)
            this.spans.push(
              ...(type.includes("json")
                ? fromJson(JSON.parse(body.toString()))
                : fromProtobuf(body)),
            );
          res.writeHead(200, {
            "content-type": type.includes("json") ? "application/json" : "application/x-protobuf",
          });
          res.end(type.includes("json") ? "{}" : undefined);
        } catch (err) {
          res.writeHead(400).end(String(err));
        }
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The spans of one trace so far. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  stop(): Promise<void> {
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

// ---- http/json (OTLP's JSON mapping: ids hex, times as decimal strings of ns) ----

interface JsonValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: JsonValue[] };
}

function jsonValue(v: JsonValue | undefined): unknown {
  if (!v) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(jsonValue);
  return undefined;
}

function jsonAttributes(list: Array<{ key: string; value: JsonValue }> = []) {
  return Object.fromEntries(list.map((a) => [a.key, jsonValue(a.value)]));
}

// biome-ignore lint/suspicious/noExplicitAny: the JSON mapping, read field by field
function fromJson(body: any): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of body.resourceSpans ?? []) {
    const service = String(jsonAttributes(rs.resource?.attributes)["service.name"] ?? "");
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? [])
        out.push({
          service,
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? "",
          name: s.name,
          kind: s.kind ?? 0,
          startMs: Number(BigInt(s.startTimeUnixNano) / 1000n) / 1000,
          endMs: Number(BigInt(s.endTimeUnixNano) / 1000n) / 1000,
          attributes: jsonAttributes(s.attributes),
          links: (s.links ?? []).map((l: { traceId: string; spanId: string }) => ({
            traceId: l.traceId,
            spanId: l.spanId,
          })),
          statusCode: s.status?.code ?? 0,
          encoding: "json",
        });
  }
  return out;
}

// ---- http/protobuf: the few messages of ExportTraceServiceRequest a test reads ----

type Field = { no: number; wire: number; value: bigint | Buffer };

/** The fields of one protobuf message, in order (varint, fixed64, bytes, fixed32). */
function fields(buf: Buffer): Field[] {
  const out: Field[] = [];
  let at = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const byte = buf[at++] ?? 0;
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (at < buf.length) {
    const key = Number(varint());
    const no = key >> 3;
    const wire = key & 7;
    if (wire === 0) out.push({ no, wire, value: varint() });
    else if (wire === 1) {
      out.push({ no, wire, value: buf.readBigUInt64LE(at) });
      at += 8;
    } else if (wire === 2) {
      const len = Number(varint());
      out.push({ no, wire, value: buf.subarray(at, at + len) });
      at += len;
    } else if (wire === 5) {
      out.push({ no, wire, value: BigInt(buf.readUInt32LE(at)) });
      at += 4;
    } else throw new Error(`protobuf wire type ${wire} not read here`);
  }
  return out;
}

const sub = (f: Field[], no: number) => f.filter((x) => x.no === no).map((x) => x.value as Buffer);
const one = (f: Field[], no: number) => f.find((x) => x.no === no)?.value;
const text = (v: unknown) => (Buffer.isBuffer(v) ? v.toString("utf8") : "");
const hex = (v: unknown) => (Buffer.isBuffer(v) ? v.toString("hex") : "");

function anyValue(buf: Buffer): unknown {
  const f = fields(buf);
  const first = f[0];
  if (!first) return undefined;
  if (first.no === 1) return text(first.value);
  if (first.no === 2) return first.value === 1n;
  if (first.no === 3) return Number(BigInt.asIntN(64, first.value as bigint));
  if (first.no === 4) {
    const raw = Buffer.alloc(8);
    raw.writeBigUInt64LE(first.value as bigint);
    return raw.readDoubleLE(0);
  }
  if (first.no === 5) return sub(fields(first.value as Buffer), 1).map(anyValue);
  return undefined;
}

function pbAttributes(list: Buffer[]): Record<string, unknown> {
  return Object.fromEntries(
    list.map((kv) => {
      const f = fields(kv);
      const value = one(f, 2);
      return [text(one(f, 1)), Buffer.isBuffer(value) ? anyValue(value) : undefined];
    }),
  );
}

function fromProtobuf(body: Buffer): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of sub(fields(body), 1)) {
    const rsf = fields(rs);
    const resource = one(rsf, 1);
    const service = Buffer.isBuffer(resource)
      ? String(pbAttributes(sub(fields(resource), 1))["service.name"] ?? "")
      : "";
    for (const ss of sub(rsf, 2))
      for (const span of sub(fields(ss), 2)) {
        const f = fields(span);
        const status = one(f, 15);
        out.push({
          service,
          traceId: hex(one(f, 1)),
          spanId: hex(one(f, 2)),
          parentSpanId: hex(one(f, 4)),
          name: text(one(f, 5)),
          kind: Number(one(f, 6) ?? 0n),
          startMs: Number((one(f, 7) as bigint) / 1000n) / 1000,
          endMs: Number((one(f, 8) as bigint) / 1000n) / 1000,
          attributes: pbAttributes(sub(f, 9)),
          links: sub(f, 13).map((l) => {
            const lf = fields(l);
            return { traceId: hex(one(lf, 1)), spanId: hex(one(lf, 2)) };
          }),
          statusCode: Buffer.isBuffer(status) ? Number(one(fields(status), 3) ?? 0n) : 0,
          encoding: "protobuf",
        });
      }
  }
  return out;
}
