import { openApiDocument, wcpOpenApiDocument } from '../../src/server/openapi.js'

interface Operation {
  responses: Record<
    string,
    { content?: { 'application/json'?: { schema?: { properties?: { code?: { enum?: string[] } } } } } }
  >
}

/** Every operation of both published documents, by method and a regex of its path. */
const operations = [openApiDocument('http://127.0.0.1'), wcpOpenApiDocument('http://127.0.0.1')].flatMap(
  (doc) =>
    Object.entries(doc.paths as Record<string, Record<string, Operation>>).flatMap(([path, item]) =>
      Object.entries(item).map(([method, operation]) => ({
        method: method.toUpperCase(),
        pattern: new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}/?$`),
        operation,
      })),
    ),
)

/**
 * Why an answer is not what the published document says its operation answers (a status it does not
 * list, or an error code its status does not list), or undefined when it is. Paths outside the documents
 * (pages, /docs) and methods a path lacks (405) are not operations and pass.
 */
export function undocumented(method: string, url: string, status: number, body: string): string | undefined {
  const path = url.split('?')[0]!
  const matches = operations.filter((o) => o.method === method.toUpperCase() && o.pattern.test(path))
  // A static path wins over a parameterised one, as in the router.
  const params = (o: { pattern: RegExp }) => o.pattern.source.split('[^/]+').length
  const found = matches.sort((a, b) => params(a) - params(b)).at(0)
  if (!found) return undefined
  // The router found no route after all (dot segments, encodings), or the path it resolved to is
  // another route's, served under other methods (405 + Allow): not this operation's answer.
  if (status === 404 && body.includes('"No route ')) return undefined
  if (status === 405 && body.includes(' is not allowed here; use ')) return undefined
  const response = found.operation.responses[String(status)]
  if (!response) return `${method} ${path} answered ${status}, which its operation does not list`
  if (status < 400) return undefined
  let code: unknown
  try {
    code = (JSON.parse(body) as { code?: unknown }).code
  } catch {
    return `${method} ${path} answered ${status} without a JSON error body`
  }
  const codes = response.content?.['application/json']?.schema?.properties?.code?.enum ?? []
  if (typeof code !== 'string' || !codes.includes(code))
    return `${method} ${path} answered ${status} ${String(code)}, which its operation lists only as ${codes.join(', ')}`
  return undefined
}
