import { describe, expect, it } from 'vitest'
import { decodeCursor, encodeCursor, likeEscape, page } from './pagination.js'

describe('pagination', () => {
  it('round-trips a cursor', () => {
    const row = { created_at: new Date('2026-03-01T00:00:00.123Z'), id: 'mrch_x' }
    expect(decodeCursor(encodeCursor(row))).toEqual({ createdAt: row.created_at, id: 'mrch_x' })
  })
  it('rejects garbage as params_validation', () => {
    for (const bad of [
      'x',
      Buffer.from('[1,2]').toString('base64url'),
      Buffer.from('["nope","a"]').toString('base64url'),
      // Dates PostgreSQL cannot store (a 500 once): never issued by encodeCursor.
      Buffer.from('["-200000-01-01T00:00:00.000Z","a"]').toString('base64url'),
      Buffer.from('["+275760-09-13T00:00:00.000Z","a"]').toString('base64url'),
    ]) {
      expect(() => decodeCursor(bad)).toThrow(expect.objectContaining({ code: 'params_validation' }))
    }
  })
  it('has a next cursor only when more rows exist', () => {
    const rows = [1, 2, 3].map((i) => ({ created_at: new Date(i * 1000), id: `r${i}` }))
    expect(page(rows, 3).nextCursor).toBeNull()
    const p = page(rows, 2)
    expect(p.items).toHaveLength(2)
    expect(decodeCursor(p.nextCursor!).id).toBe('r2')
  })
  it('escapes LIKE wildcards', () => {
    expect(likeEscape('50%_off\\')).toBe('50\\%\\_off\\\\')
  })
})
