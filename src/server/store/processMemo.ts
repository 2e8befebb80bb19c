import type { Db } from './db.js'

/**
 * What this process keeps between requests, per database (a server, and each test's app, has its own),
 * bounded: past `limit` entries the oldest goes. Nothing is kept from inside a transaction, which may
 * still roll back.
 */
export interface ProcessMemo<V> {
  get(db: Db, key: string): V | undefined
  /** Keeps `value` as the newest entry (the last to go). */
  set(db: Db, key: string, value: V): void
  delete(db: Db, key: string): void
}

export function processMemo<V>(limit: number): ProcessMemo<V> {
  const byDatabase = new WeakMap<Db, Map<string, V>>()
  return {
    get: (db, key) => byDatabase.get(db)?.get(key),
    set(db, key, value) {
      if (db.isTransaction) return
      let entries = byDatabase.get(db)
      if (!entries) {
        entries = new Map()
        byDatabase.set(db, entries)
      }
      if (!entries.delete(key) && entries.size >= limit) entries.delete(entries.keys().next().value!)
      entries.set(key, value)
    },
    delete: (db, key) => void byDatabase.get(db)?.delete(key),
  }
}
