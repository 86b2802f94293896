/** A route as Hono lists it (`app.routes`). */
interface ListedRoute {
  method: string;
  path: string;
}

/**
 * The methods some route answers `path` with, for a request no route took: a 405 naming them
 * (`Allow`, RFC 9110) tells a caller who sent GET to a POST route what to send, where a 404
 * said the route does not exist. Middleware (`ALL`) is not a route.
 */
export function allowedMethods(routes: readonly ListedRoute[]): (path: string) => string[] {
  let patterns: Array<{ method: string; pattern: RegExp }> | undefined;
  return (path) => {
    patterns ??= routes
      .filter((r) => r.method !== "ALL")
      .map((r) => ({ method: r.method, pattern: patternOf(r.path) }));
    const methods = new Set<string>();
    for (const { method, pattern } of patterns) if (pattern.test(path)) methods.add(method);
    // Hono answers HEAD with a GET route
    if (methods.has("GET")) methods.add("HEAD");
    return [...methods];
  };
}

/** Hono's path syntax (`:name`, `:name{regex}`, `:name?`, `*`) as a regular expression. */
function patternOf(path: string): RegExp {
  let source = "";
  for (const segment of path.split("/").slice(1)) {
    const param = /^:\w+(?:\{(.+)\})?(\?)?$/.exec(segment);
    if (param)
      source += param[2] ? `(?:/(?:${param[1] ?? "[^/]+"}))?` : `/(?:${param[1] ?? "[^/]+"})`;
    else if (segment === "*") source += "(?:/.*)?";
    else source += `/${segment.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replaceAll("*", ".*")}`;
  }
  // as strict as Hono's router: a trailing slash is another path
  return new RegExp(`^${source || "/"}$`);
}
