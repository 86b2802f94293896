export * from "./bitmask.js";
export * from "./grammar-engine.js";
export * from "./grammar-guide.js";
