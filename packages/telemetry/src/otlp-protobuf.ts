import type { Attributes, HrTime, SpanContext } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";

/**
 * OTLP's ExportTraceServiceRequest in protobuf, written in one pass into one reused buffer:
 * the same bytes as OpenTelemetry JS's own `ProtobufTraceSerializer` (its fields in its order,
 * checked byte for byte in otlp-protobuf.test.ts), at a fraction of its cost. Measured
 * (`npm run bench -- tracing`): the exporter's serializing, not the spans or their sending,
 * was most of what tracing cost a request; that one sizes every message in a first pass,
 * allocates an array per trace or span id and writes every string a character at a time.
 */
export function serializeSpans(spans: readonly ReadableSpan[]): Uint8Array {
  const w = writer;
  w.pos = 0;
  for (const [resource, scopes] of grouped(spans)) {
    w.tag(1, 2);
    const resourceSpans = w.begin();
    w.raw(resourceBytes(resource));
    for (const scoped of scopes.values()) {
      w.tag(2, 2);
      const scopeSpans = w.begin();
      const scope = (scoped[0] as ReadableSpan).instrumentationScope;
      w.raw(scopeBytes(scope));
      for (const span of scoped) {
        w.tag(2, 2);
        writeSpan(w, span);
      }
      if (scope.schemaUrl) {
        w.tag(3, 2);
        w.string(scope.schemaUrl);
      }
      w.end(scopeSpans);
    }
    if (resource.schemaUrl) {
      w.tag(3, 2);
      w.string(resource.schemaUrl);
    }
    w.end(resourceSpans);
  }
  return Buffer.from(w.buffer.subarray(0, w.pos));
}

type Resource = ReadableSpan["resource"];
type Scope = ReadableSpan["instrumentationScope"];

/** Spans by resource, then by scope, each in the order first seen (as the library groups). */
function grouped(spans: readonly ReadableSpan[]): Map<Resource, Map<Scope, ReadableSpan[]>> {
  const byResource = new Map<Resource, Map<Scope, ReadableSpan[]>>();
  for (const span of spans) {
    let scopes = byResource.get(span.resource);
    if (!scopes) {
      scopes = new Map();
      byResource.set(span.resource, scopes);
    }
    let list = scopes.get(span.instrumentationScope);
    if (!list) {
      list = [];
      scopes.set(span.instrumentationScope, list);
    }
    list.push(span);
  }
  return byResource;
}

/**
 * A process's resource and scopes are the same objects on every span: each is written once,
 * with its field tag, and kept (a resource still settling its attributes is not).
 */
const resources = new WeakMap<Resource, Uint8Array>();
const scopes = new WeakMap<Scope, Uint8Array>();

function resourceBytes(resource: Resource): Uint8Array {
  const kept = resources.get(resource);
  if (kept) return kept;
  const w = new Writer(1024);
  w.tag(1, 2);
  const at = w.begin();
  writeAttributes(w, resource.attributes, 1);
  w.tag(2, 0);
  w.varint(0);
  w.end(at);
  const bytes = Buffer.from(w.buffer.subarray(0, w.pos));
  if (!resource.asyncAttributesPending) resources.set(resource, bytes);
  return bytes;
}

function scopeBytes(scope: Scope): Uint8Array {
  const kept = scopes.get(scope);
  if (kept) return kept;
  const w = new Writer(256);
  w.tag(1, 2);
  const at = w.begin();
  w.tag(1, 2);
  w.string(scope.name);
  if (scope.version) {
    w.tag(2, 2);
    w.string(scope.version);
  }
  const more = scope as Scope & { attributes?: Attributes; droppedAttributesCount?: number };
  if (more.attributes) writeAttributes(w, more.attributes, 3);
  if (more.droppedAttributesCount) {
    w.tag(4, 0);
    w.varint(more.droppedAttributesCount);
  }
  w.end(at);
  const bytes = Buffer.from(w.buffer.subarray(0, w.pos));
  scopes.set(scope, bytes);
  return bytes;
}

const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

function spanFlags(traceFlags: number, isRemote: boolean | undefined): number {
  return (traceFlags & 0xff) | HAS_IS_REMOTE | (isRemote ? IS_REMOTE : 0);
}

function writeSpan(w: Writer, span: ReadableSpan): void {
  const at = w.begin();
  const ctx = span.spanContext();
  w.tag(1, 2);
  w.hex(ctx.traceId);
  w.tag(2, 2);
  w.hex(ctx.spanId);
  const traceState = ctx.traceState?.serialize();
  if (traceState) {
    w.tag(3, 2);
    w.string(traceState);
  }
  const parent = span.parentSpanContext;
  if (parent?.spanId) {
    w.tag(4, 2);
    w.hex(parent.spanId);
  }
  w.tag(5, 2);
  w.string(span.name);
  // OTLP's kinds count from 1: 0 is "unspecified", which the API has no name for
  const kind = span.kind == null ? 0 : span.kind + 1;
  if (kind !== 0) {
    w.tag(6, 0);
    w.varint(kind);
  }
  w.tag(7, 1);
  w.time(span.startTime);
  w.tag(8, 1);
  w.time(span.endTime);
  if (span.attributes) writeAttributes(w, span.attributes, 9);
  w.tag(10, 0);
  w.varint(span.droppedAttributesCount);
  for (const event of span.events) {
    w.tag(11, 2);
    const e = w.begin();
    w.tag(1, 1);
    w.time(event.time);
    w.tag(2, 2);
    w.string(event.name);
    if (event.attributes) writeAttributes(w, event.attributes, 3);
    w.tag(4, 0);
    w.varint(event.droppedAttributesCount || 0);
    w.end(e);
  }
  w.tag(12, 0);
  w.varint(span.droppedEventsCount);
  for (const link of span.links) {
    w.tag(13, 2);
    writeLink(w, link.context, link.attributes, link.droppedAttributesCount);
  }
  w.tag(14, 0);
  w.varint(span.droppedLinksCount);
  w.tag(15, 2);
  const status = w.begin();
  if (span.status.message) {
    w.tag(2, 2);
    w.string(span.status.message);
  }
  w.tag(3, 0);
  w.varint(span.status.code);
  w.end(status);
  w.tag(16, 5);
  w.fixed32(spanFlags(ctx.traceFlags, parent?.isRemote));
  w.end(at);
}

function writeLink(
  w: Writer,
  context: SpanContext,
  attributes: Attributes | undefined,
  dropped: number | undefined,
): void {
  const at = w.begin();
  w.tag(1, 2);
  w.hex(context.traceId);
  w.tag(2, 2);
  w.hex(context.spanId);
  const traceState = context.traceState?.serialize();
  if (traceState) {
    w.tag(3, 2);
    w.string(traceState);
  }
  if (attributes) writeAttributes(w, attributes, 4);
  w.tag(5, 0);
  w.varint(dropped || 0);
  w.tag(6, 5);
  w.fixed32(spanFlags(context.traceFlags, context.isRemote));
  w.end(at);
}

function writeAttributes(w: Writer, attributes: Attributes, field: number): void {
  for (const key in attributes) {
    if (!Object.hasOwn(attributes, key)) continue;
    w.tag(field, 2);
    writeKeyValue(w, key, attributes[key]);
  }
}

function writeKeyValue(w: Writer, key: string, value: unknown): void {
  const at = w.begin();
  w.tag(1, 2);
  w.string(key);
  w.tag(2, 2);
  const any = w.begin();
  writeAnyValue(w, value);
  w.end(any);
  w.end(at);
}

const MIN_INT64 = -(2 ** 63);
const MAX_INT64 = 2 ** 63;

/** An attribute's value as AnyValue, deciding int, double and the rest as the library does. */
function writeAnyValue(w: Writer, value: unknown): void {
  switch (typeof value) {
    case "string":
      w.tag(1, 2);
      w.string(value);
      return;
    case "boolean":
      w.tag(2, 0);
      w.varint(value ? 1 : 0);
      return;
    case "number":
      if (Number.isInteger(value) && value >= MIN_INT64 && value < MAX_INT64) {
        w.tag(3, 0);
        w.varint(value);
      } else {
        w.tag(4, 1);
        w.double(value);
      }
      return;
  }
  if (value instanceof Uint8Array) {
    w.tag(7, 2);
    w.varint(value.byteLength);
    w.raw(value);
  } else if (Array.isArray(value)) {
    w.tag(5, 2);
    const list = w.begin();
    for (const item of value) {
      w.tag(1, 2);
      const at = w.begin();
      writeAnyValue(w, item);
      w.end(at);
    }
    w.end(list);
  } else if (typeof value === "object" && value !== null) {
    w.tag(6, 2);
    const list = w.begin();
    const record = value as Record<string, unknown>;
    for (const key in record) {
      if (!Object.hasOwn(record, key)) continue;
      w.tag(1, 2);
      writeKeyValue(w, key, record[key]);
    }
    w.end(list);
  }
}

/** Hex digits' values by character code (-1: not a hex digit). */
const HEX = new Int8Array(128).fill(-1);
for (let k = 0; k < 10; k++) HEX[48 + k] = k;
for (let k = 0; k < 6; k++) {
  HEX[65 + k] = 10 + k;
  HEX[97 + k] = 10 + k;
}

/**
 * A growing buffer that protobuf is written into. A length-delimited message gets one byte
 * for its length when it begins, and the rest of it moves along when the length needs more.
 */
class Writer {
  buffer: Buffer;
  pos = 0;

  constructor(size: number) {
    this.buffer = Buffer.allocUnsafe(size);
  }

  private room(bytes: number): void {
    if (this.pos + bytes <= this.buffer.byteLength) return;
    let size = this.buffer.byteLength * 2;
    while (size < this.pos + bytes) size *= 2;
    const grown = Buffer.allocUnsafe(size);
    this.buffer.copy(grown, 0, 0, this.pos);
    this.buffer = grown;
  }

  tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }

  /** A length-delimited message begins: where its length goes. */
  begin(): number {
    this.room(1);
    return this.pos++;
  }

  /** The message begun at `at` ends here: its length is written before it. */
  end(at: number): void {
    const length = this.pos - at - 1;
    const size = varintSize(length);
    if (size > 1) {
      this.room(size - 1);
      this.buffer.copyWithin(at + size, at + 1, this.pos);
      this.pos += size - 1;
    }
    let v = length;
    let k = at;
    while (v > 0x7f) {
      this.buffer[k++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    this.buffer[k] = v;
  }

  varint(value: number): void {
    this.room(10);
    const b = this.buffer;
    if (value >= 0 && value <= 0xffffffff) {
      let v = value >>> 0;
      while (v > 0x7f) {
        b[this.pos++] = (v & 0x7f) | 0x80;
        v >>>= 7;
      }
      b[this.pos++] = v;
      return;
    }
    // int64 in two's complement, ten bytes for a negative one
    let low: number;
    let high: number;
    if (value >= 0) {
      low = value >>> 0;
      high = (value / 0x100000000) >>> 0;
    } else {
      const abs = Math.abs(value);
      low = ~(abs >>> 0) >>> 0;
      high = ~((abs / 0x100000000) >>> 0) >>> 0;
      low = (low + 1) >>> 0;
      if (low === 0) high = (high + 1) >>> 0;
    }
    while (high > 0 || low > 0x7f) {
      b[this.pos++] = (low & 0x7f) | 0x80;
      low = ((low >>> 7) | (high << 25)) >>> 0;
      high >>>= 7;
    }
    b[this.pos++] = low & 0x7f;
  }

  fixed32(value: number): void {
    this.room(4);
    this.buffer.writeUInt32LE(value >>> 0, this.pos);
    this.pos += 4;
  }

  double(value: number): void {
    this.room(8);
    this.buffer.writeDoubleLE(value, this.pos);
    this.pos += 8;
  }

  /** An HrTime as fixed64 nanoseconds, exactly (seconds * 1e9 passes 2^53). */
  time(t: HrTime): void {
    const seconds = t[0];
    const nanos = t[1];
    const fromLow16 = (seconds & 0xffff) * 1e9;
    const fromHigh = ((seconds / 0x10000) >>> 0) * 1e9;
    const low = (fromLow16 >>> 0) + (((fromHigh & 0xffff) * 0x10000) >>> 0) + nanos;
    const high =
      (Math.floor(fromLow16 / 0x100000000) +
        ((fromHigh / 0x10000) >>> 0) +
        Math.floor(low / 0x100000000)) >>>
      0;
    this.room(8);
    this.buffer.writeUInt32LE(low >>> 0, this.pos);
    this.buffer.writeUInt32LE(high, this.pos + 4);
    this.pos += 8;
  }

  /** A trace or span id (hex) as its bytes. */
  hex(id: string): void {
    const n = id.length >>> 1;
    this.room(n + 1);
    const b = this.buffer;
    b[this.pos++] = n;
    for (let k = 0; k < n; k++)
      b[this.pos++] =
        ((HEX[id.charCodeAt(2 * k)] ?? 0) << 4) | (HEX[id.charCodeAt(2 * k + 1)] ?? 0);
  }

  string(text: string): void {
    const length = text.length;
    if (length < 0x80) {
      // the common case, ASCII and short: written as it is checked
      const start = this.pos;
      this.room(length + 1);
      const b = this.buffer;
      b[this.pos++] = length;
      let k = 0;
      for (; k < length; k++) {
        const c = text.charCodeAt(k);
        if (c > 0x7f) break;
        b[this.pos++] = c;
      }
      if (k === length) return;
      this.pos = start;
    }
    const bytes = Buffer.byteLength(text);
    this.varint(bytes);
    this.room(bytes);
    this.pos += this.buffer.write(text, this.pos, "utf8");
  }

  raw(bytes: Uint8Array): void {
    this.room(bytes.byteLength);
    this.buffer.set(bytes, this.pos);
    this.pos += bytes.byteLength;
  }
}

function varintSize(value: number): number {
  if (value < 0x80) return 1;
  if (value < 0x4000) return 2;
  if (value < 0x200000) return 3;
  if (value < 0x10000000) return 4;
  return 5;
}

const writer = new Writer(256 * 1024);
