import { describe, expect, it } from 'vitest'
import {
  assertTransition,
  canTransition,
  flowStates,
  flowTransitions,
  isTerminalState,
  terminalStates,
} from './states.js'

const legal = flowStates.flatMap((from) => flowTransitions[from].map((to) => [from, to] as const))

describe('flow transition table', () => {
  it('names only known states and ends exactly in the terminal ones', () => {
    for (const [from, to] of legal) {
      expect(flowStates).toContain(from)
      expect(flowStates).toContain(to)
    }
    expect(flowStates.filter(isTerminalState)).toEqual([...terminalStates])
  })

  it('lets every non-final state be cancelled', () => {
    for (const state of flowStates.filter((s) => !isTerminalState(s))) {
      expect(canTransition(state, 'cancelled')).toBe(true)
    }
  })

  it.each(legal)('allows %s -> %s', (from, to) => {
    expect(() => assertTransition(from, to)).not.toThrow()
  })

  it.each([
    ['idle', 'signing'],
    ['idle', 'failed'],
    ['selecting', 'signing'],
    ['collectingData', 'confirming'],
    ['fetchingActions', 'confirming'],
    ['signing', 'polling'],
    ['signing', 'expired'],
    ['polling', 'selecting'],
    ['succeeded', 'failed'],
    ['failed', 'idle'],
    ['cancelled', 'cancelled'],
    ['expired', 'polling'],
  ] as const)('refuses %s -> %s with invalid_transition {from, to}', (from, to) => {
    expect(() => assertTransition(from, to)).toThrowError(
      expect.objectContaining({ code: 'invalid_transition', context: { from, to } }),
    )
  })
})
