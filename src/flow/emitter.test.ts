import { describe, expect, it } from 'vitest'
import { Emitter } from './emitter.js'

type Events = { ping: (event: { n: number }) => void; error: (error: Error) => void }

describe('Emitter', () => {
  it('calls listeners in the order they were added, with the payload, and says whether any was called', () => {
    const emitter = new Emitter<Events>()
    const calls: string[] = []
    expect(emitter.emit('ping', { n: 0 })).toBe(false)
    emitter.on('ping', ({ n }) => calls.push(`a${n}`)).addListener('ping', ({ n }) => calls.push(`b${n}`))
    expect(emitter.emit('ping', { n: 1 })).toBe(true)
    expect(calls).toEqual(['a1', 'b1'])
    expect(emitter.listenerCount('ping')).toBe(2)
    expect(emitter.eventNames()).toEqual(['ping'])
  })

  it('runs a once listener once, even when it emits again from inside itself', () => {
    const emitter = new Emitter<Events>()
    const seen: number[] = []
    emitter.once('ping', ({ n }) => {
      seen.push(n)
      emitter.emit('ping', { n: n + 1 })
    })
    emitter.emit('ping', { n: 1 })
    emitter.emit('ping', { n: 5 })
    expect(seen).toEqual([1])
    expect(emitter.listenerCount('ping')).toBe(0)
  })

  it('removes one listener, every listener of an event, or all; a listener removed during an emit still runs in it', () => {
    const emitter = new Emitter<Events>()
    const calls: string[] = []
    const b = () => calls.push('b')
    emitter.on('ping', () => {
      calls.push('a')
      emitter.off('ping', b)
    })
    emitter.on('ping', b)
    emitter.emit('ping', { n: 1 })
    emitter.emit('ping', { n: 2 })
    expect(calls).toEqual(['a', 'b', 'a'])
    expect(emitter.listeners('ping')).toHaveLength(1)
    emitter.on('error', () => {})
    emitter.removeListener('ping')
    expect(emitter.eventNames()).toEqual(['error'])
    emitter.removeAllListeners()
    expect(emitter.eventNames()).toEqual([])
  })

  it('does not throw an error event nobody listens to (the flow also rejects with it)', () => {
    expect(new Emitter<Events>().emit('error', new Error('x'))).toBe(false)
  })
})
