export * from "./connection.js";
export * from "./inference-client.js";
export * from "./job-records.js";
export * from "./keys.js";
export * from "./prediction-cache.js";
export * from "./serving-state.js";
export * from "./worker-registry.js";
export * from "./worker-transport.js";
