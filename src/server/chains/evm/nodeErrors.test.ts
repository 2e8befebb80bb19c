import { describe, expect, it } from 'vitest'
import { nodeRefusal } from './nodeErrors.js'

describe('nodeRefusal', () => {
  it('names the refusals of the nodes caipay meets, in their own words', () => {
    for (const message of [
      'replacement transaction underpriced',
      'transaction underpriced: tip needed 1, tip permitted 0',
      'max fee per gas less than block base fee',
      'fee too low to replace',
      'fee cap less than base fee',
    ])
      expect(nodeRefusal(new Error(message)), message).toBe('fees_too_low')
    for (const message of ['already known', 'known transaction: 0xab', 'Transaction already imported'])
      expect(nodeRefusal(new Error(message)), message).toBe('already_known')
    expect(nodeRefusal(new Error('nonce too low: next nonce 5, tx nonce 4'))).toBe('nonce_too_low')
    expect(nodeRefusal(new Error('execution reverted'))).toBeUndefined()
    expect(nodeRefusal(undefined)).toBeUndefined()
  })
})
