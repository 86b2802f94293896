export * from "./in-process-session.js";
export * from "./model-runtime.js";
export * from "./tensor.js";
