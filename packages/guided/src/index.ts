export * from "./guided-budget.js";
export * from "./guided-spec.js";
export * from "./property-count-budget.js";
export * from "./regex-budget.js";
export * from "./schema-budget.js";
