export * from "./errors.js";
export * from "./model-config.js";
export * from "./wire.js";
export * from "./queue-names.js";
export * from "./jobs.js";
