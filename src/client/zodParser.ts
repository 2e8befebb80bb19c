import * as z from 'zod/mini'
import type { Parse } from '../contract/validate.js'

/** A zod schema as an HTTP response check, for clients outside the size-budgeted wallet core. */
export function zodParser<T>(schema: z.ZodMiniType<T>): Parse<T> {
  return (json) => {
    const parsed = z.safeParse(schema, json)
    if (parsed.success) return { ok: true, value: parsed.data }
    return {
      ok: false,
      issues: parsed.error.issues.map((issue) => ({ path: issue.path.join('.'), message: issue.message })),
    }
  }
}
