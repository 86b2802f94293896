/**
 * An ONNX graph whose signature is a classifier's (`input` float32 [batch, width] in,
 * `logits` float32 [batch, classes] out), so that its model.json passes the worker's check at
 * load, but whose every run fails: it reshapes the input to [batch, classes] (Reshape's 0 keeps
 * the input's axis), which no batch of `width` columns fills unless `width` is `classes`. A model that fails on its
 * worker, not one refused at load. Encoded here, a few hundred bytes of protobuf, so that no
 * binary fixture or Python is needed.
 */
export function failingClassifierGraph(width: number, classes: number): Buffer {
  const tensorType = (dims: Array<number | string>) =>
    message(1, [
      varintField(1, FLOAT),
      message(
        2,
        dims.map((d) =>
          message(1, [typeof d === "number" ? varintField(1, d) : stringField(2, d)]),
        ),
      ),
    ]);
  const valueInfo = (field: number, name: string, dims: Array<number | string>) =>
    message(field, [stringField(1, name), message(2, [tensorType(dims)])]);
  const shape = message(5, [
    varintField(1, 2), // dims: [2]
    varintField(2, INT64),
    message(7, [varint(0), varint(classes)]), // int64_data, packed: [0, classes]
    stringField(8, "shape"),
  ]);
  const reshape = message(1, [
    stringField(1, "input"),
    stringField(1, "shape"),
    stringField(2, "logits"),
    stringField(4, "Reshape"),
  ]);
  const graph = message(7, [
    reshape,
    stringField(2, "failing"),
    shape,
    valueInfo(11, "input", ["batch", width]),
    valueInfo(12, "logits", ["batch", classes]),
  ]);
  return Buffer.concat([
    varintField(1, 8), // ir_version
    graph,
    message(8, [stringField(1, ""), varintField(2, 13)]), // opset_import: ai.onnx 13
  ]);
}

const FLOAT = 1;
const INT64 = 7;

function varint(value: number): Buffer {
  const bytes: number[] = [];
  let v = value;
  while (v >= 0x80) {
    bytes.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  bytes.push(v);
  return Buffer.from(bytes);
}

const key = (field: number, wire: 0 | 2) => varint((field << 3) | wire);
const varintField = (field: number, value: number) => Buffer.concat([key(field, 0), varint(value)]);
const bytesField = (field: number, bytes: Buffer) =>
  Buffer.concat([key(field, 2), varint(bytes.length), bytes]);
const stringField = (field: number, text: string) => bytesField(field, Buffer.from(text, "utf8"));
const message = (field: number, parts: Buffer[]) => bytesField(field, Buffer.concat(parts));
