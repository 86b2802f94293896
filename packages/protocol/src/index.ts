export * from "./batch.js";
export * from "./errors.js";
export * from "./generation.js";
export * from "./jobs.js";
export * from "./model-config.js";
export * from "./queue-names.js";
export * from "./tensor-codec.js";
export * from "./wire.js";
