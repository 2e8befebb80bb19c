import { Kysely, PostgresDialect, sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { columnList, identifier, nameLiteral, quotedIdentifier } from './identifiers.js'

// Compiles without a connection: only the text is looked at.
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: {} as never }) })
const text = (fragment: ReturnType<typeof identifier>) => sql`${fragment}`.compile(db).sql

describe('fixed SQL fragments', () => {
  it('quotes plain identifiers and joins qualified ones', () => {
    expect(text(identifier('payments', 'status'))).toBe('"payments"."status"')
    expect(text(identifier('status'))).toBe('"status"')
    expect(text(nameLiteral('amount_value'))).toBe("'amount_value'")
    const columns = ['id', 'status'] as const
    expect(text(columnList(columns))).toBe('"id", "status"')
    expect(text(columnList(columns, 'old'))).toBe('"old"."id", "old"."status"')
    expect(columnList(columns, 'old')).toBe(columnList(columns, 'old'))
  })

  it('refuses anything but a plain lower-case identifier, also once a look-alike is cached', () => {
    identifier('a', 'b')
    for (const name of ['a.b', 'A', 'x"; DROP TABLE payments; --', "it's", '1st', ''])
      expect(() => identifier(name), name).toThrow(/Not a plain identifier/)
    expect(() => nameLiteral("x'y")).toThrow(/Not a plain identifier/)
    expect(() => columnList(['ok', 'not ok'])).toThrow(/Not a plain identifier/)
    expect(() => quotedIdentifier('Payments')).toThrow(/Not a plain identifier/)
  })
})
