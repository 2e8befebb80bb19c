import type { SignatureStatus } from '@solana/web3.js'
import { describe, expect, it } from 'vitest'
import { reachedCommitment } from './watcher.js'

const status = (confirmationStatus: SignatureStatus['confirmationStatus']): SignatureStatus => ({
  slot: 1,
  confirmations: null,
  err: null,
  ...(confirmationStatus ? { confirmationStatus } : {}),
})

describe('Solana commitment per chain', () => {
  it('a confirmed chain counts confirmed and finalized transactions, never processed ones', () => {
    expect(reachedCommitment(status('processed'), 'confirmed')).toBe(false)
    expect(reachedCommitment(status(undefined), 'confirmed')).toBe(false)
    expect(reachedCommitment(status('confirmed'), 'confirmed')).toBe(true)
    expect(reachedCommitment(status('finalized'), 'confirmed')).toBe(true)
  })

  it('a finalized chain leaves a confirmed transaction uncounted (payment stays processing) until it is finalized', () => {
    expect(reachedCommitment(status('processed'), 'finalized')).toBe(false)
    expect(reachedCommitment(status('confirmed'), 'finalized')).toBe(false)
    expect(reachedCommitment(status('finalized'), 'finalized')).toBe(true)
  })
})
