// biome-ignore lint/suspicious/noExplicitAny: listener arguments are each event's own
type Listener = (...args: any[]) => void

/**
 * The flow's typed event emitter: `on`/`addListener`, `once`, `off`/`removeListener`,
 * `removeAllListeners`, `emit`, `listeners`, `listenerCount`, `eventNames`, as Node's and
 * eventemitter3's. An `error` event with no listener is not thrown (it is also the flow's rejection).
 */
export class Emitter<Events extends { [name: string]: Listener }> {
  readonly #listeners = new Map<keyof Events, { fn: Listener; once: boolean }[]>()

  on<E extends keyof Events>(event: E, fn: Events[E]): this {
    return this.#add(event, fn, false)
  }
  addListener<E extends keyof Events>(event: E, fn: Events[E]): this {
    return this.#add(event, fn, false)
  }
  once<E extends keyof Events>(event: E, fn: Events[E]): this {
    return this.#add(event, fn, true)
  }
  /** Removes `fn` (every registration of it), or every listener of `event` without `fn`. */
  off<E extends keyof Events>(event: E, fn?: Events[E]): this {
    const kept = fn ? (this.#listeners.get(event) ?? []).filter((l) => l.fn !== fn) : []
    if (kept.length > 0) this.#listeners.set(event, kept)
    else this.#listeners.delete(event)
    return this
  }
  removeListener<E extends keyof Events>(event: E, fn?: Events[E]): this {
    return this.off(event, fn)
  }
  removeAllListeners(event?: keyof Events): this {
    if (event === undefined) this.#listeners.clear()
    else this.#listeners.delete(event)
    return this
  }
  emit<E extends keyof Events>(event: E, ...args: Parameters<Events[E]>): boolean {
    const all = this.#listeners.get(event)
    if (!all) return false
    for (const l of all) {
      if (l.once) this.off(event, l.fn as Events[E])
      l.fn(...args)
    }
    return true
  }
  listeners<E extends keyof Events>(event: E): Events[E][] {
    return (this.#listeners.get(event) ?? []).map((l) => l.fn as Events[E])
  }
  listenerCount(event: keyof Events): number {
    return this.#listeners.get(event)?.length ?? 0
  }
  eventNames(): (keyof Events)[] {
    return [...this.#listeners.keys()]
  }

  #add(event: keyof Events, fn: Listener, once: boolean): this {
    this.#listeners.set(event, [...(this.#listeners.get(event) ?? []), { fn, once }])
    return this
  }
}
