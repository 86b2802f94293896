import { z } from "zod";

/** Two functions a model may be made to call, as the chat's `tools` list them. */
export const weather = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", maxLength: 16 },
        unit: { enum: ["celsius", "fahrenheit"] },
      },
      required: ["city", "unit"],
      additionalProperties: false,
    },
  },
};

export const time = {
  type: "function" as const,
  function: { name: "get_time", parameters: { type: "object", properties: {} } },
};

/** What get_weather's arguments must be. */
export const WeatherArgs = z
  .object({ city: z.string().max(16), unit: z.enum(["celsius", "fahrenheit"]) })
  .strict();

/** A chat tool in the Responses API's flat form. */
export function flat(tool: typeof weather | typeof time, strict = false) {
  return { type: "function" as const, strict, ...tool.function };
}
