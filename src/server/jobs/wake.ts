/**
 * In-process wake-ups for work that a statement just committed (payment creation's event: see
 * webhooks/dispatch.ts). Only a shortcut: whoever listens also polls, so a wake-up lost (another
 * instance, a crash) costs latency, never an event.
 */
const listeners = new Set<() => void>()

export function onWake(listener: () => void): () => void {
  listeners.add(listener)
  return () => listeners.delete(listener)
}

export function wake(): void {
  for (const listener of listeners) listener()
}
